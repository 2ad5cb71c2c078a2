//! Faults: the Toxiproxy client and the timeline player.
