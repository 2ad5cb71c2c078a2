//! Whether a run's figures can be trusted, and the notes that say why not: a load generator
//! that dropped requests or fell behind, a target broken before any fault, a machine short of
//! CPU, and a worker's share that cannot be judged alone.

use crate::metrics::Counts;

use super::{PhaseResult, RunResult, TargetResult};

/// Above this share of the scheduled requests dropped by the generator, the run did not send
/// what the scenario asked, and its verdicts cannot be trusted.
const UNTRUSTED_DROP_SHARE: f64 = 0.001;
/// Above this send-lag p99 the generator fell behind by as much as the latencies it measures
/// (the shipped gates ask p99 ≤ 30 ms): the figures are the machine's, not the target's.
const UNTRUSTED_SEND_LAG_US: u64 = 50_000;

impl RunResult {
    /// This run with [`RunResult::untrusted_because`] filled in from its figures.
    pub fn with_trust_recorded(mut self) -> Self {
        self.untrusted_because = self.untrusted();
        self
    }

    /// Why the run's measurements cannot be trusted, if they cannot: the generator dropped
    /// requests or fell behind beyond the thresholds above. A verdict on such a run exits 3.
    pub fn untrusted(&self) -> Vec<String> {
        let mut why = Vec::new();
        let scheduled = self.load.scheduled.max(1);
        // Drops at a target's max_connections are the scenario's client, as asked, not the
        // generator failing to send.
        let failed = self
            .load
            .dropped
            .saturating_sub(self.load.dropped_by_cause.connection_cap);
        let dropped_share = failed as f64 / scheduled as f64;
        if dropped_share > UNTRUSTED_DROP_SHARE {
            why.push(format!(
                "the load generator dropped {} of {} scheduled requests ({:.2} %, above {:.1} %)",
                failed,
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

/// What a run's figures need said beside them, once they are built: a worker's share's
/// figures withheld (see [`withhold_for_worker`]), a target broken before any fault, a machine
/// short of CPU.
pub fn judge_figures(targets: &mut [TargetResult], worker: Option<super::Worker>) -> Vec<String> {
    let mut notes = Vec::new();
    if worker.is_some_and(|w| w.is_share()) {
        notes.push(withhold_for_worker(targets));
    }
    notes.extend(broken_before_any_fault(targets));
    notes.extend(machine_saturated(targets));
    notes
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

/// Why a run is worth running again, if it is: a target erred before any fault while the load
/// generator itself sent late. Then the machine, not the target, was short: a limiter holding
/// a tight Redis budget (20 ms for redis_rate and Envoy's ratelimit in `peers`) answers 500
/// when its process waits that long for a core (CI saw 13-15 % 500s in a 2 s healthy phase
/// with the send lag's p99 at 70 ms), and its row says nothing about its failure mode.
pub fn short_of_cpu_and_erring(targets: &[TargetResult]) -> Option<String> {
    let late = machine_saturated(targets)?;
    let erring: Vec<&str> = targets
        .iter()
        .filter(|t| !broken_before_any_fault(std::slice::from_ref(*t)).is_empty())
        .map(|t| t.name.as_str())
        .collect();
    (!erring.is_empty()).then(|| {
        let late = late
            .split_once(':')
            .map_or(late.as_str(), |(first, _)| first);
        format!(
            "{} erred before any fault while {late}",
            erring.join(" and ")
        )
    })
}

/// The load generator's send lag above which the machine, not the targets, shapes latency:
/// its p99 was 0.08–0.3 ms up to 20,000 req/s on the project's 2-core machine in
/// docs/bench-loadgen.md (2026-12-05), and up to 2.6 ms on busier days.
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
