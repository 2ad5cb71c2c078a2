//! `run.json`: the versioned record of one run (schema in `harness/schema/run.schema.json`),
//! and the results folder around it.

pub mod batches;
#[cfg(any(test, feature = "test-support"))]
pub mod fixture;
pub mod folder;
pub mod hlog;
pub mod merge;
pub mod read;

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::identity::CallerIdentity;
pub use crate::identity::TenantIdentity;
use crate::limits::TargetLimit;
use crate::load::{Role, Share};
use crate::metrics::derived;
use crate::metrics::{Cell, Counts, Measured};
use crate::scenario::Scenario;

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
    /// The run was interrupted (Ctrl-C, or a harness error mid-run): figures cover what ran.
    pub partial: bool,
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

/// What a cell's allowance is judged against: the allowance of its phase, and the slack one
/// window's limit gives a correct limiter whose windows do not line up with the phase.
#[derive(Debug, Clone, Copy)]
struct Allowed {
    allowance: f64,
    slack: f64,
    length_s: f64,
}

/// A cell's derived figures from its counts, by the definitions of [`derived`]; its latency
/// is left unmeasured for the caller to fill.
pub(crate) fn tenant_of(
    name: &str,
    c: &Counts,
    allowance: f64,
    slack: f64,
    length_s: f64,
) -> TenantResult {
    let entitled = derived::entitled(c.asked(), allowance);
    let measured = c.sent() > 0;
    TenantResult {
        name: name.to_owned(),
        counts: *c,
        allowance,
        entitled,
        over_admission: measured.then(|| derived::over_admission(c.admitted, allowance)),
        over_admission_beyond_window: measured
            .then(|| derived::over_admission_beyond(c.admitted, allowance, slack)),
        wrongful_denial: (measured && entitled > 0.0)
            .then(|| derived::wrongful_denial(c.admitted, entitled)),
        admitted_per_s: if length_s > 0.0 {
            c.admitted as f64 / length_s
        } else {
            0.0
        },
        latency_us: None,
        service_time_us: None,
    }
}

fn tenant_result(name: &str, cell: &Cell, allowed: Allowed) -> TenantResult {
    let mut t = tenant_of(
        name,
        &cell.counts,
        allowed.allowance,
        allowed.slack,
        allowed.length_s,
    );
    if t.measured() {
        t.latency_us = Percentiles::of(&cell.latency);
        t.service_time_us = Percentiles::of(&cell.service_time);
    }
    t
}

/// All tenants together: counts summed, the ratios over the totals of the tenants whose
/// figures were measured (total excess ÷ total allowance, total shortfall ÷ total
/// entitlement); the latency is left for the caller to fill.
pub(crate) fn all_tenants_of(tenants: &[TenantResult], slack: f64, length_s: f64) -> TenantResult {
    let mut counts = Counts::default();
    for t in tenants {
        counts.merge(&t.counts);
    }
    let allowance: f64 = tenants.iter().map(|t| t.allowance).sum();
    let mut all = tenant_of("all", &counts, allowance, slack, length_s);
    all.entitled = tenants.iter().map(|t| t.entitled).sum();
    let measured: Vec<&TenantResult> = tenants.iter().filter(|t| t.measured()).collect();
    let sum = |f: &dyn Fn(&TenantResult) -> f64| measured.iter().map(|t| f(t)).sum::<f64>();
    let measured_allowance = sum(&|t| t.allowance);
    let measured_entitled = sum(&|t| t.entitled);
    let excess = sum(&|t| (t.counts.admitted as f64 - t.allowance).max(0.0));
    let excess_beyond = sum(&|t| (t.counts.admitted as f64 - t.allowance - slack).max(0.0));
    let shortfall = sum(&|t| (t.entitled - t.counts.admitted as f64).max(0.0));
    let over = |excess: f64| (measured_allowance > 0.0).then(|| excess / measured_allowance);
    all.over_admission = over(excess);
    all.over_admission_beyond_window = over(excess_beyond);
    all.wrongful_denial = (measured_entitled > 0.0).then(|| shortfall / measured_entitled);
    all
}

/// [`all_tenants_of`], with the latency of the cells' histograms added exactly.
fn all_tenants(cells: &[Cell], tenants: &[TenantResult], allowed: Allowed) -> TenantResult {
    let mut all = all_tenants_of(tenants, allowed.slack, allowed.length_s);
    if all.measured() {
        let mut merged = cells[0].clone();
        for cell in &cells[1..] {
            // Same bounds everywhere, so adding cannot fail.
            let _ = merged.latency.add(&cell.latency);
            let _ = merged.service_time.add(&cell.service_time);
        }
        all.latency_us = Percentiles::of(&merged.latency);
        all.service_time_us = Percentiles::of(&merged.service_time);
    }
    all
}

/// Puts the measurements and the runner's facts together. A run that stopped after `ran_for`
/// reports only the phases it reached, the last one cut at `ran_for`: its allowance and rates
/// cover the time that actually ran.
pub fn build_targets(
    scenario: &Scenario,
    measured: &Measured,
    facts: &[TargetFacts],
    ran_for: std::time::Duration,
) -> Vec<TargetResult> {
    facts
        .iter()
        .enumerate()
        .map(|(t, f)| TargetResult {
            name: f.name.clone(),
            description: f.description.clone(),
            instances: f.instances,
            command: f.command.clone(),
            env: f.env.clone(),
            refuses_with: f.refuses_with,
            limit: Some(f.limit),
            caller: f.caller.clone(),
            send_lag_us: Percentiles::of(&measured.send_lag[t]),
            events: f.events.clone(),
            phases: scenario
                .phases
                .iter()
                .enumerate()
                .filter(|(_, phase)| phase.start < ran_for)
                .map(|(p, phase)| {
                    let end = phase.end.min(ran_for);
                    let length = end - phase.start;
                    let length_s = length.as_secs_f64();
                    // The target's own rule: a run may hold targets of different limits.
                    let allowed = Allowed {
                        allowance: f.limit.allowance(length_s),
                        slack: f.limit.window_slack(length_s),
                        length_s,
                    };
                    let cells: Vec<Cell> = measured.cells[t]
                        .iter()
                        .map(|per_phase| per_phase[p].clone())
                        .collect();
                    let tenants: Vec<TenantResult> = scenario
                        .tenants
                        .iter()
                        .zip(&cells)
                        .map(|(tenant, cell)| tenant_result(&tenant.name, cell, allowed))
                        .collect();
                    let all = all_tenants(&cells, &tenants, allowed);
                    let pf = f.phases.get(p).cloned().unwrap_or_default();
                    PhaseResult {
                        name: phase.name.clone(),
                        start_s: phase.start.as_secs_f64(),
                        end_s: end.as_secs_f64(),
                        faults: phase.faults.iter().map(ToString::to_string).collect(),
                        faults_applied_at_s: pf.faults_applied_at_s,
                        faults_removed_at_s: pf.faults_removed_at_s,
                        fallbacks: pf.fallbacks,
                        store_commands: pf.store_commands,
                        store_amplification: pf.store_commands.and_then(|commands| {
                            let offered = all.counts.offered;
                            (all.measured()).then(|| commands as f64 / offered as f64)
                        }),
                        store_amplification_per_attempt: pf.store_commands.and_then(|commands| {
                            let sent = all.counts.attempts();
                            (sent > 0).then(|| commands as f64 / sent as f64)
                        }),
                        client_amplification: all.counts.client_amplification(),
                        tenants,
                        all,
                    }
                })
                .collect(),
        })
        .collect()
}

/// Above this share of the scheduled requests dropped by the generator, the run did not send
/// what the scenario asked, and its verdicts cannot be trusted.
const UNTRUSTED_DROP_SHARE: f64 = 0.001;
/// Above this send-lag p99 the generator fell behind by as much as the latencies it measures
/// (the shipped gates ask p99 ≤ 30 ms): the figures are the machine's, not the target's.
const UNTRUSTED_SEND_LAG_US: u64 = 50_000;

impl RunResult {
    /// The limit `target`'s figures were judged against: its own as recorded, else (a run.json
    /// from before failmode recorded it) the run's.
    pub fn limit_of(&self, target: &TargetResult) -> TargetLimit {
        target.limit.unwrap_or_else(|| self.limit_of_run())
    }

    /// The scenario's limit, every target's unless its manifest declares its own.
    pub fn limit_of_run(&self) -> TargetLimit {
        TargetLimit {
            limit: self.limit,
            window_s: self.window_s,
            source: crate::limits::LimitSource::Scenario,
        }
    }

    /// Why the run's measurements cannot be trusted, if they cannot: the generator dropped
    /// requests or fell behind beyond the thresholds above. A verdict on such a run exits 3.
    pub fn untrusted(&self) -> Vec<String> {
        let mut why = Vec::new();
        let scheduled = self.load.scheduled.max(1);
        let dropped_share = self.load.dropped as f64 / scheduled as f64;
        if dropped_share > UNTRUSTED_DROP_SHARE {
            why.push(format!(
                "the load generator dropped {} of {} scheduled requests ({:.2} %, above {:.1} %)",
                self.load.dropped,
                self.load.scheduled,
                dropped_share * 100.0,
                UNTRUSTED_DROP_SHARE * 100.0
            ));
        }
        for t in &self.targets {
            if let Some(lag) = t.send_lag_us.filter(|l| l.p99 > UNTRUSTED_SEND_LAG_US) {
                why.push(format!(
                    "the load generator fell behind on {} (send lag p99 {:.1} ms, above {} ms)",
                    t.name,
                    lag.p99 as f64 / 1000.0,
                    UNTRUSTED_SEND_LAG_US / 1000
                ));
            }
        }
        why
    }
}

/// A worker sends a share of every tenant's traffic while the limiter decides on all of it,
/// and reads the Redis every worker loads: its share's admitted count says nothing against the
/// allowance, nor its requests against the store's commands. Those figures are not measured
/// (`null`) until `failmode merge` puts the shares together (the store's command count and the
/// target's fallback counter stay: they are the whole target's, and merge reads them); returns
/// the note that says so.
pub fn withhold_for_worker(targets: &mut [TargetResult]) -> String {
    for phase in targets.iter_mut().flat_map(|t| &mut t.phases) {
        phase.store_amplification = None;
        phase.store_amplification_per_attempt = None;
        for tenant in phase.tenants.iter_mut().chain([&mut phase.all]) {
            tenant.over_admission = None;
            tenant.over_admission_beyond_window = None;
            tenant.wrongful_denial = None;
        }
    }
    "one worker's share of the run: its over-admission, wrongful denial and store \
     amplification are not measured (the limiter decided on, and the store counted, every \
     worker's traffic); `failmode merge` the workers' folders for them, and gate or compare the \
     merged folder"
        .to_owned()
}

/// Above this share of errors before any fault, a target is broken with a healthy Redis, and
/// whatever it does under a fault says nothing about its failure mode.
const HEALTHY_ERROR_SHARE: f64 = 0.01;
/// ...and at least this many errors: in a short phase (a scaled-down run's 2 s of healthy
/// Redis, 290 requests), 3 timeouts in the cold first second (a JIT compiling beside it, a
/// pool growing) pass 1 % without anything being broken.
const BROKEN_ERRORS_AT_LEAST: u64 = 10;

/// Notes naming each target that answered 5xx or not at all before the first fault: with a
/// healthy store, that is a broken target (seen: a limiter built before its Redis client was
/// ready caches the failed script load and answers 500 forever), not a failure mode.
pub fn broken_before_any_fault(targets: &[TargetResult]) -> Vec<String> {
    targets
        .iter()
        .filter_map(|t| {
            let before: Vec<&PhaseResult> = t
                .phases
                .iter()
                .take_while(|p| p.faults.is_empty())
                .collect();
            let mut counts = Counts::default();
            for p in &before {
                counts.merge(&p.all.counts);
            }
            // A 503 is a refusal, not an error, from a target that declares it refuses so.
            let refusals = if t.refuses_with == 503 {
                counts.unavailable
            } else {
                0
            };
            let errors =
                counts.errors_5xx() - refusals + counts.transport_error + counts.other_status;
            let share = errors as f64 / counts.offered.max(1) as f64;
            (share > HEALTHY_ERROR_SHARE && errors >= BROKEN_ERRORS_AT_LEAST).then(|| {
                format!(
                    "{} answered {:.1} % of requests with an error (5xx {}, no answer {}, other {}) \
                     before any fault ({}), with Redis healthy: the target itself is broken \
                     (see its log), so its figures under faults do not show a failure mode",
                    t.name,
                    share * 100.0,
                    counts.errors_5xx(),
                    counts.transport_error,
                    counts.other_status,
                    before
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
        })
        .collect()
}

/// The load generator's send lag above which the machine, not the targets, shapes latency:
/// on an idle machine its p99 stays under 0.2 ms at 5,000 req/s (`just bench-loadgen`).
const SATURATED_SEND_LAG_US: u64 = 5_000;

/// A note when the load generator itself ran late: every process on the machine was then
/// queueing for CPU, and every latency of the run includes that wait.
pub fn machine_saturated(targets: &[TargetResult]) -> Option<String> {
    let (worst, p99) = targets
        .iter()
        .filter_map(|t| Some((t, t.send_lag_us?.p99)))
        .max_by_key(|(_, p99)| *p99)?;
    (p99 > SATURATED_SEND_LAG_US).then(|| {
        format!(
            "the load generator sent late (send lag p99 {:.1} ms, {}): the machine was short of \
             CPU, so every latency here includes waiting for it; compare latencies within this \
             run, or run fewer targets at once (--targets) for absolute figures",
            p99 as f64 / 1000.0,
            worst.name
        )
    })
}

#[cfg(test)]
mod tests;
