//! What a run reads of its measurements while the load goes, without waiting for a
//! checkpoint: the totals the progress line shows (atomics, read without the lock), the
//! settled seconds the abort guard judges, and the buckets a live scrape reports.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use super::{Collector, Counts, Second};
use crate::load::MAX_LATE;

/// Live totals per target, for the progress display (read without the lock).
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// Sent and settled (answered, failed or abandoned); drops are counted apart.
    pub done: AtomicU64,
    pub limited: AtomicU64,
    pub errors_5xx: AtomicU64,
    pub transport: AtomicU64,
    /// Not sent, every cause together.
    pub dropped: AtomicU64,
    /// First attempts that left ([`Recorder::sending`]).
    pub sent: AtomicU64,
    /// Requests sent and recorded (answered, failed or abandoned): `sent − answered` are in
    /// flight.
    pub answered: AtomicU64,
}

impl LiveCounts {
    /// Requests sent and not yet recorded.
    pub fn in_flight(&self) -> u64 {
        let answered = self.answered.load(Ordering::Relaxed);
        self.sent.load(Ordering::Relaxed).saturating_sub(answered)
    }
}

impl Collector {
    pub fn live(&self, target: usize) -> &LiveCounts {
        &self.live[target]
    }

    /// How long after its end a second's requests have all settled: sent (at most
    /// `MAX_LATE` late), and answered or timed out.
    pub fn settles_after(&self) -> Duration {
        self.shape.longest_request + MAX_LATE
    }

    /// Second `second` of `target`, all tenants together: its counts, and its latency
    /// percentiles from what it has recorded so far.
    pub fn second_of_all(&self, target: usize, second: usize) -> Second {
        let all = self.shape.tenants;
        let state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut s = state.measured.seconds[target][all]
            .get(second)
            .copied()
            .unwrap_or_default();
        if let Some(latency) = state.open[target][all].by_second.get(&second) {
            s.summarise(latency);
        }
        s
    }

    /// What a live scrape reports, so far: per target × tenant every phase's counts summed
    /// and its latency sorted into buckets of `bounds_s`, and each target's send lag. Sorted
    /// under the lock (a walk of each histogram's recorded values, nothing copied), so the
    /// requests recording meanwhile wait microseconds, not for megabytes of histograms.
    pub fn scrape_view(&self, bounds_s: &[f64]) -> ScrapeView {
        let state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let m = &state.measured;
        let cells = m
            .cells
            .iter()
            .map(|per_tenant| {
                per_tenant
                    .iter()
                    .map(|per_phase| {
                        let mut counts = Counts::default();
                        let mut latency = Buckets::new(bounds_s);
                        for cell in per_phase {
                            counts.merge(&cell.counts);
                            latency.add(&cell.latency);
                        }
                        (counts, latency)
                    })
                    .collect()
            })
            .collect();
        let send_lag = m
            .send_lag
            .iter()
            .map(|h| {
                let mut b = Buckets::new(bounds_s);
                b.add(h);
                b
            })
            .collect();
        ScrapeView { cells, send_lag }
    }
}

/// [`Collector::scrape_view`].
#[derive(Debug)]
pub struct ScrapeView {
    /// `[target][tenant]`: the phases' counts and latency together.
    pub cells: Vec<Vec<(Counts, Buckets)>>,
    /// Per target.
    pub send_lag: Vec<Buckets>,
}

/// Histograms of µs as Prometheus buckets of seconds. Each recorded value is counted under the
/// first bound at or above the lowest value it stands for, so a bucket is exact to the
/// histogram's precision (three significant digits); the sum is of each value's midpoint.
#[derive(Debug, Clone)]
pub struct Buckets {
    pub sum_s: f64,
    pub count: u64,
    /// Per bucket, not cumulative, each with its upper bound; the last one's is `+Inf`.
    pub buckets: Vec<(f64, u64)>,
}

impl Buckets {
    fn new(bounds_s: &[f64]) -> Self {
        Self {
            sum_s: 0.0,
            count: 0,
            buckets: bounds_s
                .iter()
                .chain(&[f64::INFINITY])
                .map(|&b| (b, 0))
                .collect(),
        }
    }

    fn add(&mut self, h: &Histogram<u64>) {
        for v in h.iter_recorded() {
            let value = v.value_iterated_to();
            let n = v.count_since_last_iteration();
            self.sum_s += h.median_equivalent(value) as f64 / 1e6 * n as f64;
            let lowest_s = h.lowest_equivalent(value) as f64 / 1e6;
            if let Some(b) = self.buckets.iter_mut().find(|(le, _)| lowest_s <= *le) {
                b.1 += n;
            }
        }
        self.count += h.len();
    }
}
