//! What a run measured: per target × tenant × phase counts and HdrHistograms, per-second
//! series, and the load generator's own send lag. Memory is bounded by the timeline (cells and
//! seconds), never by the number of requests.

pub mod derived;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::load::{Outcome, Recorder, Sample};

/// Latencies are recorded in µs, up to a minute.
const MAX_US: u64 = 60_000_000;

fn histogram(sigfig: u8) -> Histogram<u64> {
    // Bounds and precision are constants that `new_with_bounds` accepts.
    Histogram::new_with_bounds(1, MAX_US, sigfig).unwrap_or_else(|_| unreachable!())
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, MAX_US)
}

/// Requests by fate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
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
    /// Not sent: the in-flight bound was reached.
    pub dropped: u64,
}

impl Counts {
    fn add(&mut self, outcome: Outcome) {
        self.offered += 1;
        match outcome {
            Outcome::Admitted => self.admitted += 1,
            Outcome::Limited => self.limited += 1,
            Outcome::Unavailable => self.unavailable += 1,
            Outcome::ServerError => self.server_error += 1,
            Outcome::OtherStatus(_) => self.other_status += 1,
            Outcome::Transport(_) => self.transport_error += 1,
            Outcome::Dropped => self.dropped += 1,
        }
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
    }

    /// 5xx of any kind.
    pub fn errors_5xx(&self) -> u64 {
        self.unavailable + self.server_error
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

    fn add(&mut self, s: &Sample) {
        self.counts.add(s.outcome);
        if s.outcome != Outcome::Dropped {
            self.latency.saturating_record(micros(s.latency));
            self.service_time.saturating_record(micros(s.service_time));
        }
    }
}

/// Live totals per target, for the progress display (read without the lock).
#[derive(Debug, Default)]
pub struct LiveCounts {
    pub done: AtomicU64,
    pub limited: AtomicU64,
    pub errors_5xx: AtomicU64,
    pub transport: AtomicU64,
}

/// Everything measured; the recorder the load engine feeds.
#[derive(Debug)]
pub struct Collector {
    shape: Shape,
    inner: Mutex<Measured>,
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
}

impl Shape {
    fn phase_at(&self, at: Duration) -> Option<usize> {
        self.phases.iter().position(|&(s, e)| s <= at && at < e)
    }
}

/// The measurements, once the run is over.
#[derive(Debug, Clone)]
pub struct Measured {
    /// `[target][tenant][phase]`
    pub cells: Vec<Vec<Vec<Cell>>>,
    /// `[target][tenant][second]`
    pub seconds: Vec<Vec<Vec<Cell>>>,
    /// Per target: actual send − scheduled send, µs.
    pub send_lag: Vec<Histogram<u64>>,
}

impl Collector {
    pub fn new(shape: Shape) -> Self {
        let seconds = shape.duration.as_secs_f64().ceil() as usize;
        let grid = |sigfig: u8, n: usize| -> Vec<Vec<Vec<Cell>>> {
            (0..shape.targets)
                .map(|_| {
                    (0..shape.tenants)
                        .map(|_| vec![Cell::new(sigfig); n])
                        .collect()
                })
                .collect()
        };
        let measured = Measured {
            cells: grid(3, shape.phases.len()),
            // Two significant figures are plenty for a per-second p99 and keep memory small.
            seconds: grid(2, seconds),
            send_lag: (0..shape.targets).map(|_| histogram(3)).collect(),
        };
        Self {
            live: (0..shape.targets).map(|_| LiveCounts::default()).collect(),
            shape,
            inner: Mutex::new(measured),
        }
    }

    pub fn live(&self, target: usize) -> &LiveCounts {
        &self.live[target]
    }

    /// A copy of what has been measured so far.
    pub fn snapshot(&self) -> Measured {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Recorder for Collector {
    fn record(&self, s: &Sample) {
        let live = &self.live[s.target];
        live.done.fetch_add(1, Ordering::Relaxed);
        match s.outcome {
            Outcome::Limited => live.limited.fetch_add(1, Ordering::Relaxed),
            Outcome::Unavailable | Outcome::ServerError => {
                live.errors_5xx.fetch_add(1, Ordering::Relaxed)
            }
            Outcome::Transport(_) => live.transport.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        let phase = self.shape.phase_at(s.scheduled);
        let second = s.scheduled.as_secs() as usize;
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = phase {
            m.cells[s.target][s.tenant][p].add(s);
        }
        if let Some(cell) = m.seconds[s.target][s.tenant].get_mut(second) {
            cell.add(s);
        }
        if s.outcome != Outcome::Dropped {
            m.send_lag[s.target].saturating_record(micros(s.send_lag));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::TransportError;

    fn sample(target: usize, tenant: usize, at_ms: u64, outcome: Outcome) -> Sample {
        Sample {
            target,
            tenant,
            instance: 0,
            scheduled: Duration::from_millis(at_ms),
            send_lag: Duration::from_micros(50),
            latency: Duration::from_millis(2),
            service_time: Duration::from_millis(1),
            outcome,
        }
    }

    #[test]
    fn samples_land_in_their_phase_and_second_by_scheduled_time() {
        let c = Collector::new(Shape {
            targets: 2,
            tenants: 2,
            phases: vec![
                (Duration::ZERO, Duration::from_secs(2)),
                (Duration::from_secs(2), Duration::from_secs(3)),
            ],
            duration: Duration::from_secs(3),
        });
        c.record(&sample(1, 0, 500, Outcome::Admitted));
        c.record(&sample(1, 0, 1999, Outcome::Limited));
        c.record(&sample(
            1,
            0,
            2000,
            Outcome::Transport(TransportError::Timeout),
        ));
        c.record(&sample(0, 1, 2500, Outcome::Dropped));
        let m = c.snapshot();
        let steady = &m.cells[1][0][0].counts;
        assert_eq!((steady.offered, steady.admitted, steady.limited), (2, 1, 1));
        assert_eq!(m.cells[1][0][1].counts.transport_error, 1);
        assert_eq!(m.cells[0][1][1].counts.dropped, 1);
        assert_eq!(
            m.cells[0][1][1].latency.len(),
            0,
            "a dropped request has no latency"
        );
        assert_eq!(m.seconds[1][0][1].counts.offered, 1);
        assert_eq!(m.seconds[1][0][2].counts.offered, 1);
        assert_eq!(c.live(1).done.load(Ordering::Relaxed), 3);
        assert_eq!(c.live(1).transport.load(Ordering::Relaxed), 1);
    }
}
