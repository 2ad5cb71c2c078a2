//! How a target's requests use connections: a cap on those in use, keep-alive, and a cap on
//! those kept idle. The churn they cause (connections opened) is counted per request
//! ([`super::Sample`]).

use std::num::NonZeroUsize;

use super::DropCause;

/// How a target's requests use connections (a scenario's `[[targets]]` entry sets them).
///
/// A connection carries one request at a time, so `max` caps the target's requests in flight
/// (a retrying request holds its place through its backoff), and with them the connections in
/// use; idle kept-alive connections are not counted (each sender keeps its own per instance).
/// A request due while the cap is reached is dropped and counted
/// ([`DropCause::ConnectionCap`]), never held back: an open-model generator that waited for a
/// connection would send late and measure itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Connections {
    /// Connections in use at once, at most; `None`: only the scenario's in-flight bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<NonZeroUsize>,
    /// Whether a connection is kept for the next request (closed after 4 s idle); without,
    /// every request opens a connection of its own and closes it, as a client without a
    /// connection pool does.
    #[serde(default = "kept")]
    pub keep_alive: bool,
    /// Idle kept-alive connections kept per instance, at most (per sender thread, and per
    /// source address for a target told callers by address); a connection coming back to a
    /// full pool is closed, the least recently used first, as Go's `MaxIdleConnsPerHost`
    /// does. `None`: every connection a peak opened is kept until idle 4 s. Only with
    /// keep-alive (the scenario refuses it without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_idle: Option<NonZeroUsize>,
}

fn kept() -> bool {
    true
}

impl Default for Connections {
    fn default() -> Self {
        Self {
            max: None,
            keep_alive: true,
            max_idle: None,
        }
    }
}

impl Connections {
    /// A target's bound on requests in flight with `scenario_bound` (the scenario's per
    /// target), and what a request dropped at it is dropped for: the cap, when it is set and
    /// no higher.
    pub fn bound(&self, scenario_bound: usize) -> (usize, DropCause) {
        match self.max {
            Some(max) if max.get() <= scenario_bound => (max.get(), DropCause::ConnectionCap),
            _ => (scenario_bound, DropCause::InFlightBound),
        }
    }

    /// How many idle connections one pool keeps, at most.
    pub(crate) fn idle_cap(&self) -> usize {
        self.max_idle.map_or(usize::MAX, NonZeroUsize::get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_of_the_in_flight_bound_and_the_connection_cap_binds_and_names_the_cause() {
        let capped = |max| Connections {
            max: NonZeroUsize::new(max),
            keep_alive: true,
            max_idle: None,
        };
        assert_eq!(capped(5).bound(100), (5, DropCause::ConnectionCap));
        assert_eq!(capped(500).bound(100), (100, DropCause::InFlightBound));
        assert_eq!(capped(100).bound(100), (100, DropCause::ConnectionCap));
        assert_eq!(
            Connections::default().bound(100),
            (100, DropCause::InFlightBound)
        );
    }

    #[test]
    fn settings_written_without_keep_alive_read_as_kept_alive() {
        let c: Connections = serde_json::from_str(r#"{"max": 5}"#).unwrap();
        assert_eq!(
            (c.max, c.keep_alive, c.max_idle),
            (NonZeroUsize::new(5), true, None)
        );
        assert_eq!(c.idle_cap(), usize::MAX, "no cap on the idle ones");
    }
}
