//! The abort guard while the load goes: every second judged once its requests have settled,
//! and the run stopped (faults removed, load stopped, results written marked aborted) the
//! moment a safety limit has held for its seconds.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::progress::Say;
use crate::abort::Guard;
use crate::metrics::{Collector, Second};

/// How often the settled seconds are looked at: well under a second, so an abort comes within
/// a tenth of a second of being due.
const TICK: Duration = Duration::from_millis(100);

/// Judges the run's seconds against `guard` until `done`; cancels `stop_run` and returns the
/// reason when a limit is crossed.
pub(super) async fn watch(
    mut guard: Guard,
    collector: &Collector,
    targets: usize,
    start: Instant,
    stop_run: &CancellationToken,
    done: &CancellationToken,
    say: &Say,
) -> Option<String> {
    if guard.is_empty() {
        return None;
    }
    let settle = collector.settles_after();
    let mut next: u64 = 0;
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            () = done.cancelled() => return None,
            // Stopped by Ctrl-C (this watch cancels it only as it returns): not an abort.
            () = stop_run.cancelled() => return None,
            _ = tick.tick() => {}
        }
        let elapsed = start.elapsed();
        while Duration::from_secs(next + 1) + settle <= elapsed {
            let seconds: Vec<Second> = (0..targets)
                .map(|t| collector.second_of_all(t, next as usize))
                .collect();
            if let Some(reason) = guard.judge(next, &seconds) {
                say.line(&format!(
                    "abort guard: {reason}; removing every fault and stopping the load"
                ));
                stop_run.cancel();
                return Some(reason);
            }
            next += 1;
        }
    }
}
