//! How a tenant's clients react to what comes back (a per-tenant setting of the scenario):
//! not at all, retrying at once, retrying after an exponential backoff with full jitter,
//! retrying when told to by `Retry-After`, or throttling themselves with Google SRE's adaptive
//! client throttling.
//!
//! A retry belongs to the request it repeats: the request's outcome is its last attempt's,
//! its latency runs from its first scheduled send to that last answer, and the attempts after
//! the first are counted apart (`retries`), so a report shows how much load the clients added
//! on top of what was offered. A request the client's own throttling refused was never sent
//! (`throttled`).

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use rand::Rng;
use serde::Deserialize;

use super::Outcome;

/// A tenant's client behaviour, as a scenario writes it: `client = { type = "retry-5xx",
/// attempts = 3 }`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Client {
    /// Every request sent once, whatever comes back.
    #[default]
    None,
    /// A 5xx or a transport failure (refused, reset, timed out) sent again at once, up to
    /// `attempts` attempts in all.
    #[serde(rename = "retry-5xx")]
    Retry5xx {
        #[serde(default = "default_attempts")]
        attempts: u32,
    },
    /// As `retry-5xx`, after a wait drawn uniformly from [0, min(cap, base × 2^(n − 1))]
    /// before the n-th retry ("full jitter").
    RetryBackoff {
        #[serde(default = "default_attempts")]
        attempts: u32,
        #[serde(default = "default_base", with = "crate::duration")]
        base: Duration,
        #[serde(default = "default_cap", with = "crate::duration")]
        cap: Duration,
    },
    /// A 429 or 503 that carries `Retry-After` (delta-seconds) sent again after waiting what
    /// it says, up to `attempts` attempts in all; anything else is not retried, nor is an
    /// answer telling it to wait longer than `max_wait` (the client gives up).
    HonourRetryAfter {
        #[serde(default = "default_attempts")]
        attempts: u32,
        #[serde(default = "default_max_wait", with = "crate::duration")]
        max_wait: Duration,
    },
    /// Google SRE's adaptive client throttling: each request is refused by the client itself
    /// with probability max(0, (requests − k × accepts) / (requests + 1)) over the last
    /// `window`, where requests counts the requests answered and those refused locally, and
    /// accepts those the server admitted (2xx): a request counts once its fate is known, as in
    /// grpc-go's throttler, so one still in flight counts for neither and slow answers alone
    /// never make the client refuse. Never retries.
    AdaptiveThrottling {
        #[serde(default = "default_k")]
        k: f64,
        #[serde(default = "default_window", with = "crate::duration")]
        window: Duration,
    },
}

fn default_attempts() -> u32 {
    3
}

fn default_base() -> Duration {
    Duration::from_millis(100)
}

fn default_cap() -> Duration {
    Duration::from_secs(2)
}

fn default_max_wait() -> Duration {
    Duration::from_secs(30)
}

/// The SRE book's K: "a value of 2" lets through twice what the backend accepts.
fn default_k() -> f64 {
    2.0
}

/// The SRE book's history: "the last two minutes".
fn default_window() -> Duration {
    Duration::from_secs(120)
}

/// What a client may retry at all: the server failed or never answered. A 429 is the
/// server's decision, not a failure.
fn failed(outcome: Outcome) -> bool {
    matches!(
        outcome,
        Outcome::ServerError | Outcome::Unavailable | Outcome::Transport(_)
    )
}

impl Client {
    /// After attempt number `sent` (1 for the first) came back as `outcome`, with the
    /// answer's `Retry-After` if any: how long to wait before the next attempt, or `None` to
    /// stop there.
    pub fn next_wait(
        &self,
        sent: u32,
        outcome: Outcome,
        retry_after: Option<Duration>,
        rng: &mut impl Rng,
    ) -> Option<Duration> {
        match *self {
            Self::None | Self::AdaptiveThrottling { .. } => None,
            Self::Retry5xx { attempts } => {
                (sent < attempts && failed(outcome)).then_some(Duration::ZERO)
            }
            Self::RetryBackoff {
                attempts,
                base,
                cap,
            } => (sent < attempts && failed(outcome))
                .then(|| backoff_ceiling(base, cap, sent).mul_f64(rng.random::<f64>())),
            Self::HonourRetryAfter { attempts, max_wait } => {
                let told = matches!(outcome, Outcome::Limited | Outcome::Unavailable);
                retry_after.filter(|wait| told && sent < attempts && *wait <= max_wait)
            }
        }
    }

    /// The longest one request can take, its retries and their waits included, when each
    /// attempt takes at most `timeout`.
    pub fn longest(&self, timeout: Duration) -> Duration {
        let chain = |attempts: u32, wait: Duration| {
            timeout.saturating_mul(attempts.max(1))
                + wait.saturating_mul(attempts.saturating_sub(1))
        };
        match *self {
            Self::None | Self::AdaptiveThrottling { .. } => timeout,
            Self::Retry5xx { attempts } => chain(attempts, Duration::ZERO),
            Self::RetryBackoff { attempts, cap, .. } => chain(attempts, cap),
            Self::HonourRetryAfter { attempts, max_wait } => chain(attempts, max_wait),
        }
    }

    /// Whether any request of this client can be sent more than once.
    pub fn retries(&self) -> bool {
        !matches!(self, Self::None | Self::AdaptiveThrottling { .. })
    }
}

/// min(cap, base × 2^(retry − 1)) for the `retry`-th retry (1 for the first).
fn backoff_ceiling(base: Duration, cap: Duration, retry: u32) -> Duration {
    let doublings = retry.saturating_sub(1).min(30);
    base.saturating_mul(1 << doublings).min(cap)
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Retry5xx { attempts } => write!(f, "retry-5xx ({attempts} attempts)"),
            Self::RetryBackoff {
                attempts,
                base,
                cap,
            } => write!(
                f,
                "retry-backoff ({attempts} attempts, full jitter from {base:?}, capped at {cap:?})"
            ),
            Self::HonourRetryAfter { attempts, max_wait } => write!(
                f,
                "honour-retry-after ({attempts} attempts, waits up to {max_wait:?})"
            ),
            Self::AdaptiveThrottling { k, window } => {
                write!(f, "adaptive-throttling (K = {k}, over {window:?})")
            }
        }
    }
}

/// A `Retry-After` header's delta-seconds (`"1"`, `"30"`). The HTTP-date form is not read:
/// a limiter states a delay, and none of the targets sends a date.
pub fn parse_retry_after(value: &[u8]) -> Option<Duration> {
    std::str::from_utf8(value)
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// The adaptive throttle's history: requests and accepts per whole second, over the window.
///
/// Hand-written: the book's formula over a sliding history is a dozen lines, and no crate
/// offers it apart from a whole RPC framework.
#[derive(Debug, Clone)]
pub struct Throttle {
    k: f64,
    window_s: u64,
    /// (second, requests, accepts), oldest first, seconds within the window only.
    seconds: VecDeque<(u64, u64, u64)>,
}

impl Throttle {
    pub fn new(k: f64, window: Duration) -> Self {
        Self {
            k,
            window_s: window.as_secs().max(1),
            seconds: VecDeque::new(),
        }
    }

    fn slot(&mut self, now: Duration) -> &mut (u64, u64, u64) {
        let second = now.as_secs();
        while self
            .seconds
            .front()
            .is_some_and(|&(s, _, _)| s + self.window_s <= second)
        {
            self.seconds.pop_front();
        }
        if self.seconds.back().is_none_or(|&(s, _, _)| s < second) {
            self.seconds.push_back((second, 0, 0));
        }
        // A clock that never goes back: the last slot is this second's.
        let last = self.seconds.len() - 1;
        &mut self.seconds[last]
    }

    /// The chance of refusing the next request, from the history before it.
    pub fn reject_probability(&mut self, now: Duration) -> f64 {
        self.slot(now);
        let (requests, accepts) = self
            .seconds
            .iter()
            .fold((0, 0), |(r, a), &(_, sr, sa)| (r + sr, a + sa));
        ((requests as f64 - self.k * accepts as f64) / (requests as f64 + 1.0)).max(0.0)
    }

    /// A request the client refused itself.
    pub fn refused_locally(&mut self, now: Duration) {
        self.slot(now).1 += 1;
    }

    /// A request sent, now that its fate is known: `admitted` by the server (2xx), or not
    /// (refused, failed, timed out).
    pub fn answered(&mut self, now: Duration, admitted: bool) {
        let slot = self.slot(now);
        slot.1 += 1;
        slot.2 += u64::from(admitted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::TransportError;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn rng() -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(7)
    }

    #[test]
    fn retry_5xx_repeats_failures_at_once_until_its_attempts_are_spent() {
        let c = Client::Retry5xx { attempts: 3 };
        let mut r = rng();
        for failure in [
            Outcome::ServerError,
            Outcome::Unavailable,
            Outcome::Transport(TransportError::Refused),
        ] {
            assert_eq!(c.next_wait(1, failure, None, &mut r), Some(Duration::ZERO));
            assert_eq!(c.next_wait(2, failure, None, &mut r), Some(Duration::ZERO));
            assert_eq!(c.next_wait(3, failure, None, &mut r), None);
        }
        for answer in [
            Outcome::Admitted,
            Outcome::Limited,
            Outcome::OtherStatus(404),
        ] {
            assert_eq!(c.next_wait(1, answer, None, &mut r), None, "{answer:?}");
        }
    }

    #[test]
    fn honour_retry_after_waits_what_it_is_told_and_only_when_told() {
        let c = Client::HonourRetryAfter {
            attempts: 2,
            max_wait: Duration::from_secs(30),
        };
        let mut r = rng();
        let told = Some(Duration::from_secs(1));
        let too_long = Some(Duration::from_secs(u64::MAX));
        assert_eq!(c.next_wait(1, Outcome::Limited, too_long, &mut r), None);
        assert_eq!(c.next_wait(1, Outcome::Unavailable, told, &mut r), told);
        assert_eq!(c.next_wait(1, Outcome::Limited, told, &mut r), told);
        assert_eq!(c.next_wait(2, Outcome::Limited, told, &mut r), None);
        assert_eq!(c.next_wait(1, Outcome::Unavailable, None, &mut r), None);
        assert_eq!(c.next_wait(1, Outcome::ServerError, told, &mut r), None);
    }

    #[test]
    fn neither_none_nor_the_throttle_ever_retries() {
        let mut r = rng();
        for c in [
            Client::None,
            Client::AdaptiveThrottling {
                k: 2.0,
                window: default_window(),
            },
        ] {
            assert!(!c.retries());
            assert_eq!(c.next_wait(1, Outcome::ServerError, None, &mut r), None);
        }
    }

    #[test]
    fn the_longest_request_counts_every_attempt_and_every_wait() {
        let t = Duration::from_secs(2);
        assert_eq!(Client::None.longest(t), t);
        assert_eq!(Client::Retry5xx { attempts: 3 }.longest(t), 3 * t);
        let backoff = Client::RetryBackoff {
            attempts: 4,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
        };
        assert_eq!(backoff.longest(t), 4 * t + 3 * Duration::from_secs(1));
    }

    #[test]
    fn retry_after_reads_delta_seconds_only() {
        assert_eq!(parse_retry_after(b" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(b"Wed, 21 Oct 2026 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after(b"-1"), None);
    }

    #[test]
    fn the_throttle_refuses_nothing_while_the_server_accepts_and_more_as_it_refuses() {
        let mut t = Throttle::new(2.0, Duration::from_secs(120));
        let at = |ms: u64| Duration::from_millis(ms);
        for i in 0..100 {
            assert_eq!(t.reject_probability(at(i * 10)), 0.0);
            t.answered(at(i * 10), true);
        }
        // The server now refuses everything: once requests pass twice the accepts, the
        // client starts refusing, and the chance climbs towards 1.
        let mut last = 0.0;
        for i in 100..1_000 {
            let p = t.reject_probability(at(i * 10));
            assert!(p >= last - 1e-12);
            last = p;
            t.answered(at(i * 10), false);
        }
        assert!((last - (1000.0 - 200.0) / 1000.0).abs() < 0.01, "{last}");
    }

    #[test]
    fn the_throttle_forgets_what_is_older_than_its_window() {
        let mut t = Throttle::new(2.0, Duration::from_secs(10));
        for _ in 0..100 {
            t.refused_locally(Duration::from_secs(1));
        }
        assert!(t.reject_probability(Duration::from_secs(10)) > 0.9);
        assert_eq!(t.reject_probability(Duration::from_secs(11)), 0.0);
    }

    proptest! {
        #[test]
        fn a_backoff_wait_stays_within_its_doubling_ceiling(
            base_ms in 1u64..1_000, cap_ms in 1u64..10_000, retry in 1u32..40, seed: u64,
        ) {
            let (base, cap) = (Duration::from_millis(base_ms), Duration::from_millis(cap_ms));
            let c = Client::RetryBackoff { attempts: u32::MAX, base, cap };
            let mut r = ChaCha8Rng::seed_from_u64(seed);
            let wait = c.next_wait(retry, Outcome::ServerError, None, &mut r).unwrap();
            let ceiling = backoff_ceiling(base, cap, retry);
            prop_assert!(wait <= ceiling && ceiling <= cap);
            prop_assert!(ceiling >= base.min(cap));
        }

        #[test]
        fn the_throttles_probability_is_the_books_formula_within_zero_and_one(
            requests in 0u64..5_000, accepted_share in 0.0f64..=1.0, k in 1.0f64..4.0,
        ) {
            let accepts = (requests as f64 * accepted_share) as u64;
            let mut t = Throttle::new(k, Duration::from_secs(120));
            for i in 0..requests {
                t.answered(Duration::from_millis(i), i < accepts);
            }
            let p = t.reject_probability(Duration::from_millis(requests));
            let book = ((requests as f64 - k * accepts as f64) / (requests as f64 + 1.0)).max(0.0);
            prop_assert!((p - book).abs() < 1e-12);
            prop_assert!((0.0..1.0).contains(&p));
        }
    }
}
