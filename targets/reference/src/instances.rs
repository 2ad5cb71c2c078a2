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
        loop {
            tick.tick().await;
            let Some(store) = weak.upgrade() else { return };
            let timeout = (interval / 2).min(Duration::from_millis(500));
            match store.heartbeat(&instance_id, interval * 3, timeout).await {
                Ok(_) if degraded.load(Ordering::Relaxed) => {
                    if !frozen {
                        tracing::info!(
                            live_instances = live.get(),
                            "degraded: instance count frozen"
                        );
                        frozen = true;
                    }
                }
                Ok((n, rank)) => {
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
                Err(e) if !frozen => {
                    tracing::warn!(error = %e, live_instances = live.get(), "heartbeat failed; instance count frozen");
                    frozen = true;
                }
                Err(_) => {}
            }
        }
    })
}
