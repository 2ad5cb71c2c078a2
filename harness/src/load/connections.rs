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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "Written", into = "Written")]
pub struct Connections {
    /// Connections in use at once, at most; `None`: only the scenario's in-flight bound.
    pub max: Option<NonZeroUsize>,
    /// Whether a connection is kept for the next request, and how many idle.
    pub keep_alive: KeepAlive,
}

/// Whether a connection is kept for the next request, and how many are kept idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// Every request opens a connection of its own and closes it, as a client without a
    /// connection pool does.
    Off,
    /// Kept for the next request until idle 4 s, with at most `max_idle` idle per instance
    /// (per sender thread and source address); `None`: as many as a peak opened. A connection
    /// coming back to a full pool closes the least recently used one: Go's
    /// `MaxIdleConnsPerHost` keeps as many but closes the one coming back, and the fresher
    /// connection is the less likely to meet a server's own idle timeout.
    On { max_idle: Option<NonZeroUsize> },
}

impl Default for KeepAlive {
    fn default() -> Self {
        Self::On { max_idle: None }
    }
}

impl KeepAlive {
    /// From the scenario's (and run.json's) `keep_alive` and idle cap; `None` for a cap
    /// without keep-alive, where no connection is kept to cap.
    pub fn new(on: bool, max_idle: Option<NonZeroUsize>) -> Option<Self> {
        match (on, max_idle) {
            (true, max_idle) => Some(Self::On { max_idle }),
            (false, None) => Some(Self::Off),
            (false, Some(_)) => None,
        }
    }

    pub fn is_on(self) -> bool {
        matches!(self, Self::On { .. })
    }

    /// How many idle connections one pool keeps, at most (`None`: no cap).
    pub fn max_idle(self) -> Option<NonZeroUsize> {
        match self {
            Self::Off => None,
            Self::On { max_idle } => max_idle,
        }
    }
}

/// As `run.json` writes it: `keep_alive` a flag beside the caps.
#[derive(serde::Serialize, serde::Deserialize)]
struct Written {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max: Option<NonZeroUsize>,
    #[serde(default = "kept")]
    keep_alive: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_idle: Option<NonZeroUsize>,
}

fn kept() -> bool {
    true
}

impl TryFrom<Written> for Connections {
    type Error = &'static str;

    fn try_from(w: Written) -> Result<Self, Self::Error> {
        let keep_alive = KeepAlive::new(w.keep_alive, w.max_idle)
            .ok_or("max_idle without keep_alive: none is kept")?;
        Ok(Self {
            max: w.max,
            keep_alive,
        })
    }
}

impl From<Connections> for Written {
    fn from(c: Connections) -> Self {
        Self {
            max: c.max,
            keep_alive: c.keep_alive.is_on(),
            max_idle: c.keep_alive.max_idle(),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_of_the_in_flight_bound_and_the_connection_cap_binds_and_names_the_cause() {
        let capped = |max| Connections {
            max: NonZeroUsize::new(max),
            keep_alive: KeepAlive::default(),
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
    fn settings_written_without_keep_alive_read_as_kept_alive_and_round_trip() {
        let c: Connections = serde_json::from_str(r#"{"max": 5}"#).unwrap();
        assert_eq!(
            c,
            Connections {
                max: NonZeroUsize::new(5),
                keep_alive: KeepAlive::On { max_idle: None }
            }
        );
        for text in [
            r#"{"max":5,"keep_alive":true}"#,
            r#"{"keep_alive":false}"#,
            r#"{"keep_alive":true,"max_idle":3}"#,
        ] {
            let c: Connections = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&c).unwrap(), text);
        }
    }

    #[test]
    fn an_idle_cap_without_keep_alive_is_refused_when_read() {
        let e = serde_json::from_str::<Connections>(r#"{"keep_alive":false,"max_idle":3}"#)
            .unwrap_err();
        assert!(e.to_string().contains("max_idle without keep_alive"), "{e}");
    }
}
