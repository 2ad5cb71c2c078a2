//! Child processes the harness starts: redis-server, toxiproxy-server, target instances.
