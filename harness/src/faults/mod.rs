//! Faults: the Toxiproxy client.

pub mod toxiproxy;
