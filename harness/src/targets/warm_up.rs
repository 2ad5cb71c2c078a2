//! Warm-up: unmeasured requests each instance answers before the load starts. The first
//! requests a service answers pay for JIT compilation, lazy imports and script loads, which a
//! long-running service never shows its callers. A manifest's `[warm_up]` says how many per
//! round, and, for a service that takes longer (a JVM), to keep going until its answers
//! settle.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde::Deserialize;

use super::fleet::Fleet;
use super::manifest::TargetDef;
use crate::identity;

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
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_TIMEOUT: Duration = Duration::from_secs(600);
const MAX_SETTLED_BELOW: Duration = Duration::from_secs(10);
/// One warm-up request waits this long at most: a hung instance cannot hold the run.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// From a caller no tenant uses (by header; by address, failmode's own, 127.0.0.1, which no
/// tenant has; see [`crate::identity`]).
const CALLER: &str = "failmode-warm-up";

/// How a target's instances are warmed up before the load starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarmUp {
    /// Requests per instance per round, one after another.
    pub requests: u32,
    /// Rounds until the answers settle; `None`: one round.
    pub until: Option<Settled>,
}

/// Warmed up once a round's median answer took less than `below`, or `timeout` has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub below: Duration,
    pub timeout: Duration,
}

impl Default for WarmUp {
    fn default() -> Self {
        Self {
            requests: DEFAULT_REQUESTS,
            until: None,
        }
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
    let until = match (&raw.settled_below, &raw.timeout) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err(
                "warm_up.timeout is set without warm_up.settled_below: the timeout bounds the \
                 rounds until the answers settle; one round has no timeout to bound"
                    .into(),
            );
        }
        (Some(below), timeout) => Some(Settled {
            below: duration("settled_below", below, MAX_SETTLED_BELOW)?,
            timeout: match timeout {
                Some(t) => duration("timeout", t, MAX_TIMEOUT)?,
                None => DEFAULT_TIMEOUT,
            },
        }),
    };
    Ok(WarmUp { requests, until })
}

/// What one instance's warm-up came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceWarmUp {
    pub index: usize,
    pub requests: u64,
    /// The last round's median answer (a request that got no answer counts as its wait).
    pub last_median: Duration,
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
        let until = self.settings.until?;
        let requests: u64 = self.instances.iter().map(|i| i.requests).sum();
        let slowest = self.instances.iter().map(|i| i.last_median).max()?;
        Some(format!(
            "warmed up {target}: {requests} requests over {:.1} s, the slowest instance's last \
             round {:.1} ms at the median ({} settled below {})",
            self.took.as_secs_f64(),
            ms(slowest),
            match self.unsettled().count() {
                0 => "all".to_owned(),
                n => format!("{} of {}", self.instances.len() - n, self.instances.len()),
            },
            humantime::format_duration(until.below),
        ))
    }

    /// Why the first phase may measure a service still warming up, if it may.
    pub fn trouble(&self) -> Option<String> {
        let until = self.settings.until?;
        let unsettled: Vec<String> = self
            .unsettled()
            .map(|i| format!("{:.1} ms on instance {}", ms(i.last_median), i.index))
            .collect();
        (!unsettled.is_empty()).then(|| {
            format!(
                "still warming up when the load started: after {:.1} s of warm-up, its last \
                 round's median answer was {} (its manifest's warm_up.settled_below is {}), so \
                 the first phase measures a service that is still warming up",
                self.took.as_secs_f64(),
                unsettled.join(", "),
                humantime::format_duration(until.below),
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

/// Warms up every running instance of `fleet` at once, each as `def.warm_up` says.
pub async fn warm_up(def: &TargetDef, fleet: &Fleet, http: &reqwest::Client) -> WarmedUp {
    let began = Instant::now();
    let settings = def.warm_up;
    let instances = join_all(fleet.running().into_iter().map(|i| async move {
        let url = format!("http://{}{}", i.addr, def.request_path);
        let deadline = settings.until.map(|u| began + u.timeout);
        let mut requests = 0;
        loop {
            let mut round = Vec::with_capacity(settings.requests as usize);
            for _ in 0..settings.requests {
                let sent = Instant::now();
                let request = http.get(&url);
                // Its connection comes from 127.0.0.1 (the client binds nothing), so a target
                // that tells callers by source address sees failmode's own address too.
                let request = match def.caller.naming_header(CALLER, identity::OWN_ADDRESS) {
                    Some((name, value)) => request.header(name, value),
                    None => request,
                };
                // Not judged: whatever the answer, the time it took is the point.
                let _ = request.timeout(REQUEST_TIMEOUT).send().await;
                round.push(sent.elapsed());
                requests += 1;
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
            }
            round.sort_unstable();
            let last_median = round[round.len() / 2];
            let settled = settings.until.is_none_or(|u| last_median < u.below);
            if settled || deadline.is_some_and(|d| Instant::now() >= d) {
                return InstanceWarmUp {
                    index: i.index,
                    requests,
                    last_median,
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
    fn no_section_is_one_round_of_twenty() {
        assert_eq!(
            parse(None).unwrap(),
            WarmUp {
                requests: 20,
                until: None
            }
        );
    }

    #[test]
    fn settled_below_keeps_rounds_going_for_a_minute_unless_told() {
        let w = parse(Some(&raw("requests = 50\nsettled_below = \"10ms\""))).unwrap();
        assert_eq!(w.requests, 50);
        assert_eq!(
            w.until,
            Some(Settled {
                below: Duration::from_millis(10),
                timeout: Duration::from_secs(60)
            })
        );
        let w = parse(Some(&raw("settled_below = \"5ms\"\ntimeout = \"2m\""))).unwrap();
        assert_eq!(w.until.unwrap().timeout, Duration::from_secs(120));
    }

    #[test]
    fn nonsense_is_refused_by_name() {
        for (text, key) in [
            ("requests = 0", "warm_up.requests = 0"),
            ("requests = 10001", "warm_up.requests = 10001"),
            ("timeout = \"5s\"", "warm_up.timeout is set without"),
            ("settled_below = \"0ms\"", "warm_up.settled_below = \"0ms\""),
            ("settled_below = \"11s\"", "warm_up.settled_below = \"11s\""),
            (
                "settled_below = \"fast\"",
                "warm_up.settled_below = \"fast\"",
            ),
            (
                "settled_below = \"1ms\"\ntimeout = \"11m\"",
                "warm_up.timeout = \"11m\"",
            ),
        ] {
            let e = parse(Some(&raw(text))).unwrap_err();
            assert!(e.starts_with(key), "{text}: {e}");
        }
    }

    fn warmed(until: Option<Settled>, medians: &[(u64, bool)]) -> WarmedUp {
        WarmedUp {
            settings: WarmUp {
                requests: 20,
                until,
            },
            took: Duration::from_millis(2500),
            instances: medians
                .iter()
                .enumerate()
                .map(|(index, &(ms, settled))| InstanceWarmUp {
                    index,
                    requests: 40,
                    last_median: Duration::from_millis(ms),
                    settled,
                })
                .collect(),
        }
    }

    const TEN_MS: Settled = Settled {
        below: Duration::from_millis(10),
        timeout: Duration::from_secs(60),
    };

    #[test]
    fn an_unsettled_instance_is_named_with_its_median_and_a_settled_target_says_nothing() {
        let w = warmed(Some(TEN_MS), &[(4, true), (35, false)]);
        let trouble = w.trouble().unwrap();
        assert!(trouble.contains("was 35.0 ms on instance 1 ("), "{trouble}");
        assert!(trouble.contains("settled_below is 10ms"), "{trouble}");
        assert!(w.summary("x").unwrap().contains("1 of 2 settled"));
        let w = warmed(Some(TEN_MS), &[(4, true), (6, true)]);
        assert_eq!(w.trouble(), None);
        assert!(w.summary("x").unwrap().contains("80 requests"));
        // One round, as asked: nothing to say either way.
        let w = warmed(None, &[(400, true)]);
        assert_eq!((w.trouble(), w.summary("x")), (None, None));
    }
}
