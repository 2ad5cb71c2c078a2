//! Why a decision was taken without the store, and what the log says about it: one line a
//! second while it happens (fallbacks by route and reason) and one when the store is back,
//! never a line per request or a pair per flip of a flapping connection.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::StoreError;

/// Why the store was not used for a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackReason {
    Timeout,
    Connection,
    BreakerOpen,
    /// A store-wide error reply ([`crate::store::STORE_WIDE`]).
    Refused,
    /// An error about this call only (a script error).
    Error,
    /// The store is back, but the route took turns of its local share in this window or the
    /// one before: it decides by them until the fleet's rejoin window, so the fleet returns to
    /// the store together.
    Rejoining,
}

impl FallbackReason {
    pub const ALL: [Self; 6] = [
        Self::Timeout,
        Self::Connection,
        Self::BreakerOpen,
        Self::Refused,
        Self::Error,
        Self::Rejoining,
    ];

    pub fn of(e: &StoreError) -> Self {
        match e {
            StoreError::Timeout(_) => Self::Timeout,
            StoreError::Connection(_) => Self::Connection,
            StoreError::Refused(_) => Self::Refused,
            StoreError::Reply(_) => Self::Error,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Connection => "connection",
            Self::BreakerOpen => "breaker_open",
            Self::Refused => "refused",
            Self::Error => "error",
            Self::Rejoining => "rejoining",
        }
    }
}

type Counts = [u64; FallbackReason::ALL.len()];

/// Fallbacks since the last look, by route and reason; counted on the request path without a
/// lock.
#[derive(Debug)]
pub struct Tally {
    routes: Vec<[AtomicU64; FallbackReason::ALL.len()]>,
}

impl Tally {
    pub fn new(routes: usize) -> Self {
        Self {
            routes: (0..routes).map(|_| Default::default()).collect(),
        }
    }

    pub fn add(&self, route: usize, reason: FallbackReason) {
        self.routes[route][reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts since the last take, by route.
    pub fn take(&self) -> Vec<Counts> {
        self.routes
            .iter()
            .map(|r| std::array::from_fn(|i| r[i].swap(0, Ordering::Relaxed)))
            .collect()
    }
}

/// What the log says at the end of one second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// Decisions were taken without the store in the second: `route:reason=n,…;…`.
    Degraded { fallbacks: String, total: u64 },
    /// The store answered, but with an error about some calls (a script error on a caller's
    /// key): those fell back, and nothing else did.
    CallErrors { fallbacks: String, total: u64 },
    /// A second without fallbacks after some, with the store answering.
    Recovered { seconds: u64, decisions: u64 },
}

/// Follows the seconds of one outage, from the first with a fallback to the first without.
#[derive(Debug, Default)]
pub struct Summary {
    /// Seconds with fallbacks so far, and the decisions they took.
    outage: Option<(u64, u64)>,
}

impl Summary {
    /// The line for the second that just ended, if any: `counts` by route (named in `routes`),
    /// and whether the instance is still degraded (a degraded instance with no request in a
    /// second has not recovered). Script errors alone are not an outage: the store answers.
    pub fn second(&mut self, counts: &[Counts], routes: &[&str], degraded: bool) -> Option<Line> {
        let total: u64 = counts.iter().flatten().sum();
        let call_errors: u64 = counts
            .iter()
            .map(|c| c[FallbackReason::Error as usize])
            .sum();
        if total > call_errors || (degraded && total > 0) {
            let (seconds, decisions) = self.outage.get_or_insert((0, 0));
            *seconds += 1;
            *decisions += total;
            return Some(Line::Degraded {
                fallbacks: describe(counts, routes),
                total,
            });
        }
        if degraded {
            return None;
        }
        if let Some((seconds, decisions)) = self.outage.take() {
            return Some(Line::Recovered { seconds, decisions });
        }
        (total > 0).then(|| Line::CallErrors {
            fallbacks: describe(counts, routes),
            total,
        })
    }
}

/// `api:timeout=3,breaker_open=120;login:breaker_open=4`: one token, for logfmt readers.
fn describe(counts: &[Counts], routes: &[&str]) -> String {
    let mut out = String::new();
    for (route, counts) in routes.iter().zip(counts) {
        if counts.iter().all(|&n| n == 0) {
            continue;
        }
        if !out.is_empty() {
            out.push(';');
        }
        let _ = write!(out, "{route}:");
        let mut first = true;
        for (reason, n) in FallbackReason::ALL.iter().zip(counts) {
            if *n > 0 {
                let _ = write!(
                    out,
                    "{}{}={n}",
                    if first { "" } else { "," },
                    reason.label()
                );
                first = false;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_one_line_a_second_and_one_when_it_ends() {
        let mut s = Summary::default();
        let routes = ["api", "login"];
        let quiet = [[0; 6], [0; 6]];
        assert_eq!(s.second(&quiet, &routes, false), None);
        let busy = [[3, 0, 120, 0, 0, 0], [0, 0, 4, 0, 0, 0]];
        assert_eq!(
            s.second(&busy, &routes, true),
            Some(Line::Degraded {
                fallbacks: "api:timeout=3,breaker_open=120;login:breaker_open=4".into(),
                total: 127
            })
        );
        // No request in a second, still degraded: nothing to say, the outage goes on.
        assert_eq!(s.second(&quiet, &routes, true), None);
        let one = [[0; 6], [0, 1, 0, 0, 0, 0]];
        assert!(matches!(
            s.second(&one, &routes, true),
            Some(Line::Degraded { total: 1, .. })
        ));
        assert_eq!(
            s.second(&quiet, &routes, false),
            Some(Line::Recovered {
                seconds: 2,
                decisions: 128
            })
        );
        assert_eq!(s.second(&quiet, &routes, false), None);
    }

    #[test]
    fn script_errors_alone_are_their_own_line_not_an_outage() {
        let mut s = Summary::default();
        let errors = [[0, 0, 0, 0, 2, 0], [0; 6]];
        assert_eq!(
            s.second(&errors, &["api", "login"], false),
            Some(Line::CallErrors {
                fallbacks: "api:error=2".into(),
                total: 2
            })
        );
        assert_eq!(s.second(&[[0; 6], [0; 6]], &["api", "login"], false), None);
    }

    #[test]
    fn the_tally_counts_by_route_and_reason_and_starts_again_when_taken() {
        let t = Tally::new(2);
        t.add(1, FallbackReason::Refused);
        t.add(1, FallbackReason::Refused);
        t.add(0, FallbackReason::Timeout);
        assert_eq!(t.take(), vec![[1, 0, 0, 0, 0, 0], [0, 0, 0, 2, 0, 0]]);
        assert_eq!(t.take(), vec![[0; 6], [0; 6]]);
    }
}
