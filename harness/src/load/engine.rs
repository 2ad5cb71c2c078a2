//! The sender threads: every request leaves at its scheduled instant, whatever became of the
//! ones before it (and then takes a kept-alive connection, or waits for one: [`super::exchange`]).
//!
//! Each sender is an OS thread running a current-thread tokio runtime that owns its part of
//! the generator: the dispatcher (its target × tenant schedules merged in due order,
//! [`Due`]), its connection pools, and one task per request in flight. The dispatcher
//! sleeps on the [`Pacer`] until the earliest due arrival (or a quantum after its last
//! wake-up, if later), spawns everything due, and sleeps again; a request task sends,
//! drains the answer and hands a [`Sample`] to the recorder. One sender runs every schedule
//! up to 40,000 req/s; above, the schedules are split over one sender per core
//! ([`super::shard`]). The senders share only the in-flight bound of each target (a
//! semaphore) and the recorder. Before the start each sender opens the kept-alive
//! connections its first moments would need at once ([`super::warm`]).
//!
//! What the design answers to: on the project's 2-core virtual machine a thread going to sleep
//! and waking costs 10–25 µs of CPU, more than the HTTP exchange itself, so the client's CPU
//! per request is mostly its number of wake-ups.
//! - One thread of its own, sending from where it woke: a dedicated timer thread handing
//!   requests to a runtime worker would wake two threads per due instant instead of one, and
//!   no scheduler shared with the harness (fault timeline, progress display) can hold a send
//!   back.
//! - Wake-ups a pacing quantum apart at least ([`Pacing`]; 150 µs): requests falling due
//!   within it leave together at its end. The quantum counts from the deadline of the wake-up
//!   before, not from when it came, so the wake-up after next is known before the next one
//!   comes ([`Due::first_after`]) and the [`Pacer`] arms it while the next is still pending,
//!   which costs a virtual machine far less. Side by side on the project's VM (2026-12-05),
//!   against one timer armed on waking and a 100 µs quantum counted from the wake-up: CPU a
//!   request 29.6–29.7 → 22.0–22.9 µs at 5,000 req/s and 24.3–24.5 → 18.0–18.4 at 10,000,
//!   the send-lag p99 0.11 → 0.14 ms and 0.12 → 0.15 ms (two runs each; docs/load-engine.md
//!   has the variants tried).
//! - Above 10,000 req/s of its own a sender paces as it did before: 250 µs counted from each
//!   wake-up, one timer armed on waking. The quantum halved the CPU per request at 20,000
//!   req/s (38.5 → 18.8 µs at 100 µs, for a send-lag p99 of 0.13 → 0.16 ms), and 250 µs brought
//!   it to 11 µs at a lag p99 of 0.31 ms: worth it only where the 0.2 ms lag goal (set at
//!   5,000 req/s) does not apply. Two timers there saved 1 µs a request at 20,000, but at
//!   40,000 sent late and dropped in 3 of 7 runs, interleaved with 0 of 7 for this pacing.
//!
//! Bounds: at most `max_in_flight_per_target` requests in flight per target, or the target's
//! `max_connections` if lower (a semaphore the senders share); one due beyond it is dropped
//! and recorded as [`Outcome::Dropped`] ([`DropCause::InFlightBound`], or
//! [`DropCause::ConnectionCap`]), never delayed. A connection carries one request at a time,
//! so a target never has more connections in use than that bound. No per-request state outlives
//! the request: memory does not grow with the run.
//!
//! Every request sent is recorded, answered or not: its task owns an `InFlight` guard, and a
//! task still waiting when the run stops (an interrupted run's grace ran out) is dropped with
//! its sender's runtime, before [`try_run`] returns; its guard then records it as
//! `Transport(Abandoned)`, its latency running to that moment. On a hung store those are the
//! slowest requests of the run: losing them would flatter the tail.
//!
//! Client behaviours ([`Client`](super::client::Client)): a request's task sends its retries
//! itself, on the next instance for a round-robin tenant (as a balancer would), holding its
//! in-flight permit through the waits; no retry starts after the run's end. An
//! adaptive-throttling tenant's refusals are decided on its sender thread, from a per-stream
//! history and random stream.

use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::attempts::{Attempts, Retrying};
use super::due::{Due, Scheduled, Schedules};
use super::error::LoadError;
use super::in_flight::{InFlight, Settled};
use super::members::Followed;
use super::pacer::{Pacer, Pacing, keep_a_timer_pending};
use super::prepared::Prepared;
use super::shard;
use super::stream::Stream;
use super::warm;
use super::{DropCause, LoadPlan, LoadSummary, Outcome, Recorder, Role, Sample};

/// Due arrivals dispatched in one pass before the dispatcher looks at the clock and at
/// cancellation again: however far behind, a Ctrl-C stops the sending within one pass
/// (well under 100 ms).
const MAX_DUE_PER_PASS: usize = 256;

/// An arrival later than this is not sent: it and every arrival of its stream due before
/// `now − MAX_LATE` are dropped in bulk ([`DropCause::Backlog`]). A second late, a latency
/// "from the schedule" measures the generator, not the target; and a backlog sent one by one
/// would keep the generator behind for as long as the run lasts.
pub(crate) const MAX_LATE: Duration = Duration::from_secs(1);

/// How long after the plan's end an arrival due before it may still leave: as late as any
/// arrival may ([`MAX_LATE`]), so a stall at the very end of a run is no worse than one in
/// its middle; what is still due then is dropped in bulk and the load ends.
const SEND_AFTER_END: Duration = MAX_LATE;

/// How long a cancelled run waits for its requests in flight (at most the request timeout).
const CANCEL_GRACE: Duration = Duration::from_millis(250);

/// Past the request timeout, how long the end of a run waits for the last requests: their
/// own timeouts fire on tokio's millisecond timer, so a little late.
const END_MARGIN: Duration = Duration::from_millis(100);

/// Runs `plan` from `start` (offset zero of every schedule; pass an instant slightly ahead
/// of now so the first requests are not late) until its duration is over or `cancel` fires.
///
/// Ends when every scheduled request has been sent (or dropped) and answered or timed out,
/// by the plan's end + 1 s + request timeout + 100 ms however far behind it fell: arrivals
/// more than a second late, during the run or after its end, are dropped in bulk. On
/// `cancel` it
/// stops sending at once, counts what was left as [`LoadSummary::cancelled`], and waits for
/// the requests in flight for a short grace (250 ms, at most the request timeout); those still
/// unanswered then are recorded as abandoned ([`LoadSummary::abandoned`]).
/// Samples are recorded from the sender threads; none is recorded after this returns.
pub async fn try_run(
    plan: LoadPlan,
    start: Instant,
    recorder: Arc<dyn Recorder>,
    cancel: CancellationToken,
) -> Result<LoadSummary, LoadError> {
    let prepared = Arc::new(Prepared::new(&plan)?);
    // Dropping this future stops the load threads too.
    let cancel = cancel.child_token();
    let stop_on_drop = cancel.clone().drop_guard();
    let shared = Shared {
        in_flight: plan
            .targets
            .iter()
            .map(|t| {
                let (bound, cause) = t.connections.bound(plan.max_in_flight_per_target);
                (Arc::new(Semaphore::new(bound)), cause)
            })
            .collect(),
        settled: Arc::new(Settled::default()),
    };
    // What this process sends of each stream, target-major.
    let share = match plan.role {
        Role::Sender(share) => 1.0 / f64::from(share.count()),
        Role::FaultPlayer => 0.0,
    };
    let rates: Vec<f64> = (0..plan.targets.len())
        .flat_map(|_| plan.tenants.iter().map(|t| t.rate_per_s * share))
        .collect();
    let plan = Arc::new(plan);
    let assigned = shard::assign(&rates, plan.senders.count(&rates));
    let sharing = warm::senders_per_target(&assigned, plan.targets.len(), plan.tenants.len());
    let senders = assigned.len();
    let mut shards = FuturesUnordered::new();
    let mut failed_to_start = None;
    for (k, streams) in assigned.into_iter().enumerate() {
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let (plan, prepared, recorder, stop) = (
            Arc::clone(&plan),
            Arc::clone(&prepared),
            Arc::clone(&recorder),
            cancel.clone(),
        );
        let shared = shared.clone();
        let (rates, sharing) = (rates.clone(), sharing.clone());
        // Half the request timeout, so due before any timeout set while it is pending; at most
        // a second (it wakes the sender once a period) and at least a millisecond (tokio's
        // resolution: below a 2 ms timeout it may not be the sooner).
        let timer_period =
            (plan.request_timeout / 2).clamp(Duration::from_millis(1), Duration::from_secs(1));
        let spawned = std::thread::Builder::new()
            .name(format!("failmode-load-{k}"))
            .spawn(move || {
                let result = tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .enable_time()
                    .build()
                    .map_err(LoadError::Start)
                    .and_then(|runtime| {
                        let rates: Vec<f64> = streams.iter().map(|&i| rates[i]).collect();
                        let load = Load::new(prepared, &plan, &streams, start, recorder, shared)
                            .sender(k, senders, rates.iter().sum());
                        // Leaving block_on stops every task; dropping the runtime drops what
                        // is left (the abandoned requests), each recording its sample, before
                        // the caller hears the result.
                        let summary = runtime.block_on(async {
                            tokio::select! {
                                biased;
                                summary = load.drive(stop, &rates, &sharing) => summary,
                                never = keep_a_timer_pending(timer_period) => match never {},
                            }
                        });
                        drop(runtime);
                        summary
                    });
                // The receiver is gone only if the caller stopped waiting.
                let _ = done_tx.send(result);
            });
        if let Err(e) = spawned {
            // The senders already started stop and are waited for below: none records after
            // this returns.
            cancel.cancel();
            failed_to_start = Some(LoadError::Start(e));
            break;
        }
        shards.push(async move { done_rx.await.unwrap_or(Err(LoadError::Panicked)) });
    }
    // Every sender's result, the first failure stopping the others: a run with a sender
    // missing would send part of its schedule and call it whole.
    let mut summary = failed_to_start.map_or(Ok(LoadSummary::default()), Err);
    while let Some(result) = shards.next().await {
        match (result, &mut summary) {
            (Ok(part), Ok(total)) => total.add(&part),
            (Err(e), Ok(_)) => {
                cancel.cancel();
                summary = Err(e);
            }
            (_, Err(_)) => {}
        }
    }
    stop_on_drop.disarm();
    // Read once every sender's runtime, and with it every request's task, is gone.
    summary.map(|mut summary| {
        summary.senders = u32::try_from(senders).unwrap_or(u32::MAX);
        shared.settled.complete(summary)
    })
}

/// What the senders share: the in-flight bound of each target (with what a request dropped
/// at it is dropped for), and the counts the requests' tasks keep as they record their
/// samples.
#[derive(Clone)]
struct Shared {
    in_flight: Vec<(Arc<Semaphore>, DropCause)>,
    settled: Arc<Settled>,
}

/// One sender's state, owned by its thread.
struct Load {
    prepared: Arc<Prepared>,
    streams: Vec<Stream>,
    in_flight: Vec<(Arc<Semaphore>, DropCause)>,
    /// Per target.
    keep_alive: Vec<bool>,
    /// Per target.
    targets: Vec<Followed>,
    start: Instant,
    /// No retry starts after this.
    end: Instant,
    /// What the requests' tasks count as they record their samples.
    settled: Arc<Settled>,
    /// No retry starts once this fires.
    cancel: CancellationToken,
    pacing: Pacing,
    /// Which sender this is, of how many: it tells the recorder how far it has dispatched.
    sender: (usize, usize),
    request_timeout: Duration,
    recorder: Arc<dyn Recorder>,
    tasks: TaskTracker,
    summary: LoadSummary,
}

impl Load {
    /// The sender for `streams` (indexes into target-major target × tenant order).
    fn new(
        prepared: Arc<Prepared>,
        plan: &LoadPlan,
        streams: &[usize],
        start: Instant,
        recorder: Arc<dyn Recorder>,
        shared: Shared,
    ) -> Self {
        let streams: Vec<Stream> = streams.iter().map(|&i| Stream::new(plan, i)).collect();
        Self {
            // Each sender its own pools: a connection's task lives on the runtime that
            // opened it.
            targets: plan
                .targets
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    Followed::new(
                        t.instances.clone(),
                        prepared.sources_of(i),
                        t.connections.keep_alive.max_idle(),
                    )
                })
                .collect(),
            prepared,
            streams,
            pacing: Pacing::for_rate(0.0),
            sender: (0, 1),
            in_flight: shared.in_flight,
            keep_alive: plan
                .targets
                .iter()
                .map(|t| t.connections.keep_alive.is_on())
                .collect(),
            start,
            end: start + plan.duration,
            settled: shared.settled,
            cancel: CancellationToken::new(),
            request_timeout: plan.request_timeout,
            recorder,
            tasks: TaskTracker::new(),
            summary: LoadSummary::default(),
        }
    }

    /// Sender `k` of `senders`, sending `rate_per_s` in all: its pacing quantum follows its own
    /// total, since the wake-ups are its thread's.
    fn sender(mut self, k: usize, senders: usize, rate_per_s: f64) -> Self {
        self.sender = (k, senders);
        self.pacing = Pacing::for_rate(rate_per_s);
        self
    }

    /// Opens, before the start, the connections this sender's first moments would open at
    /// once ([`warm`]): its streams' `rates` (what it sends of each, requests a second), each
    /// target sent to by `sharing` senders, which share its bound.
    async fn warm_up(&mut self, rates: &[f64], sharing: &[usize]) {
        let mut demands = Vec::new();
        for (stream, &rate_per_s) in self.streams.iter().zip(rates) {
            if self.keep_alive[stream.target] {
                let members = Arc::clone(self.targets[stream.target].current());
                demands.push((members, stream, rate_per_s));
            }
        }
        let pools = warm::plan(demands.iter().map(|(members, stream, rate_per_s)| {
            warm::Demand {
                members,
                target: stream.target,
                tenant: stream.tenant,
                spread: stream.spread_over(&members.in_rotation),
                rate_per_s: *rate_per_s,
                // Nothing is in flight before the start: the whole bound is free, for the
                // senders to the target to share.
                budget: self.in_flight[stream.target].0.available_permits()
                    / sharing[stream.target],
            }
        }));
        warm::open(&pools, self.start).await;
    }

    /// Tells the recorder how far this sender has dispatched, when that reached a new second.
    fn report_progress(&self, next: Option<Duration>, reported: &mut u64) {
        let until = next.unwrap_or(Duration::MAX);
        if until.as_secs() > *reported {
            *reported = until.as_secs();
            let (k, senders) = self.sender;
            self.recorder.dispatched(k, senders, until);
        }
    }

    /// Warms up ([`Self::warm_up`]'s `rates` and `sharing`), then sends until the end.
    async fn drive(
        mut self,
        cancel: CancellationToken,
        rates: &[f64],
        sharing: &[usize],
    ) -> Result<LoadSummary, LoadError> {
        let mut pacer = Pacer::new(self.pacing).map_err(LoadError::Timer)?;
        self.cancel = cancel.clone();
        tokio::select! {
            biased;
            () = cancel.cancelled() => {}
            () = self.warm_up(rates, sharing) => {}
        }
        let mut cancelled = pin!(cancel.cancelled());
        let mut due = Due::new(&mut self.streams[..]);

        let mut was_cancelled = false;
        let mut next_wake = self.start;
        let mut reported = 0;
        while let Some(next) = due.peek() {
            let next_at = (self.start + next).max(next_wake);
            let slept = if Instant::now() < next_at {
                // The wake-up after this one, unless this one comes so late that it sends that
                // one's arrivals too: armed now, it costs less (`Pacer`).
                let then = match self.pacing {
                    Pacing::ArmedAhead(quantum) => due
                        .first_after(
                            next_at - self.start,
                            MAX_DUE_PER_PASS,
                            &mut self.streams[..],
                        )
                        .map(|after| (self.start + after).max(next_at + quantum)),
                    Pacing::OnWaking(_) => None,
                };
                tokio::select! {
                    biased;
                    () = &mut cancelled => {
                        was_cancelled = true;
                        break;
                    }
                    slept = pacer.sleep_until(next_at, then) => slept.map_err(LoadError::Timer)?,
                }
                true
            } else if cancel.is_cancelled() {
                was_cancelled = true;
                break;
            } else {
                false
            };
            let now = Instant::now();
            // The instant this pass is for: the wake-up's deadline, so the next one is known
            // before this one comes (see `then`); now, if the dispatcher is behind.
            let tick = if slept { next_at } else { now };
            if now >= self.end + SEND_AFTER_END {
                // What is still due was not sent in time: the run ends on time regardless.
                self.drop_backlog(&mut due, self.end - self.start);
                break;
            }
            let elapsed = now - self.start;
            if next + MAX_LATE < elapsed {
                self.drop_backlog(&mut due, elapsed - MAX_LATE);
            }
            next_wake = match self.pacing {
                Pacing::ArmedAhead(quantum) => tick + quantum,
                Pacing::OnWaking(quantum) => now + quantum,
            };
            let mut dispatched = 0;
            while dispatched < MAX_DUE_PER_PASS
                && !cancel.is_cancelled()
                && let Some(arrival) = due.pop_due(elapsed, &mut self.streams[..])
            {
                self.dispatch(arrival);
                dispatched += 1;
            }
            self.report_progress(due.peek(), &mut reported);
            if dispatched == MAX_DUE_PER_PASS {
                // A burst larger than a pass: the rest is due already, so no quantum's sleep.
                next_wake = now;
            }
            // Behind schedule the loop would never await: let the requests just spawned go.
            if due.peek().is_some_and(|o| self.start + o <= Instant::now()) {
                tokio::task::yield_now().await;
            }
        }

        if was_cancelled {
            self.summary.stopped_sending_at =
                Some(Instant::now().saturating_duration_since(self.start));
        }
        // Nothing more leaves this sender (a cancelled run's rest is counted, not recorded).
        self.report_progress(None, &mut reported);
        // Nothing more to wake for: a timer armed ahead would wake the thread in the grace.
        drop(pacer);
        self.tasks.close();
        let grace = CANCEL_GRACE.min(self.request_timeout);
        if was_cancelled {
            let _ = tokio::time::timeout(grace, self.tasks.wait()).await;
        } else {
            // A retry may start until the run's end, after the last scheduled send.
            let deadline = self.end + SEND_AFTER_END + self.request_timeout + END_MARGIN;
            let last = tokio::time::timeout_at(deadline.into(), self.tasks.wait());
            tokio::select! {
                _ = last => {}
                () = &mut cancelled => {
                    let _ = tokio::time::timeout(grace, self.tasks.wait()).await;
                }
            }
        }
        // The requests still in flight are recorded as the runtime drops them; their counts
        // (abandoned, retries) are read after that (`Settled::complete`).
        if was_cancelled {
            // Counted without visiting them: exact for uniform arrivals, a draw of the same
            // distribution for Poisson ones (`Schedule::skip_until`); never sent either way.
            let all = self.end - self.start;
            let (taken, heads) = due.into_parts();
            let left: u64 = taken as u64
                + heads
                    .map(|head| 1 + self.streams[head.stream].schedule.skip_until(all))
                    .sum::<u64>();
            self.summary.cancelled = left;
            self.summary.scheduled += left;
        }
        Ok(self.summary)
    }

    /// Drops every arrival due before `until` (an offset) in bulk, counted and recorded per
    /// stream and second without visiting them: those taken ahead, the heads' entries before
    /// `until`, and the arrivals their streams would have produced up to it.
    fn drop_backlog(&mut self, due: &mut Due, until: Duration) {
        while let Some(taken) = due.pop_taken_before(until) {
            self.dropped_in_backlog(taken.stream, taken.offset, 1);
        }
        while let Some(first) = due.pop_head_before(until) {
            let i = first.stream;
            let mut from = first.offset;
            // Second by second, so each second (and each phase, to within one) is charged
            // with its own drops.
            loop {
                let second_end = Duration::from_secs(from.as_secs() + 1).min(until);
                let n = 1 + self.streams[i].schedule.skip_until(second_end);
                self.dropped_in_backlog(i, from, n);
                match self.streams[..].next_of(i) {
                    Some(next) if next.offset < until => from = next.offset,
                    Some(next) => {
                        due.push(next);
                        break;
                    }
                    None => break,
                }
            }
        }
    }

    /// `n` arrivals of `stream` from `from` on, dropped for the backlog.
    fn dropped_in_backlog(&mut self, stream: usize, from: Duration, n: u64) {
        let cause = DropCause::Backlog;
        let stream = &mut self.streams[stream];
        stream.skipped(n);
        self.summary.scheduled += n;
        self.summary.dropped += n;
        self.summary.dropped_by_cause.count(cause, n);
        let sample = Sample::unsent(
            (stream.target, stream.tenant, 0),
            from,
            Outcome::Dropped(cause),
        );
        self.recorder.record_repeated(&sample, n);
    }

    fn dispatch(&mut self, arrival: Scheduled) {
        let offset = arrival.offset;
        let stream = &mut self.streams[arrival.stream];
        let (target, tenant) = (stream.target, stream.tenant);
        let members = Arc::clone(self.targets[target].current());
        let instance = stream.pick_instance(&members.in_rotation);
        let key = stream.key(arrival.index);
        self.summary.scheduled += 1;
        let unsent = |outcome| Sample::unsent((target, tenant, instance), offset, outcome);
        if let Some(throttle) = &stream.throttle {
            let mut throttle = throttle.lock().unwrap_or_else(|e| e.into_inner());
            let refuse = throttle.reject_probability(offset);
            if refuse > 0.0 && stream.rng.random::<f64>() < refuse {
                throttle.refused_locally(offset);
                self.summary.throttled += 1;
                self.recorder.record(&unsent(Outcome::Throttled));
                return;
            }
        }
        let (bound, cause) = &self.in_flight[target];
        let Ok(permit) = Arc::clone(bound).try_acquire_owned() else {
            let cause = *cause;
            self.summary.dropped += 1;
            self.summary.dropped_by_cause.count(cause, 1);
            self.recorder.record(&unsent(Outcome::Dropped(cause)));
            return;
        };
        self.summary.sent += 1;

        let followed = &self.targets[target];
        let request = Attempts {
            prepared: Arc::clone(&self.prepared),
            members,
            rotation: followed.rotation.clone(),
            version: followed.version,
            target,
            tenant,
            key,
            first_instance: instance,
            spread: stream.spread,
            client: stream.client,
            retrying: stream.client.retries().then(|| Retrying {
                rng: ChaCha8Rng::seed_from_u64(stream.rng.random()),
                cancel: self.cancel.clone(),
            }),
            throttle: stream.throttle.clone(),
            keep_alive: self.keep_alive[target],
            start: self.start,
            end: self.end,
            timeout: self.request_timeout,
        };
        // Built before the task, so a task dropped before it ever ran records its sample too.
        let mut in_flight = InFlight::new(
            Arc::clone(&self.recorder),
            Arc::clone(&self.settled),
            (target, tenant, instance),
            offset,
            self.start,
        );
        self.tasks.spawn(async move {
            // The actual send: the task's first poll, right before the request takes its
            // connection (or waits for one).
            let outcome = request.run(in_flight.sending()).await;
            let done_at = Instant::now();
            drop(permit);
            in_flight.answered(outcome, done_at);
        });
    }
}
