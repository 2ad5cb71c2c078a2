//! The open-model load engine: one arrival schedule per target × tenant, each request sent at
//! its scheduled time whatever happened to the ones before it, latency measured from the
//! schedule (so a stalled target cannot hide behind coordinated omission).
//!
//! The engine knows nothing of phases or metrics: it hands every [`Sample`] to a
//! [`Recorder`].
//!
//! - [`schedule`]: the arrival offsets of one target × tenant, seeded and lazy.
//! - `engine`: the sender threads: each merges its schedules, sends each request on time,
//!   bounds what is in flight and classifies what comes back ([`try_run`]).
//! - [`shard`]: how many sender threads, and which streams each sends ([`Senders`]).
//! - `connections`: how a target's requests use connections: a cap, keep-alive and a cap on
//!   idle ones ([`Connections`], [`KeepAlive`]).
//! - `due`: a sender's arrivals in due order, merged from its schedules, and the first due
//!   after its next wake-up.
//! - `pacer`: how far apart a sender's wake-ups are, waking then to tens of microseconds
//!   (Linux `timerfd`, the wake-up after next armed ahead, each armed early by the recent
//!   wake-ups' lateness), and keeping tokio's own timer from waking the sender for each
//!   request's timeout.
//! - `warm`: the connections a sender opens before its start, where a cold pool would cost
//!   its first moments.
//! - `exchange`: one HTTP exchange on a pooled keep-alive connection (or a connection of its
//!   own, without keep-alive), and its classification.
//!   A target that tells callers by source address gets a pool per instance × tenant, each
//!   connection bound to the tenant's loopback address.
//! - `prepared`: each target × tenant's request parts, checked once: path, caller header or
//!   `X-Forwarded-For` value, source address.
//! - `stream`: one target × tenant's schedule and where its next request goes.
//! - [`keys`]: a tenant's caller key, or keys drawn per request from a weighted set.
//! - `members`: where a target's requests go, as last read from its rotation.
//! - `attempts`: one request and its client's retries.
//! - `in_flight`: a request sent, until its sample is recorded, also when the run stops
//!   before its answer comes (abandoned).
//! - [`client`]: how a tenant's clients react to answers (retries, adaptive throttling).
//! - [`rotation`]: a target's instances in and out of the balancer's rotation.

mod attempts;
pub mod capacity;
pub mod client;
mod connections;
mod due;
mod engine;
mod error;
mod exchange;
mod in_flight;
pub mod keys;
mod members;
mod pacer;
mod prepared;
pub mod rotation;
pub mod schedule;
pub mod shard;
mod stream;
mod warm;

pub use client::Client;
pub use connections::{Connections, KeepAlive};
pub(crate) use engine::MAX_LATE;
pub use engine::try_run;
pub use error::LoadError;
pub(crate) use exchange::IDLE_TIMEOUT;
pub use keys::{Caller, Keys};
pub use rotation::Rotation;
pub use shard::Senders;

use std::time::Duration;

/// How a tenant's requests are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrival {
    /// Exactly 1 / rate apart.
    Uniform,
    /// Exponential gaps with mean 1 / rate, from a seeded generator.
    Poisson,
}

/// How a tenant's requests spread over a target's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Spread {
    /// Each request to the next instance: an even load balancer.
    RoundRobin,
    /// Every request of the tenant to one instance: a keep-alive client.
    Sticky,
}

/// One tenant (caller) of the scenario; it sends to every target at its rate.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantPlan {
    pub name: String,
    /// The caller key sent in the target's caller header, or a key drawn per request (for a
    /// target that identifies callers by header; the others see the tenant's address, from
    /// its index, and refuse drawn keys).
    pub caller: Caller,
    pub rate_per_s: f64,
    pub arrival: Arrival,
    pub spread: Spread,
    /// How its clients react to answers: retries, or throttling themselves.
    pub client: Client,
}

/// One target under load.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetPlan {
    pub name: String,
    /// Its instances; the balancer follows changes made while the run goes.
    pub instances: Rotation,
    /// Path (and query) of the limited request, e.g. `/api`.
    pub path: String,
    /// How the target tells tenants apart: their caller key in a header, or their own
    /// loopback address ([`crate::identity::tenant_address`]) as the connection's source or in
    /// `X-Forwarded-For`.
    pub caller: crate::identity::CallerIdentity,
    /// How its requests use connections.
    pub connections: Connections,
}

/// Which arrivals of every schedule this process sends: worker `index` of `count` sends
/// arrival i (counted from 0 in each target × tenant schedule) when i mod count = index − 1,
/// so N workers with the same seed send the whole schedule between them, each request once.
/// Always 1 ≤ index ≤ count: a process that sends nothing is a [`Role::FaultPlayer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    index: u32,
    count: u32,
}

impl Share {
    /// The whole schedule: one process alone.
    pub const WHOLE: Share = Share { index: 1, count: 1 };

    /// Worker `index` of `count`, if 1 ≤ index ≤ count.
    pub fn new(index: u32, count: u32) -> Option<Self> {
        (1..=count)
            .contains(&index)
            .then_some(Self { index, count })
    }

    /// Which worker (from 1).
    pub fn index(self) -> u32 {
        self.index
    }

    /// Of how many.
    pub fn count(self) -> u32 {
        self.count
    }

    /// Whether arrival `i` of a schedule is this share's.
    pub fn takes(self, i: u64) -> bool {
        i % u64::from(self.count) == u64::from(self.index - 1)
    }

    /// How many of the whole schedule's arrivals `from..to` (by index) are this share's,
    /// without visiting them.
    pub fn count_in(self, from: u64, to: u64) -> u64 {
        // This share's arrivals below i: the indices index − 1, index − 1 + count, …
        let below = |i: u64| {
            let first = u64::from(self.index - 1);
            if i <= first {
                0
            } else {
                (i - first).div_ceil(u64::from(self.count))
            }
        };
        below(to.max(from)) - below(from)
    }
}

/// What one process sends of every schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Nothing: it only plays the fault timeline, for workers that all run with `--no-faults`
    /// (`failmode faults play`).
    FaultPlayer,
    /// Its share ([`Share::WHOLE`] alone).
    Sender(Share),
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// `K/N` as `--worker` takes it: 1 ≤ K ≤ N.
impl std::str::FromStr for Share {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("{s:?} is not K/N with 1 ≤ K ≤ N (e.g. 2/3: the second of three workers)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            k.trim().parse::<u32>().map_err(|_| bad())?,
            n.trim().parse::<u32>().map_err(|_| bad())?,
        );
        Self::new(index, count).ok_or_else(bad)
    }
}

/// Everything the engine needs for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadPlan {
    pub targets: Vec<TargetPlan>,
    pub tenants: Vec<TenantPlan>,
    pub duration: Duration,
    pub seed: u64,
    /// A request still unanswered after this is a transport error (timeout).
    pub request_timeout: Duration,
    /// Requests in flight per target at most; one due beyond it is dropped and counted.
    pub max_in_flight_per_target: usize,
    /// The arrivals this process sends (`Role::Sender(Share::WHOLE)` alone).
    pub role: Role,
    /// How many threads send them.
    pub senders: Senders,
}

/// Why a request got no HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportError {
    Refused,
    Reset,
    Timeout,
    Other,
    /// The run stopped before it was answered: still in flight when an interrupted run's
    /// grace for its requests ran out. Its latency runs to that moment, so the slowest
    /// requests of a hung target are counted, not lost.
    Abandoned,
}

/// Why a due request was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// The target already had `max_in_flight_per_target` requests in flight.
    InFlightBound,
    /// Due arrivals the generator could not send in time: still due at the timeline's end, or
    /// more than a second late (the engine's `MAX_LATE`). Dropped in bulk, never one by one.
    Backlog,
    /// Every connection the target's `max_connections` allows was busy.
    ConnectionCap,
}

/// Dropped requests by [`DropCause`]; their sum is the run's `dropped`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct DroppedByCause {
    pub in_flight_bound: u64,
    #[serde(default)]
    pub backlog: u64,
    #[serde(default)]
    pub connection_cap: u64,
}

impl DroppedByCause {
    /// Counts `n` drops of one cause.
    pub fn count(&mut self, cause: DropCause, n: u64) {
        *match cause {
            DropCause::InFlightBound => &mut self.in_flight_bound,
            DropCause::Backlog => &mut self.backlog,
            DropCause::ConnectionCap => &mut self.connection_cap,
        } += n;
    }

    /// Adds another part's counts (a batch's, a worker's).
    pub fn add(&mut self, other: &DroppedByCause) {
        self.in_flight_bound += other.in_flight_bound;
        self.backlog += other.backlog;
        self.connection_cap += other.connection_cap;
    }

    pub fn total(&self) -> u64 {
        self.in_flight_bound + self.backlog + self.connection_cap
    }
}

/// What became of one scheduled request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// 2xx
    Admitted,
    /// 429
    Limited,
    /// 503
    Unavailable,
    /// Any other 5xx.
    ServerError,
    /// Any other status (a 400 or 404 means the target or the plan is misconfigured).
    OtherStatus(u16),
    Transport(TransportError),
    /// Not sent, for the cause it carries ([`DropCause`]). Its sample's durations are all zero,
    /// as measured; but a drop must never make the tail look better, so the metrics count it
    /// in the latency histograms as a request that waited the whole request timeout (not in
    /// the service time: it was never sent). See [`crate::metrics`].
    Dropped(DropCause),
    /// Not sent: the tenant's client refused it itself (adaptive throttling). No latency.
    Throttled,
}

impl Outcome {
    /// Classifies an HTTP status.
    pub fn from_status(status: u16) -> Self {
        match status {
            200..=299 => Self::Admitted,
            429 => Self::Limited,
            503 => Self::Unavailable,
            500..=599 => Self::ServerError,
            other => Self::OtherStatus(other),
        }
    }
}

/// One scheduled request, once its fate is known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub target: usize,
    pub tenant: usize,
    pub instance: usize,
    /// When it should have been sent, since the run's start.
    pub scheduled: Duration,
    /// How late it actually left (actual send − scheduled); zero for a request not sent.
    pub send_lag: Duration,
    /// From the scheduled send to the end of the last answer (or the failure, or the moment
    /// an interrupted run abandoned it).
    pub latency: Duration,
    /// From the first actual send to the end of the last answer (or the failure, or the
    /// abandonment).
    pub service_time: Duration,
    /// The last attempt's outcome.
    pub outcome: Outcome,
    /// Attempts sent: 1, more when the client retried, 0 when it was not sent at all.
    pub attempts: u32,
    /// Connections its attempts opened (0 for those sent on a kept-alive one): the
    /// connection churn the target saw from it.
    pub new_connections: u32,
}

impl Sample {
    /// A request of (target, tenant, instance) due at `scheduled` that was never sent.
    pub(crate) fn unsent(
        (target, tenant, instance): (usize, usize, usize),
        scheduled: Duration,
        outcome: Outcome,
    ) -> Self {
        Self {
            target,
            tenant,
            instance,
            scheduled,
            send_lag: Duration::ZERO,
            latency: Duration::ZERO,
            service_time: Duration::ZERO,
            outcome,
            attempts: 0,
            new_connections: 0,
        }
    }
}

/// Receives every sample as it completes; called from many tasks at once.
pub trait Recorder: Send + Sync + 'static {
    fn record(&self, sample: &Sample) {
        self.record_repeated(sample, 1);
    }

    /// `n` samples identical to `sample` at once: arrivals dropped in bulk, which a generator
    /// that fell behind must not spend its time recording one by one.
    fn record_repeated(&self, sample: &Sample, n: u64);

    /// A request of `target` leaves: its first attempt. Counted for the live in-flight
    /// figure; the request is recorded once, when it settles.
    fn sending(&self, _target: usize) {}

    /// Sender `sender` of `senders` has dispatched (handed to its request's task, dropped or
    /// refused) every arrival due before `until` (since the run's start; `Duration::MAX` once
    /// it sends nothing more: its schedule is done, or the run was cancelled).
    /// Said at least once a second of the schedule: the load's own clock, which stops while a
    /// sender stalls; a recorder that closes seconds must not close one a sender has not
    /// passed.
    fn dispatched(&self, _sender: usize, _senders: usize, _until: Duration) {}
}

/// Totals of one engine run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadSummary {
    pub scheduled: u64,
    /// Requests sent (their first attempt); retries are counted apart.
    pub sent: u64,
    /// Attempts after the first, from clients that retry.
    pub retries: u64,
    /// Refused by the tenant's own client (adaptive throttling), not sent.
    pub throttled: u64,
    /// Not sent, every cause together: `dropped_by_cause.total()`.
    pub dropped: u64,
    pub dropped_by_cause: DroppedByCause,
    /// Scheduled but never sent because the run was cancelled.
    pub cancelled: u64,
    /// Sent, but still unanswered when the run was cancelled and its grace ran out; each is
    /// recorded as a sample with outcome `Transport(Abandoned)`, its latency up to that
    /// moment. Zero for a run that was not cancelled: every request carries its own timeout,
    /// and the engine waits that long for the last ones.
    pub abandoned: u64,
    /// When sending stopped because the run was cancelled, since the run's start: the load
    /// covered the timeline up to here (the grace given to the requests in flight after it
    /// sent nothing). `None` when every scheduled request was sent.
    pub stopped_sending_at: Option<Duration>,
    /// The sender threads the schedule was split over.
    pub senders: u32,
}

impl LoadSummary {
    /// Adds another sender's totals: its counts, and the latest stop.
    pub fn add(&mut self, other: &LoadSummary) {
        self.scheduled += other.scheduled;
        self.sent += other.sent;
        self.throttled += other.throttled;
        self.dropped += other.dropped;
        self.dropped_by_cause.add(&other.dropped_by_cause);
        self.cancelled += other.cancelled;
        // Not `retries` and `abandoned`: the requests' tasks count those, read once every
        // sender is done (`Settled::complete`); nor `senders`, which [`super::try_run`] sets.
        self.stopped_sending_at = self.stopped_sending_at.max(other.stopped_sending_at);
    }
}
