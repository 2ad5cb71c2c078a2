//! What a run measured: per target × tenant × phase counts and HdrHistograms, per-second
//! series, and the load generator's own send lag. Memory is bounded by the timeline (cells and
//! seconds), never by the number of requests.
//!
//! Everything here adds up exactly ([`Measured::add`]): counts are summed and histograms
//! added, which is how the results of several workers become one run's.
//!
//! Percentiles never improve because requests were dropped. A request the generator did not
//! send ([`Outcome::Dropped`], whatever its cause) is counted in the latency histograms (its
//! phase cell, its second, and that second's all-tenants slot) as a request that waited the
//! request timeout ([`Shape::request_timeout`]): drops come from a target too slow to keep
//! up, and without this rule a stall that dropped most of its slow requests would show a
//! healthy p99. Its service time is not recorded: it was never sent. A request the tenant's
//! own client refused ([`Outcome::Throttled`]) has no latency: that client chose not to
//! wait. A request an interrupted run abandoned is recorded with its latency up to then.

mod checkpoint;
pub mod derived;
mod live;

pub use checkpoint::{Checkpoint, CheckpointedSecond};
pub use live::{Buckets, LiveCounts, ScrapeView};

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};

use crate::load::{DroppedByCause, MAX_LATE, Outcome, Recorder, Sample};

/// Latencies are recorded in µs, up to a minute.
const MAX_US: u64 = 60_000_000;

fn histogram(sigfig: u8) -> Histogram<u64> {
    // Bounds and precision are constants that `new_with_bounds` accepts.
    Histogram::new_with_bounds(1, MAX_US, sigfig).unwrap_or_else(|_| unreachable!())
}

/// A per-second histogram: two significant figures are plenty for a per-second p99.
fn second_histogram() -> Histogram<u64> {
    histogram(2)
}

/// A closed second's histogram, kept compact: an hour of seconds of a dozen target × tenant
/// pairs would hold gigabytes as live histograms, tens of megabytes serialized.
pub fn pack(h: &Histogram<u64>) -> Vec<u8> {
    let mut bytes = Vec::new();
    // Writing to a Vec fails only for a histogram too large to encode, which ours are not.
    let _ = V2Serializer::new().serialize(h, &mut bytes);
    bytes
}

/// The other way; a histogram written by another run is checked as it is read.
pub fn unpack(bytes: &[u8]) -> Result<Histogram<u64>, MeasuredError> {
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| MeasuredError::Histogram(format!("{e:?}")))
}

/// Why two sets of measurements do not add up.
#[derive(Debug, thiserror::Error)]
pub enum MeasuredError {
    #[error("the measurements have different shapes ({0}): not the same scenario and targets")]
    Shape(String),
    #[error("a histogram cannot be read or added: {0}")]
    Histogram(String),
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, MAX_US)
}

/// Requests by fate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Every scheduled request, whatever became of it.
    pub offered: u64,
    pub admitted: u64,
    pub limited: u64,
    pub unavailable: u64,
    pub server_error: u64,
    /// Refused, reset, timed out.
    pub transport_error: u64,
    /// Statuses outside 2xx / 429 / 5xx (a misconfigured target or plan).
    pub other_status: u64,
    /// Not sent (the in-flight bound was reached, say); counted in latency as having waited
    /// the request timeout.
    pub dropped: u64,
    /// Not sent: the tenant's client refused it itself (adaptive throttling).
    #[serde(default)]
    pub throttled: u64,
    /// Attempts sent after the first by retrying clients; a request is counted once above,
    /// by its last attempt's outcome.
    #[serde(default)]
    pub retries: u64,
    /// Connections the requests opened (the rest went on kept-alive ones): the churn the
    /// target saw, counted in the second a request was scheduled in.
    #[serde(default)]
    pub new_connections: u64,
}

impl Counts {
    /// `n` requests that ended alike.
    fn add(&mut self, s: &Sample, n: u64) {
        self.offered += n;
        self.retries += u64::from(s.attempts.saturating_sub(1)) * n;
        self.new_connections += u64::from(s.new_connections) * n;
        let count = match s.outcome {
            Outcome::Admitted => &mut self.admitted,
            Outcome::Limited => &mut self.limited,
            Outcome::Unavailable => &mut self.unavailable,
            Outcome::ServerError => &mut self.server_error,
            Outcome::OtherStatus(_) => &mut self.other_status,
            Outcome::Transport(_) => &mut self.transport_error,
            Outcome::Dropped(_) => &mut self.dropped,
            Outcome::Throttled => &mut self.throttled,
        };
        *count += n;
    }

    /// Adds another cell's counts (all tenants of a phase, say).
    pub fn merge(&mut self, other: &Counts) {
        self.offered += other.offered;
        self.admitted += other.admitted;
        self.limited += other.limited;
        self.unavailable += other.unavailable;
        self.server_error += other.server_error;
        self.transport_error += other.transport_error;
        self.other_status += other.other_status;
        self.dropped += other.dropped;
        self.throttled += other.throttled;
        self.retries += other.retries;
        self.new_connections += other.new_connections;
    }

    /// 5xx of any kind.
    pub fn errors_5xx(&self) -> u64 {
        self.unavailable + self.server_error
    }

    /// Requests that reached the limiter's side: what it had a chance to serve. Neither a
    /// request the client's own throttling refused nor one the generator dropped unsent is the
    /// limiter's refusal, so neither counts in its entitlement (drops count in latency
    /// instead, and beyond 0.1 % make the run untrusted).
    pub fn asked(&self) -> u64 {
        self.offered - self.throttled - self.dropped
    }

    /// Requests that left the client (their first attempt).
    pub fn sent(&self) -> u64 {
        self.offered - self.dropped - self.throttled
    }

    /// Attempts sent, retries included.
    pub fn attempts(&self) -> u64 {
        self.sent() + self.retries
    }

    /// Attempts sent per request offered: above 1 when clients retry, below when they
    /// throttle themselves (or requests were dropped).
    pub fn client_amplification(&self) -> Option<f64> {
        // Nothing left the client and nothing was throttled: the generator dropped it all, and
        // the client's amplification was never measured (0 would pass any max).
        (self.offered > 0 && self.offered > self.dropped)
            .then(|| self.attempts() as f64 / self.offered as f64)
    }

    /// Connections opened a second over `length_s`: the churn a target saw. Not measured
    /// when nothing was sent.
    pub fn new_connections_per_s(&self, length_s: f64) -> Option<f64> {
        (self.attempts() > 0 && length_s > 0.0).then(|| self.new_connections as f64 / length_s)
    }
}

/// One target × tenant × phase, or one second of one target × tenant.
#[derive(Debug, Clone)]
pub struct Cell {
    pub counts: Counts,
    /// From the scheduled send, µs.
    pub latency: Histogram<u64>,
    /// From the actual send, µs.
    pub service_time: Histogram<u64>,
}

impl Cell {
    fn new(sigfig: u8) -> Self {
        Self {
            counts: Counts::default(),
            latency: histogram(sigfig),
            service_time: histogram(sigfig),
        }
    }

    /// `n` samples alike.
    fn add(&mut self, s: &Sample, latency: Option<Duration>, n: u64) {
        self.counts.add(s, n);
        if let Some(latency) = latency {
            self.latency.saturating_record_n(micros(latency), n);
        }
        if s.attempts > 0 {
            self.service_time
                .saturating_record_n(micros(s.service_time), n);
        }
    }
}

/// One second of one target × tenant: counts, and latency percentiles from the schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Second {
    pub counts: Counts,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Second {
    fn summarise(&mut self, latency: &Histogram<u64>) {
        if !latency.is_empty() {
            self.p50_us = latency.value_at_quantile(0.5);
            self.p99_us = latency.value_at_quantile(0.99);
            self.max_us = latency.max();
        }
    }
}

/// Latency histograms of the seconds still open to late answers, per target × tenant.
/// A second closes at a checkpoint `hold` after it, once no request scheduled in it can still be
/// sent or answered;
/// then its percentiles and its packed histogram are kept.
#[derive(Debug, Default)]
struct OpenSeconds {
    by_second: std::collections::BTreeMap<usize, Histogram<u64>>,
    /// Seconds below this are closed; a later answer still counts, without its latency.
    closed_below: usize,
}

#[derive(Debug)]
struct State {
    measured: Measured,
    open: Vec<Vec<OpenSeconds>>,
    /// Per cell, flat (`[target][tenant][phase]`): changed since the last checkpoint.
    cells_changed: Vec<bool>,
    /// Per target: its send lag changed since the last checkpoint.
    lag_changed: Vec<bool>,
    /// Seconds below this were handed out by a checkpoint.
    checkpointed_below: usize,
    /// The latest scheduled second of a request sent and recorded: the load's own clock, which
    /// stops when the sender stalls (wall time would not). Not moved by drops: the
    /// dispatcher drops one stream's backlog after another, and a later stream's older
    /// seconds must still be open for its drops.
    latest_sent_second: usize,
    /// Per sender, how far it has dispatched ([`Recorder::dispatched`]); empty until one
    /// says. With several senders the latest second sent is the fastest one's: a stalled
    /// sender's seconds stay open until it has passed them.
    dispatched: Vec<Duration>,
    /// Every sample so far, counted once (outside phases too).
    totals: Counts,
    dropped_by_cause: DroppedByCause,
}

/// Everything measured; the recorder the load engine feeds.
#[derive(Debug)]
pub struct Collector {
    shape: Shape,
    hold_s: usize,
    inner: Mutex<State>,
    live: Vec<LiveCounts>,
}

/// The dimensions of a run.
#[derive(Debug, Clone)]
pub struct Shape {
    pub targets: usize,
    pub tenants: usize,
    /// (start, end) of each phase, sorted and disjoint.
    pub phases: Vec<(Duration, Duration)>,
    pub duration: Duration,
    /// The longest a request can stay unanswered: the request timeout, or for clients that
    /// retry, every attempt and wait of the longest chain.
    pub longest_request: Duration,
    /// The scenario's `[load].request_timeout`: the latency a dropped request is counted
    /// with.
    pub request_timeout: Duration,
}

impl Shape {
    fn phase_at(&self, at: Duration) -> Option<usize> {
        self.phases.iter().position(|&(s, e)| s <= at && at < e)
    }

    /// The latency a sample is counted with: its own if it was sent; the request timeout if
    /// it was dropped (see the module's header); none if its client refused it itself.
    fn latency_of(&self, s: &Sample) -> Option<Duration> {
        match s.outcome {
            Outcome::Dropped(_) => Some(self.request_timeout),
            _ if s.attempts > 0 => Some(s.latency),
            _ => None,
        }
    }
}

/// The measurements, once the run is over.
#[derive(Debug, Clone)]
pub struct Measured {
    /// `[target][tenant][phase]`
    pub cells: Vec<Vec<Vec<Cell>>>,
    /// `[target][tenant][second]`, with one more tenant slot at the end for all tenants
    /// together (exact percentiles, not merged ones).
    pub seconds: Vec<Vec<Vec<Second>>>,
    /// Per target: actual send − scheduled send, µs.
    pub send_lag: Vec<Histogram<u64>>,
    /// `[target][tenant slot, as seconds]`: each second's latency histogram, packed (see
    /// [`unpack`]); seconds without a latency are absent.
    pub second_latency: Vec<Vec<BTreeMap<usize, Vec<u8>>>>,
}

impl Measured {
    /// Empty measurements of a run of this shape.
    pub fn empty(shape: &Shape) -> Self {
        let seconds = shape.duration.as_secs_f64().ceil() as usize;
        let slots = shape.tenants + 1;
        Self {
            cells: (0..shape.targets)
                .map(|_| {
                    (0..shape.tenants)
                        .map(|_| vec![Cell::new(3); shape.phases.len()])
                        .collect()
                })
                .collect(),
            seconds: vec![vec![vec![Second::default(); seconds]; slots]; shape.targets],
            send_lag: (0..shape.targets).map(|_| histogram(3)).collect(),
            second_latency: vec![vec![BTreeMap::new(); slots]; shape.targets],
        }
    }

    /// Adds another run's measurements of the same shape: every count summed, every
    /// histogram added, each second's percentiles taken again from its added histogram.
    pub fn add(&mut self, other: &Measured) -> Result<(), MeasuredError> {
        let shape = |m: &Measured| {
            (
                m.cells.len(),
                m.cells.first().map_or(0, Vec::len),
                m.cells.first().and_then(|t| t.first()).map_or(0, Vec::len),
                m.seconds
                    .first()
                    .and_then(|t| t.first())
                    .map_or(0, Vec::len),
            )
        };
        if shape(self) != shape(other) {
            return Err(MeasuredError::Shape(format!(
                "targets, tenants, phases, seconds: {:?} and {:?}",
                shape(self),
                shape(other)
            )));
        }
        let added = |e: hdrhistogram::AdditionError| MeasuredError::Histogram(e.to_string());
        for (mine, theirs) in self
            .cells
            .iter_mut()
            .flatten()
            .flatten()
            .zip(other.cells.iter().flatten().flatten())
        {
            mine.counts.merge(&theirs.counts);
            mine.latency.add(&theirs.latency).map_err(added)?;
            mine.service_time.add(&theirs.service_time).map_err(added)?;
        }
        for (mine, theirs) in self.send_lag.iter_mut().zip(&other.send_lag) {
            mine.add(theirs).map_err(added)?;
        }
        for (t, slots) in other.seconds.iter().enumerate() {
            for (n, seconds) in slots.iter().enumerate() {
                for (s, second) in seconds.iter().enumerate() {
                    self.seconds[t][n][s].counts.merge(&second.counts);
                }
                for (&s, bytes) in &other.second_latency[t][n] {
                    let mut latency = unpack(bytes)?;
                    if let Some(mine) = self.second_latency[t][n].get(&s) {
                        latency.add(unpack(mine)?).map_err(added)?;
                    }
                    if let Some(second) = self.seconds[t][n].get_mut(s) {
                        second.summarise(&latency);
                    }
                    self.second_latency[t][n].insert(s, pack(&latency));
                }
            }
        }
        Ok(())
    }
}

impl Collector {
    pub fn new(shape: Shape) -> Self {
        let measured = Measured::empty(&shape);
        let open = (0..shape.targets)
            .map(|_| {
                (0..=shape.tenants)
                    .map(|_| OpenSeconds::default())
                    .collect()
            })
            .collect();
        Self {
            live: (0..shape.targets).map(|_| LiveCounts::default()).collect(),
            // A request is sent up to MAX_LATE after its scheduled instant and answered within
            // the longest request after that; a second more for the sample's own second.
            hold_s: (shape.longest_request + MAX_LATE).as_secs_f64().ceil() as usize + 1,
            inner: Mutex::new(State {
                measured,
                open,
                cells_changed: vec![false; shape.targets * shape.tenants * shape.phases.len()],
                lag_changed: vec![false; shape.targets],
                checkpointed_below: 0,
                latest_sent_second: 0,
                dispatched: Vec::new(),
                totals: Counts::default(),
                dropped_by_cause: DroppedByCause::default(),
            }),
            shape,
        }
    }

    /// A copy of what has been measured so far, open seconds included.
    pub fn snapshot(&self) -> Measured {
        let state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut measured = state.measured.clone();
        for (t, per_tenant) in state.open.iter().enumerate() {
            for (n, open) in per_tenant.iter().enumerate() {
                for (&second, latency) in &open.by_second {
                    if let Some(s) = measured.seconds[t][n].get_mut(second) {
                        s.summarise(latency);
                        measured.second_latency[t][n].insert(second, pack(latency));
                    }
                }
            }
        }
        measured
    }
}

impl Recorder for Collector {
    fn dispatched(&self, sender: usize, senders: usize, until: Duration) {
        let mut state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if state.dispatched.len() < senders {
            state.dispatched.resize(senders, Duration::ZERO);
        }
        if let Some(d) = state.dispatched.get_mut(sender) {
            *d = (*d).max(until);
        }
    }

    fn sending(&self, target: usize) {
        self.live[target].sent.fetch_add(1, Ordering::Relaxed);
    }

    fn record_repeated(&self, s: &Sample, n: u64) {
        let live = &self.live[s.target];
        if s.attempts > 0 {
            live.answered.fetch_add(n, Ordering::Relaxed);
        }
        // Done means sent and settled: a drop is shown apart, so that a generator dropping
        // millions neither shows them as a rate nor dilutes the 429 and 5xx shares.
        if !matches!(s.outcome, Outcome::Dropped(_)) {
            live.done.fetch_add(n, Ordering::Relaxed);
        }
        match s.outcome {
            Outcome::Limited => live.limited.fetch_add(n, Ordering::Relaxed),
            Outcome::Unavailable | Outcome::ServerError => {
                live.errors_5xx.fetch_add(n, Ordering::Relaxed)
            }
            Outcome::Transport(_) => live.transport.fetch_add(n, Ordering::Relaxed),
            Outcome::Dropped(_) => live.dropped.fetch_add(n, Ordering::Relaxed),
            _ => 0,
        };
        let phase = self.shape.phase_at(s.scheduled);
        let second = s.scheduled.as_secs() as usize;
        let latency = self.shape.latency_of(s);
        let mut state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let State {
            measured: m,
            open,
            cells_changed,
            lag_changed,
            latest_sent_second,
            totals,
            dropped_by_cause,
            ..
        } = &mut *state;
        if let Outcome::Dropped(cause) = s.outcome {
            dropped_by_cause.count(cause, n);
        }
        totals.add(s, n);
        if s.attempts > 0 {
            *latest_sent_second = (*latest_sent_second).max(second);
        }
        if let Some(p) = phase {
            m.cells[s.target][s.tenant][p].add(s, latency, n);
            let phases = self.shape.phases.len();
            cells_changed[(s.target * self.shape.tenants + s.tenant) * phases + p] = true;
        }
        for slot in [s.tenant, self.shape.tenants] {
            record_second(
                &mut m.seconds[s.target][slot],
                &mut open[s.target][slot],
                second,
                (s, n),
                latency,
            );
        }
        if s.attempts > 0 {
            m.send_lag[s.target].saturating_record_n(micros(s.send_lag), n);
            lag_changed[s.target] = true;
        }
    }
}

/// Counts `n` samples alike in their second, and records their `latency` (if they have one)
/// while the second is open. Seconds are closed by [`Collector::checkpoint`] only.
fn record_second(
    seconds: &mut [Second],
    open: &mut OpenSeconds,
    second: usize,
    (s, n): (&Sample, u64),
    latency: Option<Duration>,
) {
    if let Some(cell) = seconds.get_mut(second) {
        cell.counts.add(s, n);
        if let Some(latency) = latency
            && second >= open.closed_below
        {
            open.by_second
                .entry(second)
                .or_insert_with(second_histogram)
                .saturating_record_n(micros(latency), n);
        }
    }
}

/// Closes the open seconds below `close_below`: summarised, their histograms packed.
fn close_seconds(
    seconds: &mut [Second],
    packed: &mut BTreeMap<usize, Vec<u8>>,
    open: &mut OpenSeconds,
    close_below: usize,
) {
    while let Some(entry) = open.by_second.first_entry() {
        if *entry.key() >= close_below {
            break;
        }
        let (closed, latency) = entry.remove_entry();
        if let Some(cell) = seconds.get_mut(closed) {
            cell.summarise(&latency);
            packed.insert(closed, pack(&latency));
        }
    }
    open.closed_below = open.closed_below.max(close_below);
}

#[cfg(test)]
mod tests;
