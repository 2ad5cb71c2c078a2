//! `run.json`: the versioned record of one run (schema in `harness/schema/run.schema.json`),
//! and the results folder around it.

pub mod atomic;
pub mod batches;
pub mod build;
#[cfg(any(test, feature = "test-support"))]
pub mod fixture;
pub mod folder;
pub mod hlog;
pub mod journal;
pub mod measured_files;
pub mod merge;
pub mod read;
pub mod trust;
pub mod unfinished;

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::identity::CallerIdentity;
pub use crate::identity::TenantIdentity;
use crate::limits::TargetLimit;
use crate::load::{Role, Share};
use crate::metrics::Counts;

/// Bumped on any change a reader of `run.json` would notice. 2: a figure that was not
/// measured is `null` (a cell nothing reached the target in); store amplification per request
/// offered beside per attempt; over-admission beyond the window slack.
pub const SCHEMA_VERSION: u32 = 2;

/// Latency percentiles, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Percentiles {
    /// `None` for an empty histogram: no latency was measured, which is not a latency of 0.
    pub fn of(h: &Histogram<u64>) -> Option<Self> {
        (!h.is_empty()).then(|| Self {
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        })
    }
}

/// One tenant in one phase of one target (or all tenants together, named `"all"`).
///
/// A figure is `None` (`null` in `run.json`) when it was not measured: no request of the cell
/// reached the target (no traffic, or all of it dropped or throttled by the client). A gate on
/// such a figure fails with "not measured"; it never passes on nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantResult {
    pub name: String,
    #[serde(flatten)]
    pub counts: Counts,
    /// limit ÷ window × phase length, by the target's limit ([`TargetResult::limit`]; summed
    /// over tenants for `"all"`).
    pub allowance: f64,
    /// min(offered − throttled − dropped, allowance) (summed over tenants for `"all"`): what
    /// the client's own throttling refused or the generator dropped is not the limiter's
    /// refusal.
    pub entitled: f64,
    /// max(0, admitted − allowance) ÷ allowance (for `"all"`: total excess ÷ total allowance).
    pub over_admission: Option<f64>,
    /// max(0, admitted − allowance − slack) ÷ allowance, the slack being what a limiter right in
    /// every window may admit beyond the allowance ([`derived::window_slack`]: one window's
    /// limit for a phase of whole windows): windows do not line up with phase bounds, and this
    /// figure stays 0 for a correct limiter whatever the phase's length (for `"all"`: summed
    /// over tenants).
    #[serde(default)]
    pub over_admission_beyond_window: Option<f64>,
    /// max(0, entitled − admitted) ÷ entitled (for `"all"`: total shortfall ÷ total
    /// entitlement); `None` also when nothing was entitled.
    pub wrongful_denial: Option<f64>,
    pub admitted_per_s: f64,
    /// From the scheduled send time (a dropped request counts as one that waited the request
    /// timeout).
    pub latency_us: Option<Percentiles>,
    /// From the actual send time.
    pub service_time_us: Option<Percentiles>,
}

impl TenantResult {
    /// Whether any request of the cell reached the target: without one, nothing was measured.
    pub fn measured(&self) -> bool {
        self.counts.sent() > 0
    }

    /// `part` ÷ offered, or `None` when nothing reached the target.
    pub fn share_of_offered(&self, part: u64) -> Option<f64> {
        self.measured()
            .then(|| part as f64 / self.counts.offered as f64)
    }
}

/// One phase of one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub name: String,
    pub start_s: f64,
    pub end_s: f64,
    /// The faults this phase applies, as written.
    pub faults: Vec<String>,
    /// When they were actually applied and removed on this target's proxy (s since start).
    pub faults_applied_at_s: Option<f64>,
    pub faults_removed_at_s: Option<f64>,
    /// The target's own fallback counter over the phase, where it exposes one.
    pub fallbacks: Option<f64>,
    /// Commands the target's Redis executed during the phase (INFO commandstats).
    pub store_commands: Option<u64>,
    /// Redis commands per request offered during the phase (the brief's definition): a
    /// limiter's own retries and the clients' retries both show here.
    pub store_amplification: Option<f64>,
    /// Redis commands per attempt sent (retries included): flat under a client retry storm,
    /// so it tells the limiter's own amplification from the clients'.
    #[serde(default)]
    pub store_amplification_per_attempt: Option<f64>,
    /// Attempts sent per request offered, all tenants: the clients' retry storms show here
    /// (above 1), and their own throttling (below 1).
    #[serde(default)]
    pub client_amplification: Option<f64>,
    /// Connections opened a second, all tenants (`all.counts.new_connections` over the phase):
    /// a client without keep-alive, or connections a fault broke, show here.
    #[serde(default)]
    pub new_connections_per_s: Option<f64>,
    pub tenants: Vec<TenantResult>,
    pub all: TenantResult,
}

/// Something that happened to a target during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at_s: f64,
    pub kind: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetResult {
    pub name: String,
    pub description: String,
    pub instances: u32,
    /// How each instance was started: the manifest's command and environment (the exact
    /// client settings), with per-instance placeholders such as `{port}` left unexpanded.
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The status it refuses with over the limit (its manifest's): 429, or 503 (NGINX).
    #[serde(default = "crate::targets::manifest::too_many_requests")]
    pub refuses_with: u16,
    /// The limit its allowance, over-admission, wrongful denial and recovery band were judged
    /// against: its manifest's own (`[limit]`) or the scenario's. `None` only in a run.json
    /// written before failmode recorded it, where it is the run's (read it through
    /// [`RunResult::limit_of`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<TargetLimit>,
    /// How it told the tenants apart (its manifest's `[request] caller`); `None` only in a
    /// run.json written before failmode recorded it (a header then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<CallerIdentity>,
    /// How the run's requests used connections to it: the scenario's `max_connections`,
    /// `keep_alive` and `max_idle_connections` for it.
    #[serde(default)]
    pub connections: crate::load::Connections,
    /// The load generator's lateness for this target: actual − scheduled send, µs (`None`:
    /// nothing was sent).
    pub send_lag_us: Option<Percentiles>,
    pub events: Vec<Event>,
    pub phases: Vec<PhaseResult>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadTotals {
    pub scheduled: u64,
    /// Requests sent (first attempts).
    pub sent: u64,
    /// Not sent, every cause together (the sum of `dropped_by_cause`). Each is counted in its
    /// cell's latency as a request that waited the request timeout.
    pub dropped: u64,
    /// `dropped` by cause.
    pub dropped_by_cause: crate::load::DroppedByCause,
    pub cancelled: u64,
    /// Sent, but unanswered when an interrupted run stopped waiting: each is counted in its
    /// cell as a transport error, its latency up to that moment.
    #[serde(default)]
    pub abandoned: u64,
    /// Attempts after the first, from retrying clients.
    #[serde(default)]
    pub retries: u64,
    /// Refused by the tenants' own clients (adaptive throttling).
    #[serde(default)]
    pub throttled: u64,
    /// The sender threads the load was split over (the most in one process, for a batched or
    /// merged run; 0: not recorded, a run.json from before, or a journal's rebuild).
    #[serde(default)]
    pub senders: u32,
}

impl LoadTotals {
    /// Adds another part's totals (a batch's, a worker's).
    pub fn add(&mut self, other: &LoadTotals) {
        self.scheduled += other.scheduled;
        self.sent += other.sent;
        self.dropped += other.dropped;
        self.dropped_by_cause.add(&other.dropped_by_cause);
        self.cancelled += other.cancelled;
        self.abandoned += other.abandoned;
        self.retries += other.retries;
        self.throttled += other.throttled;
        self.senders = self.senders.max(other.senders);
    }
}

/// The whole `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema_version: u32,
    pub scenario: String,
    pub description: String,
    pub seed: u64,
    pub duration_scale: f64,
    pub git_revision: Option<String>,
    pub started_at: String,
    pub duration_s: f64,
    /// The run was interrupted (Ctrl-C, an abort, or a harness error mid-run): figures cover
    /// what ran.
    pub partial: bool,
    /// Why the abort guard stopped the run (`[[abort]]`), if it did; the run is partial too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<String>,
    /// Why its measurements cannot be trusted ([`RunResult::untrusted`]: the load generator
    /// dropped requests or fell behind), as written with the run; empty when they can be. A
    /// verdict on such a run exits 3.
    #[serde(default)]
    pub untrusted_because: Vec<String>,
    /// The scenario's limit and window: every target's unless its manifest declares its own
    /// ([`TargetResult::limit`], [`RunResult::limit_of`]).
    pub limit: f64,
    pub window_s: f64,
    /// The scenario's tenants, in order, with what names each to a target: its caller key (for
    /// a header) and its loopback address (for source-address and `X-Forwarded-For` targets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<TenantIdentity>,
    pub load: LoadTotals,
    pub notes: Vec<String>,
    /// When the targets ran a few at a time (`--batch`): the names in each batch, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<Vec<String>>,
    /// When this process was one of several sending the load (`--worker K/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<Worker>,
    pub targets: Vec<TargetResult>,
}

/// One of several processes that send a scenario's load together, each its share of every
/// schedule, from one start time; `failmode merge` puts their results together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "WorkerRecord", try_from = "WorkerRecord")]
pub struct Worker {
    /// Which arrivals it sent: its share, or none (it only played the fault timeline).
    pub role: Role,
    /// When every worker's timeline started, ms since the Unix epoch.
    pub start_at_ms: u64,
    /// It applied the scenario's faults (one process does).
    pub drives_faults: bool,
}

impl Worker {
    /// Whether this process sent a share of the traffic (or none, playing only the faults),
    /// not all of it: `--worker 1/1` is a whole run.
    pub fn is_share(&self) -> bool {
        self.role != Role::Sender(Share::WHOLE)
    }

    /// Its share as (K, N), as run.json writes it: (0, 0) for the fault player.
    pub fn written_share(&self) -> (u32, u32) {
        match self.role {
            Role::FaultPlayer => (0, 0),
            Role::Sender(share) => (share.index(), share.count()),
        }
    }
}

/// A [`Worker`] as run.json has always written it: the fault player as worker 0/0.
#[derive(Serialize, Deserialize)]
struct WorkerRecord {
    index: u32,
    count: u32,
    start_at_ms: u64,
    drives_faults: bool,
}

impl From<Worker> for WorkerRecord {
    fn from(w: Worker) -> Self {
        let (index, count) = w.written_share();
        Self {
            index,
            count,
            start_at_ms: w.start_at_ms,
            drives_faults: w.drives_faults,
        }
    }
}

impl TryFrom<WorkerRecord> for Worker {
    type Error = String;

    fn try_from(r: WorkerRecord) -> Result<Self, String> {
        let role = match r.index {
            0 => Role::FaultPlayer,
            k => Role::Sender(
                Share::new(k, r.count)
                    .ok_or_else(|| format!("worker {k}/{} is not K/N with 1 ≤ K ≤ N", r.count))?,
            ),
        };
        Ok(Self {
            role,
            start_at_ms: r.start_at_ms,
            drives_faults: r.drives_faults,
        })
    }
}

/// A phase as it ran on one target: the measurements need these facts from the runner.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseFacts {
    pub faults_applied_at_s: Option<f64>,
    pub faults_removed_at_s: Option<f64>,
    pub fallbacks: Option<f64>,
    pub store_commands: Option<u64>,
}

/// What the runner knows of one target besides the measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetFacts {
    pub name: String,
    pub description: String,
    pub instances: u32,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub refuses_with: u16,
    /// The limit its figures are judged against.
    pub limit: TargetLimit,
    /// How it told tenants apart (`None`: not known, a worker's run.json from before).
    pub caller: Option<CallerIdentity>,
    pub events: Vec<Event>,
    /// One per scenario phase.
    pub phases: Vec<PhaseFacts>,
}

impl RunResult {
    /// The limit `target`'s figures were judged against: its own as recorded, else (a run.json
    /// from before failmode recorded it) the run's.
    pub fn limit_of(&self, target: &TargetResult) -> TargetLimit {
        target.limit.unwrap_or_else(|| self.limit_of_run())
    }

    /// How many caller keys tenant `name` sends (a population's rest: many; else one): its
    /// allowance is theirs together.
    pub fn keys_of(&self, name: &str) -> u64 {
        self.tenants
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.keys)
            .unwrap_or(1)
    }

    /// The scenario's limit, every target's unless its manifest declares its own.
    pub fn limit_of_run(&self) -> TargetLimit {
        TargetLimit {
            limit: self.limit,
            window_s: self.window_s,
            source: crate::limits::LimitSource::Scenario,
        }
    }
}

#[cfg(test)]
mod tests;
