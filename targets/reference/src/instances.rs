//! The live instance count that divides the limit in local share, and this instance's rank
//! among them (which of the budgets of `crate::share` is its own).
//!
//! Learnt from Redis while it answers (a heartbeat every interval into a sorted set scored by
//! Redis's clock; the rank is the instance's place among the live ids in Lua's string order, so the
//! live instances hold the ranks 0…n−1 between them) and frozen, both together, at their last
//! values while it does not, or while this instance is
//! degraded: other instances' heartbeats may be failing too, and a count shrunk by their
//! silence would raise everyone's share. An instance cannot know that the fleet scaled during
//! an outage, and failmode exists to show what that costs.
//!
//! For the same reason a lower count is believed only once consecutive heartbeats have seen it
//! ([`CONFIRMATIONS`]): right after an outage the set holds only the instances that have
//! heartbeated since (their entries expired meanwhile), and a count of 1 learnt then and frozen
//! by the next failure would hand one instance the whole limit. A higher count only shrinks
//! shares and is taken at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::metrics::Metrics;
use crate::store::Store;

/// The divisor and this instance's rank, readable on the request path without a lock: one
/// word, so a reader never sees a count with another count's rank.
#[derive(Debug)]
pub struct LiveInstances {
    /// Count in the high half, rank in the low.
    packed: AtomicU64,
}

fn pack(count: u32, rank: u32) -> u64 {
    (u64::from(count.max(1)) << 32) | u64::from(rank)
}

impl LiveInstances {
    /// `initial` instances, this one of rank `rank` among them, until the store says.
    pub fn new(initial: u32, rank: u32) -> Self {
        Self {
            packed: AtomicU64::new(pack(initial, rank)),
        }
    }

    pub fn get(&self) -> u32 {
        (self.packed.load(Ordering::Relaxed) >> 32) as u32
    }

    /// (count, rank), read together.
    pub fn with_rank(&self) -> (u32, u32) {
        let p = self.packed.load(Ordering::Relaxed);
        ((p >> 32) as u32, p as u32)
    }

    fn set(&self, count: u32, rank: u32) {
        self.packed.store(pack(count, rank), Ordering::Relaxed);
    }
}

/// Consecutive heartbeats that must report a lower count before it is used: every live
/// instance writes its entry once an interval, and once the store is back it reconnects
/// within the connection's backoff (at most 250 ms), so three intervals after the first
/// (3 s by default) every instance still alive has written again.
pub const CONFIRMATIONS: u32 = 3;

/// The count and rank a heartbeat reported, and what the instance uses.
#[derive(Debug, Default)]
struct Confirming {
    /// A lower count heard, and how many heartbeats in a row have reported it.
    lower: Option<((u32, u32), u32)>,
}

impl Confirming {
    /// What the instance uses after a heartbeat reported `reported` while it used `current`.
    fn next(&mut self, current: (u32, u32), reported: (u32, u32)) -> (u32, u32) {
        if reported.0 >= current.0 {
            self.lower = None;
            return reported;
        }
        let seen = match self.lower {
            Some(((n, _), seen)) if n == reported.0 => seen + 1,
            _ => 1,
        };
        if seen >= CONFIRMATIONS {
            self.lower = None;
            reported
        } else {
            self.lower = Some((reported, seen));
            current
        }
    }

    /// A heartbeat failed or was not used: the next ones are not consecutive with earlier.
    fn interrupted(&mut self) {
        self.lower = None;
    }
}

/// Heartbeats until the store is dropped; instances silent for three intervals fall out.
pub fn spawn_heartbeat(
    store: Arc<Store>,
    live: Arc<LiveInstances>,
    metrics: Arc<Metrics>,
    instance_id: String,
    interval: Duration,
    degraded: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(&store);
    drop(store);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut frozen = false;
        let mut confirming = Confirming::default();
        loop {
            tick.tick().await;
            let Some(store) = weak.upgrade() else { return };
            let timeout = (interval / 2).min(Duration::from_millis(500));
            match store.heartbeat(&instance_id, interval * 3, timeout).await {
                Ok(_) if degraded.load(Ordering::Relaxed) => {
                    confirming.interrupted();
                    if !frozen {
                        tracing::info!(
                            live_instances = live.get(),
                            "degraded: instance count frozen"
                        );
                        frozen = true;
                    }
                }
                Ok(reported) => {
                    let (n, rank) = confirming.next(live.with_rank(), reported);
                    if (n, rank) != live.with_rank() || frozen {
                        tracing::info!(
                            live_instances = n,
                            rank,
                            "live instance count learnt from the store"
                        );
                    }
                    live.set(n, rank);
                    metrics.live_instances(live.get());
                    frozen = false;
                }
                Err(e) => {
                    confirming.interrupted();
                    if !frozen {
                        tracing::warn!(error = %e, live_instances = live.get(), "heartbeat failed; instance count frozen");
                        frozen = true;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_higher_count_is_taken_at_once_and_a_lower_one_after_consecutive_confirmations() {
        let mut c = Confirming::default();
        assert_eq!(c.next((1, 0), (4, 2)), (4, 2));
        // Right after an outage: only this instance has written its heartbeat yet.
        assert_eq!(c.next((4, 2), (1, 0)), (4, 2));
        assert_eq!(c.next((4, 2), (3, 1)), (4, 2), "another count starts again");
        assert_eq!(c.next((4, 2), (3, 2)), (4, 2));
        assert_eq!(c.next((4, 2), (3, 2)), (3, 2), "seen three times in a row");
    }

    #[test]
    fn a_failed_heartbeat_breaks_the_run_of_confirmations() {
        let mut c = Confirming::default();
        assert_eq!(c.next((4, 0), (2, 0)), (4, 0));
        assert_eq!(c.next((4, 0), (2, 0)), (4, 0));
        c.interrupted();
        assert_eq!(c.next((4, 0), (2, 0)), (4, 0));
        assert_eq!(c.next((4, 0), (2, 0)), (4, 0));
        assert_eq!(c.next((4, 0), (2, 0)), (2, 0));
        // Back up, then the same count as before: a fresh run.
        assert_eq!(c.next((2, 0), (4, 1)), (4, 1));
        assert_eq!(c.next((4, 1), (2, 0)), (4, 1));
    }
}
