//! The live instance count that divides the limit in local share.
//!
//! Learnt from Redis while it answers (a heartbeat every interval into a sorted set scored by
//! Redis's clock) and frozen at its last value while it does not, or while this instance is
//! degraded: other instances' heartbeats may be failing too, and a count shrunk by their
//! silence would raise everyone's share. An instance cannot know that the fleet scaled during
//! an outage, and failmode exists to show what that costs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use crate::metrics::Metrics;
use crate::store::Store;

/// The divisor, readable on the request path without a lock.
#[derive(Debug)]
pub struct LiveInstances {
    count: AtomicU32,
}

impl LiveInstances {
    pub fn new(initial: u32) -> Self {
        Self {
            count: AtomicU32::new(initial.max(1)),
        }
    }

    pub fn get(&self) -> u32 {
        self.count.load(Ordering::Relaxed)
    }

    fn set(&self, n: u32) {
        self.count.store(n.max(1), Ordering::Relaxed);
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
                Ok(n) => {
                    if n != live.get() || frozen {
                        tracing::info!(
                            live_instances = n,
                            "live instance count learnt from the store"
                        );
                    }
                    live.set(n);
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
