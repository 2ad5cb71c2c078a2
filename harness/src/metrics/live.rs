//! What a run reads of its measurements while the load goes, without waiting for a
//! checkpoint: the totals the progress line shows (atomics, read without the lock), the
//! settled seconds the abort guard judges, and the cells a live scrape reports.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use super::{Cell, Collector, Second};
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

    /// Copies of the phase cells (`[target][tenant][phase]`) and of each target's send lag so
    /// far: what a live scrape reports, copied under the lock and read outside it.
    pub fn cells_so_far(&self) -> (Vec<Vec<Vec<Cell>>>, Vec<Histogram<u64>>) {
        let state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (
            state.measured.cells.clone(),
            state.measured.send_lag.clone(),
        )
    }
}
