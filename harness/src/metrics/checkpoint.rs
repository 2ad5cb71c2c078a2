//! What the collector hands a journal on disk every second: the seconds closed since the last
//! checkpoint, moved out of memory so that a long run's memory stays flat, and copies of the
//! phase cells and send lags that changed. Seconds close here only, by the load's own clock.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::{Cell, Collector, Counts, Second, State, close_seconds};
use crate::load::DroppedByCause;

/// What changed since the last [`Collector::checkpoint`].
#[derive(Debug, Default)]
pub struct Checkpoint {
    /// Every target × tenant slot's seconds from the last checkpoint's bound to this one's,
    /// as summarised when they closed.
    pub seconds: Vec<CheckpointedSecond>,
    /// Seconds below this have been handed out, by this checkpoint or an earlier one.
    pub closed_below: usize,
    /// `((target, tenant, phase), cell)`.
    pub cells: Vec<((usize, usize, usize), Cell)>,
    /// `(target, send lag)`.
    pub send_lag: Vec<(usize, Histogram<u64>)>,
    /// Every request so far, counted once (open seconds and gaps between phases too).
    pub totals: Counts,
    /// Every request not sent so far, by cause.
    pub dropped_by_cause: DroppedByCause,
}

/// One target × tenant slot's closed second.
#[derive(Debug, Clone)]
pub struct CheckpointedSecond {
    pub target: usize,
    pub slot: usize,
    pub second: usize,
    pub summary: Second,
    /// Packed (see [`super::unpack`]); `None` for a second without a latency.
    pub latency: Option<Vec<u8>>,
}

impl Collector {
    /// A checkpoint `elapsed` into the load: the seconds no request can still be sent or
    /// answered in are closed. By the load's clock (the latest second a request was sent in,
    /// and the least any sender has dispatched to), not by `elapsed` alone: a sender that
    /// stalls records its backlog late, and its seconds must still be open for it.
    pub fn checkpoint_at(&self, elapsed: Duration) -> Checkpoint {
        let clock = {
            let state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let slowest = state.dispatched.iter().min().map_or(usize::MAX, |d| {
                usize::try_from(d.as_secs()).unwrap_or(usize::MAX)
            });
            state.latest_sent_second.min(slowest)
        };
        let now = (elapsed.as_secs() as usize).min(clock);
        self.checkpoint(now.saturating_sub(self.hold_s))
    }

    /// Closes every second below `close_below` (all of them with `usize::MAX`, once the
    /// load is over), and hands out what changed since the last checkpoint.
    pub fn checkpoint(&self, close_below: usize) -> Checkpoint {
        let mut state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let State {
            measured: m,
            open,
            cells_changed,
            lag_changed,
            checkpointed_below,
            totals,
            dropped_by_cause,
            ..
        } = &mut *state;
        let seconds_in_run = m
            .seconds
            .first()
            .and_then(|t| t.first())
            .map_or(0, Vec::len);
        let below = close_below.min(seconds_in_run).max(*checkpointed_below);
        let mut out = Checkpoint {
            closed_below: below,
            totals: *totals,
            dropped_by_cause: *dropped_by_cause,
            ..Checkpoint::default()
        };
        for (t, slots) in open.iter_mut().enumerate() {
            for (n, open) in slots.iter_mut().enumerate() {
                close_seconds(
                    &mut m.seconds[t][n],
                    &mut m.second_latency[t][n],
                    open,
                    below,
                );
                for second in *checkpointed_below..below {
                    out.seconds.push(CheckpointedSecond {
                        target: t,
                        slot: n,
                        second,
                        summary: m.seconds[t][n][second],
                        latency: m.second_latency[t][n].remove(&second),
                    });
                }
            }
        }
        *checkpointed_below = below;
        let (tenants, phases) = (self.shape.tenants, self.shape.phases.len());
        for (i, changed) in cells_changed.iter_mut().enumerate() {
            if std::mem::take(changed) {
                let (t, n, p) = (i / (tenants * phases), i / phases % tenants, i % phases);
                out.cells.push(((t, n, p), m.cells[t][n][p].clone()));
            }
        }
        for (t, changed) in lag_changed.iter_mut().enumerate() {
            if std::mem::take(changed) {
                out.send_lag.push((t, m.send_lag[t].clone()));
            }
        }
        out
    }
}
