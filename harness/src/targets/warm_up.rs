//! Warm-up: unmeasured requests each instance answers before the load starts. The first
//! requests a service answers pay for JIT compilation, lazy imports and script loads, which a
//! long-running service never shows its callers. A manifest's `[warm_up]` says how many per
//! round, and, for a service that takes longer (a JVM), to keep going until its answers
//! settle.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde::Deserialize;

use crate::identity::{self, CallerIdentity};

/// `[warm_up]` in a target manifest.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWarmUp {
    requests: Option<u32>,
    settled_below: Option<String>,
    timeout: Option<String>,
}

/// Per instance, one after another. 20 was measured enough for express-rate-limit: without a
/// warm-up, 15 of its first 145 requests timed out their 20 ms Redis budget.
const DEFAULT_REQUESTS: u32 = 20;
const MAX_REQUESTS: u32 = 10_000;
/// However many rounds, a warm-up ends by then: an instance that takes connections and never
/// answers cannot hold the run.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// One warm-up request waits this long at most; one that got no answer in time, or no answer
/// at all, counts as this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Below [`REQUEST_TIMEOUT`], so that an instance that never answers never looks settled.
const MAX_SETTLED_BELOW: Duration = Duration::from_secs(1);
/// From a caller no tenant uses (by header; by address, failmode's own, 127.0.0.1, which no
/// tenant has; see [`crate::identity`]).
const CALLER: &str = "failmode-warm-up";

/// How a target's instances are warmed up before the load starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarmUp {
    /// Requests per instance per round, one after another.
    pub requests: u32,
    /// Rounds go on until a whole round's median answer took less than this; `None`: one
    /// round.
    pub settled_below: Option<Duration>,
    /// No warm-up request is sent after this, settled or not (one sent just before may take
    /// its 2 s).
    pub timeout: Duration,
}

impl Default for WarmUp {
    fn default() -> Self {
        Self {
            requests: DEFAULT_REQUESTS,
            settled_below: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl WarmUp {
    /// One line before a warm-up that goes on until settled, which may take up to its
    /// timeout: what the wait is for.
    pub fn announce(&self, target: &str) -> Option<String> {
        let below = self.settled_below?;
        Some(format!(
            "warming up {target}: rounds of {} requests per instance until a round's median \
             answer is under {}, for at most {}",
            self.requests,
            humantime::format_duration(below),
            humantime::format_duration(self.timeout)
        ))
    }
}

/// Checks `[warm_up]`: errors name the key and say what is wanted.
pub(crate) fn parse(raw: Option<&RawWarmUp>) -> Result<WarmUp, String> {
    let Some(raw) = raw else {
        return Ok(WarmUp::default());
    };
    let requests = raw.requests.unwrap_or(DEFAULT_REQUESTS);
    if requests == 0 || requests > MAX_REQUESTS {
        return Err(format!(
            "warm_up.requests = {requests}: between 1 and {MAX_REQUESTS} requests per instance \
             per round"
        ));
    }
    let duration = |key: &str, text: &str, max: Duration| {
        let d = humantime::parse_duration(text.trim())
            .map_err(|e| format!("warm_up.{key} = {text:?}: {e} (e.g. \"10ms\", \"1m\")"))?;
        if d.is_zero() || d > max {
            return Err(format!(
                "warm_up.{key} = {text:?}: longer than zero and at most {}",
                humantime::format_duration(max)
            ));
        }
        Ok(d)
    };
    let settled_below = raw
        .settled_below
        .as_deref()
        .map(|t| duration("settled_below", t, MAX_SETTLED_BELOW))
        .transpose()?;
    let timeout = raw
        .timeout
        .as_deref()
        .map(|t| duration("timeout", t, MAX_TIMEOUT))
        .transpose()?
        .unwrap_or(DEFAULT_TIMEOUT);
    if let Some(below) = settled_below.filter(|b| timeout < *b) {
        return Err(format!(
            "warm_up.timeout ({}) is shorter than warm_up.settled_below ({}): no round could \
             settle in it",
            humantime::format_duration(timeout),
            humantime::format_duration(below)
        ));
    }
    Ok(WarmUp {
        requests,
        settled_below,
        timeout,
    })
}

/// What one instance's warm-up came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceWarmUp {
    pub index: usize,
    pub requests: u64,
    /// Requests that got no answer (refused, reset, timed out), each counted as
    /// [`REQUEST_TIMEOUT`] in its round's median.
    pub unanswered: u64,
    /// The median answer of its last whole round, or, when none was whole, of the part of one
    /// the timeout left.
    pub last_median: Duration,
    /// Whether a whole round settled (always, for one round without `settled_below`).
    pub settled: bool,
}

/// What a target's warm-up came to, every instance's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmedUp {
    pub settings: WarmUp,
    pub took: Duration,
    pub instances: Vec<InstanceWarmUp>,
}

impl WarmedUp {
    /// One line for the run's progress, for a target that warms up until it settles.
    pub fn summary(&self, target: &str) -> Option<String> {
        let below = self.settings.settled_below?;
        let requests: u64 = self.instances.iter().map(|i| i.requests).sum();
        let unanswered: u64 = self.instances.iter().map(|i| i.unanswered).sum();
        let slowest = self.instances.iter().map(|i| i.last_median).max()?;
        Some(format!(
            "warmed up {target}: {requests} requests{} over {:.1} s, the slowest instance's \
             last round {:.2} ms at the median ({} settled below {})",
            match unanswered {
                0 => String::new(),
                n => format!(" ({n} unanswered)"),
            },
            self.took.as_secs_f64(),
            ms(slowest),
            match self.unsettled().count() {
                0 => "all".to_owned(),
                n => format!("{} of {}", self.instances.len() - n, self.instances.len()),
            },
            humantime::format_duration(below),
        ))
    }

    /// Which instances had not settled, and how slow they still were, if any had not.
    pub fn trouble(&self) -> Option<String> {
        let unsettled: Vec<String> = self
            .unsettled()
            .map(|i| format!("{:.2} ms on instance {}", ms(i.last_median), i.index))
            .collect();
        let below = self.settings.settled_below?;
        (!unsettled.is_empty()).then(|| {
            format!(
                "still warming up after {:.1} s: its last round's median answer was {} \
                 (its manifest's warm_up.settled_below is {})",
                self.took.as_secs_f64(),
                unsettled.join(", "),
                humantime::format_duration(below),
            )
        })
    }

    fn unsettled(&self) -> impl Iterator<Item = &InstanceWarmUp> {
        self.instances.iter().filter(|i| !i.settled)
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Where a target's warm-up requests go: its request path, and how it tells callers apart.
#[derive(Debug, Clone, Copy)]
pub struct Aim<'a> {
    pub path: &'a str,
    pub caller: &'a CallerIdentity,
}

/// Warms up `instances` (index, address) of a target at once, each as `settings` say.
pub async fn warm_up(
    settings: WarmUp,
    aim: Aim<'_>,
    instances: &[(usize, SocketAddr)],
    http: &reqwest::Client,
) -> WarmedUp {
    let began = Instant::now();
    let deadline = began + settings.timeout;
    let instances = join_all(instances.iter().map(|&(index, addr)| async move {
        let url = format!("http://{addr}{}", aim.path);
        let mut requests = 0;
        let mut unanswered = 0;
        // The median of the last whole round, once there is one.
        let mut last_whole = None;
        loop {
            let mut round = Vec::with_capacity(settings.requests as usize);
            while round.len() < settings.requests as usize && Instant::now() < deadline {
                let sent = Instant::now();
                let request = http.get(&url);
                // Its connection comes from 127.0.0.1 (the client binds nothing), so a target
                // that tells callers by source address sees failmode's own address too.
                let request = match aim.caller.naming_header(CALLER, identity::OWN_ADDRESS) {
                    Some((name, value)) => request.header(name, value),
                    None => request,
                };
                // Whatever the status, the whole answer's time is the point; its body read so
                // that the connection is kept for the next, as the load's are.
                let answered = match request.timeout(REQUEST_TIMEOUT).send().await {
                    Ok(response) => response.bytes().await.is_ok(),
                    Err(_) => false,
                };
                round.push(if answered {
                    sent.elapsed()
                } else {
                    unanswered += 1;
                    REQUEST_TIMEOUT
                });
                requests += 1;
            }
            round.sort_unstable();
            let median = round.get(round.len() / 2).copied();
            let whole = round.len() == settings.requests as usize;
            if whole {
                last_whole = median;
            }
            // Only a whole round is judged: the few answers the timeout leaves of one say
            // little, and are reported only when no round was whole.
            let settled = match settings.settled_below {
                None => true,
                Some(below) => whole && median.is_some_and(|m| m < below),
            };
            if settled || Instant::now() >= deadline {
                return InstanceWarmUp {
                    index,
                    requests,
                    unanswered,
                    last_median: last_whole.or(median).unwrap_or(REQUEST_TIMEOUT),
                    settled,
                };
            }
        }
    }))
    .await;
    WarmedUp {
        settings,
        took: began.elapsed(),
        instances,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn raw(text: &str) -> RawWarmUp {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn no_section_is_one_round_of_twenty_within_a_minute() {
        assert_eq!(
            parse(None).unwrap(),
            WarmUp {
                requests: 20,
                settled_below: None,
                timeout: Duration::from_secs(60),
            }
        );
    }

    #[test]
    fn settled_below_keeps_rounds_going_for_a_minute_unless_told() {
        let w = parse(Some(&raw("requests = 50\nsettled_below = \"10ms\""))).unwrap();
        assert_eq!(w.requests, 50);
        assert_eq!(w.settled_below, Some(Duration::from_millis(10)));
        assert_eq!(w.timeout, Duration::from_secs(60));
        let w = parse(Some(&raw("settled_below = \"5ms\"\ntimeout = \"2m\""))).unwrap();
        assert_eq!(w.timeout, Duration::from_secs(120));
        // A timeout alone bounds the one round.
        let w = parse(Some(&raw("requests = 500\ntimeout = \"5s\""))).unwrap();
        assert_eq!((w.settled_below, w.timeout), (None, Duration::from_secs(5)));
    }

    #[test]
    fn nonsense_is_refused_by_name() {
        for (text, key) in [
            ("requests = 0", "warm_up.requests = 0"),
            ("requests = 10001", "warm_up.requests = 10001"),
            ("settled_below = \"0ms\"", "warm_up.settled_below = \"0ms\""),
            // An instance that never answers takes the request timeout, 2 s, every time.
            ("settled_below = \"2s\"", "warm_up.settled_below = \"2s\""),
            (
                "settled_below = \"fast\"",
                "warm_up.settled_below = \"fast\"",
            ),
            ("timeout = \"11m\"", "warm_up.timeout = \"11m\""),
            (
                "settled_below = \"500ms\"\ntimeout = \"100ms\"",
                "warm_up.timeout (100ms) is shorter than warm_up.settled_below (500ms)",
            ),
        ] {
            let e = parse(Some(&raw(text))).unwrap_err();
            assert!(e.starts_with(key), "{text}: {e}");
        }
    }

    fn warmed(settled_below: Option<Duration>, medians: &[(u64, bool)]) -> WarmedUp {
        WarmedUp {
            settings: WarmUp {
                requests: 20,
                settled_below,
                timeout: Duration::from_secs(60),
            },
            took: Duration::from_millis(2500),
            instances: medians
                .iter()
                .enumerate()
                .map(|(index, &(ms, settled))| InstanceWarmUp {
                    index,
                    requests: 40,
                    unanswered: u64::from(!settled),
                    last_median: Duration::from_millis(ms),
                    settled,
                })
                .collect(),
        }
    }

    const TEN_MS: Option<Duration> = Some(Duration::from_millis(10));

    #[test]
    fn an_unsettled_instance_is_named_with_its_median_and_a_settled_target_says_nothing() {
        let w = warmed(TEN_MS, &[(4, true), (35, false)]);
        let trouble = w.trouble().unwrap();
        assert!(
            trouble.contains("was 35.00 ms on instance 1 ("),
            "{trouble}"
        );
        assert!(trouble.contains("settled_below is 10ms"), "{trouble}");
        let summary = w.summary("x").unwrap();
        assert!(summary.contains("80 requests (1 unanswered)"), "{summary}");
        assert!(summary.contains("1 of 2 settled"), "{summary}");
        let w = warmed(TEN_MS, &[(4, true), (6, true)]);
        assert_eq!(w.trouble(), None);
        assert!(w.summary("x").unwrap().contains("80 requests over"));
        // One round, as asked: nothing to say either way.
        let w = warmed(None, &[(400, true)]);
        assert_eq!((w.trouble(), w.summary("x")), (None, None));
        assert_eq!(w.settings.announce("x"), None);
        let w = parse(Some(&raw("requests = 50\nsettled_below = \"10ms\""))).unwrap();
        assert_eq!(
            w.announce("x").unwrap(),
            "warming up x: rounds of 50 requests per instance until a round's median answer \
             is under 10ms, for at most 1m"
        );
    }
}
