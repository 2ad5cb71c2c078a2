//! `/metrics`: one Prometheus counter of `/api` requests by decision and status, so a test
//! can compare what failmode counted with what the oracle decided.
//!
//! Written by hand: one counter family does not need a metrics library.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

/// Why a request was answered as it was, beyond the script's answers.
pub const WARM_UP: &str = "warm_up";
pub const BAD_REQUEST: &str = "bad_request";

/// Requests by (decision, status); `None`: no status, the connection was dropped.
#[derive(Debug, Default)]
pub struct Counters {
    counts: Mutex<BTreeMap<(&'static str, Option<u16>), u64>>,
}

impl Counters {
    pub fn count(&self, decision: &'static str, status: Option<u16>) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        *counts.entry((decision, status)).or_default() += 1;
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let mut text = String::from(
            "# HELP failmode_oracle_requests_total Requests to /api, by the oracle's decision.\n\
             # TYPE failmode_oracle_requests_total counter\n",
        );
        for ((decision, status), n) in counts.iter() {
            let status = status.map_or_else(|| "none".to_owned(), |s| s.to_string());
            // Writing to a String cannot fail.
            let _ = writeln!(
                text,
                "failmode_oracle_requests_total{{decision=\"{decision}\",status=\"{status}\"}} {n}"
            );
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_encoded_by_decision_and_status() {
        let counters = Counters::default();
        counters.count("admitted", Some(200));
        counters.count("admitted", Some(200));
        counters.count("dropped", None);
        let text = counters.encode();
        assert!(
            text.starts_with("# HELP failmode_oracle_requests_total"),
            "{text}"
        );
        assert!(
            text.contains(
                "failmode_oracle_requests_total{decision=\"admitted\",status=\"200\"} 2\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "failmode_oracle_requests_total{decision=\"dropped\",status=\"none\"} 1\n"
            ),
            "{text}"
        );
    }
}
