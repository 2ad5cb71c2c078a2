//! The check's traffic: paced requests from two callers, counted by answer.
//!
//! Caller A sends over the limit for [`WINDOWS_MEASURED`] windows: how much of it is admitted
//! is the limit the target enforces, and what the rest is answered is its refusal status.
//! Then, while A goes on over the limit for one more window, caller B sends a few requests,
//! well under any limit: a limiter that keys on the caller admits every one of them, one that
//! counts callers together refuses B because A used the budget up.
//!
//! Requests leave on a fixed schedule (each in its own task, so a slow answer delays nothing)
//! and go round-robin over the instances, as failmode's even balancer sends them. Every
//! request has a timeout, and the counts and the time are fixed by the [`Plan`] before the
//! first one leaves.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::identity::{CallerIdentity, OWN_ADDRESS, tenant_address};
use crate::targets::TargetDef;

/// Windows over which caller A's admissions are counted: the first and last may be cut by
/// the limiter's own window boundaries, so more windows mean a tighter estimate, and a longer
/// check.
pub const WINDOWS_MEASURED: u32 = 3;
/// The most requests caller B sends beside A: enough that a shared budget cannot miss all of
/// them by luck, few enough to stay under half of any limit the band accepts.
const BESIDE_AT_MOST: u32 = 5;
/// How long one request may take before it counts as a transport error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// What the check sends: decided from the limit, the window and the instance count alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub limit: u32,
    pub window: Duration,
    pub instances: u32,
}

impl Plan {
    /// Caller A's requests per window: enough above the limit that a limiter counting per
    /// instance (instances × limit) still refuses some, so it reads as a wrong limit and not
    /// as no limit at all.
    pub fn over_per_window(&self) -> u32 {
        self.limit * (self.instances + 2).max(3)
    }

    /// Caller B's requests beside A: at most half the limit, and at most half what A was
    /// admitted per window (a target limiting below the limit must not refuse B for its own
    /// count), at least one.
    pub fn beside(&self, admitted_per_window: f64) -> u32 {
        let under = f64::from(self.limit).min(admitted_per_window) / 2.0;
        (under.floor() as u32).clamp(1, BESIDE_AT_MOST)
    }

    /// The most requests the check sends.
    pub fn requests(&self) -> u32 {
        self.over_per_window() * (WINDOWS_MEASURED + 1) + self.beside(f64::from(self.limit))
    }

    pub fn duration(&self) -> Duration {
        self.window * (WINDOWS_MEASURED + 1)
    }
}

/// One caller's answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub sent: u32,
    /// 2xx.
    pub admitted: u32,
    /// Every other status, by status.
    pub refused: BTreeMap<u16, u32>,
    /// No answer: refused connection, reset, timeout.
    pub transport: u32,
    /// The first transport error, in the HTTP client's words.
    pub transport_example: Option<String>,
}

impl Tally {
    pub fn refusals(&self) -> u32 {
        self.refused.values().sum()
    }

    /// The status most refusals came with.
    pub fn main_refusal(&self) -> Option<u16> {
        self.refused
            .iter()
            .max_by_key(|(status, n)| (**n, std::cmp::Reverse(**status)))
            .map(|(status, _)| *status)
    }

    fn add(&mut self, answer: Result<u16, String>) {
        self.sent += 1;
        match answer {
            Ok(status) if (200..300).contains(&status) => self.admitted += 1,
            Ok(status) => *self.refused.entry(status).or_default() += 1,
            Err(why) => {
                self.transport += 1;
                self.transport_example.get_or_insert(why);
            }
        }
    }
}

/// What the traffic saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measured {
    /// Caller A over [`WINDOWS_MEASURED`] windows.
    pub over: Tally,
    /// Caller B, beside A in the window after.
    pub beside: Tally,
    /// Caller A's requests in that window, not judged.
    pub over_beside: u32,
}

impl Measured {
    /// Every request sent.
    pub fn requests(&self) -> u32 {
        self.over.sent + self.over_beside + self.beside.sent
    }
}

/// A caller of the check's traffic, told apart as the manifest's `caller` says: its name in
/// the caller header, or the loopback address a run's tenant of the same index would have (as
/// the connection's source, or in `X-Forwarded-For`).
#[derive(Debug)]
struct Caller {
    name: &'static str,
    address: Ipv4Addr,
    http: reqwest::Client,
}

impl Caller {
    fn new(name: &'static str, index: usize, identity: &CallerIdentity) -> Self {
        // Index 0 and 1 always have addresses; failmode's own is only a fallback in type.
        let address = tenant_address(index).unwrap_or(OWN_ADDRESS);
        // Its own client, so that its connections are its own.
        let mut http = reqwest::Client::builder();
        if *identity == CallerIdentity::SourceAddress {
            http = http.local_address(IpAddr::V4(address));
        }
        Self {
            name,
            address,
            http: http.build().unwrap_or_default(),
        }
    }

    fn request(&self, def: &TargetDef, addr: SocketAddr) -> reqwest::RequestBuilder {
        let request = self
            .http
            .get(format!("http://{addr}{}", def.request_path))
            .timeout(REQUEST_TIMEOUT);
        match def.caller.naming_header(self.name, self.address) {
            Some((name, value)) => request.header(name, value),
            None => request,
        }
    }
}

/// The names the callers' requests carry.
pub const CALLER_A: &str = "failmode-check-a";
pub const CALLER_B: &str = "failmode-check-b";

/// Sends the plan's traffic to `instances` and counts the answers.
pub async fn measure(def: &TargetDef, instances: &[SocketAddr], plan: &Plan) -> Measured {
    let a = Caller::new(CALLER_A, 0, &def.caller);
    let b = Caller::new(CALLER_B, 1, &def.caller);
    let per_window = plan.over_per_window();
    let measured_span = plan.window * WINDOWS_MEASURED;
    let start = Instant::now();
    let over = paced(
        &a,
        def,
        instances,
        start,
        evenly(measured_span, per_window * WINDOWS_MEASURED),
    )
    .await;
    let next = start + measured_span;
    let beside_count = plan.beside(f64::from(over.admitted) / f64::from(WINDOWS_MEASURED));
    // A's last window is not counted: it only keeps A's budget spent while B sends.
    let (over_beside, beside) = tokio::join!(
        paced(&a, def, instances, next, evenly(plan.window, per_window)),
        paced(
            &b,
            def,
            instances,
            next,
            beside_offsets(plan.window, per_window, beside_count)
        ),
    );
    Measured {
        over,
        beside,
        over_beside: over_beside.sent,
    }
}

/// `count` instants evenly over `span`, from its start.
fn evenly(span: Duration, count: u32) -> Vec<Duration> {
    let gap = span / count.max(1);
    (0..count).map(|i| gap * i).collect()
}

/// When caller B's `count` requests leave in a window of A's `a_per_window`: spread over the
/// window (half a spacing in, off the boundaries the schedule chose), each moved to an eighth
/// of A's gap after one of A's requests. A limiter sharing one budget has just given its last
/// free slot to A then: B is admitted only if a slot freed in that eighth, not in the whole of
/// A's gap (a sliding window frees slots all the time, and B landing mid-gap would take one by
/// luck about one time in six).
fn beside_offsets(window: Duration, a_per_window: u32, count: u32) -> Vec<Duration> {
    let a_gap = window / a_per_window.max(1);
    let count = count.max(1);
    (0..count)
        .map(|k| {
            let wanted = window * (2 * k + 1) / (2 * count);
            let after = (wanted.as_nanos() / a_gap.as_nanos().max(1)) as u32;
            a_gap * after + a_gap / 8
        })
        .collect()
}

/// Requests from `caller` at `start` + each of `offsets`, round-robin over `instances`;
/// returns once every answer is in (or timed out).
async fn paced(
    caller: &Caller,
    def: &TargetDef,
    instances: &[SocketAddr],
    start: Instant,
    offsets: Vec<Duration>,
) -> Tally {
    let mut tasks = JoinSet::new();
    for (i, offset) in offsets.into_iter().enumerate() {
        tokio::time::sleep_until(start + offset).await;
        let addr = instances[i % instances.len()];
        let request = caller.request(def, addr);
        tasks.spawn(async move {
            request
                .send()
                .await
                .map(|r| r.status().as_u16())
                .map_err(|e| describe(&e))
        });
    }
    let mut tally = Tally::default();
    while let Some(answer) = tasks.join_next().await {
        tally.add(answer.unwrap_or_else(|e| Err(e.to_string())));
    }
    tally
}

/// A transport error in a few words: reqwest's own text names the URL and hides the cause.
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("no answer within {REQUEST_TIMEOUT:?}")
    } else if e.is_connect() {
        "connection refused".to_owned()
    } else {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_sends_over_the_limit_even_for_a_limiter_counting_per_instance() {
        let plan = Plan {
            limit: 7,
            window: Duration::from_millis(500),
            instances: 4,
        };
        assert!(plan.over_per_window() > plan.limit * plan.instances);
        assert_eq!(plan.beside(7.0), 3);
        // A target limiting at 2 gets one request from B, which its own limit admits.
        assert_eq!(plan.beside(1.7), 1);
        assert_eq!(plan.duration(), Duration::from_secs(2));
        let one = Plan {
            limit: 1,
            instances: 1,
            ..plan
        };
        assert_eq!((one.over_per_window(), one.beside(1.0)), (3, 1));
        assert_eq!(Plan { limit: 100, ..plan }.beside(100.0), BESIDE_AT_MOST);
    }

    #[test]
    fn caller_b_leaves_just_after_one_of_as_requests_spread_over_the_window() {
        let window = Duration::from_secs(1);
        let offsets = beside_offsets(window, 27, 3);
        let a_gap = window / 27;
        assert_eq!(offsets.len(), 3);
        for o in &offsets {
            assert!(*o < window, "{offsets:?}");
            assert_eq!(
                o.as_nanos() % a_gap.as_nanos(),
                (a_gap / 8).as_nanos(),
                "{o:?}"
            );
        }
        assert!(
            offsets[0] < window / 3 && offsets[2] > window * 2 / 3,
            "{offsets:?}"
        );
        assert_eq!(
            evenly(window, 4),
            [0, 250, 500, 750].map(Duration::from_millis)
        );
    }

    #[test]
    fn a_tally_counts_admissions_refusals_by_status_and_transport_errors() {
        let mut t = Tally::default();
        for answer in [
            Ok(200),
            Ok(204),
            Ok(429),
            Ok(503),
            Ok(503),
            Err("reset".into()),
        ] {
            t.add(answer);
        }
        assert_eq!(
            (t.sent, t.admitted, t.refusals(), t.transport),
            (6, 2, 3, 1)
        );
        assert_eq!(t.main_refusal(), Some(503));
        assert_eq!(t.transport_example.as_deref(), Some("reset"));
        assert_eq!(Tally::default().main_refusal(), None);
    }
}
