//! Readings at phase boundaries: each target's own fallback counter (per instance process,
//! so a fleet that changed in between is counted right) and the commands its Redis has
//! executed (`INFO commandstats`; not in a Sentinel topology). Every instance and every Redis is asked at once, so a
//! reading takes one round trip, not one per child.

use std::time::Duration;

use futures_util::future::join_all;

use super::world::{TargetWorld, World};
use crate::infra::redis::{commands_executed, info_at};
use crate::targets::sum_counter;

/// Longer than a healthy answer by far; short enough not to blur a phase boundary.
const READ_TIMEOUT: Duration = Duration::from_millis(500);

/// One reading per target; `None` where it could not be taken.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Reading {
    /// Per target: each running instance's counter, by process id.
    pub(super) fallbacks: Vec<Option<Vec<(u32, f64)>>>,
    pub(super) store_commands: Vec<Option<u64>>,
}

/// A target's fallbacks between two readings: each process's growth, a process started in
/// between counting from zero. One stopped or killed in between took its count with it.
pub(super) fn fallbacks_between(
    before: Option<&[(u32, f64)]>,
    after: Option<&[(u32, f64)]>,
) -> Option<f64> {
    let (before, after) = (before?, after?);
    Some(
        after
            .iter()
            .map(|(pid, now)| {
                let then = before
                    .iter()
                    .find(|(p, _)| p == pid)
                    .map_or(0.0, |(_, v)| *v);
                now - then
            })
            .sum(),
    )
}

/// The target's fallback counter of each running instance; `None` if it has none or any
/// instance did not answer.
async fn fallbacks(t: &TargetWorld, http: &reqwest::Client) -> Option<Vec<(u32, f64)>> {
    let (Some(path), Some(counter)) = (&t.def.metrics_path, &t.def.fallback_counter) else {
        return None;
    };
    let answers = join_all(t.instances().into_iter().map(|(key, addr)| async move {
        let response = http
            .get(format!("http://{addr}{path}"))
            .timeout(READ_TIMEOUT)
            .send()
            .await
            .ok()?;
        response
            .text()
            .await
            .ok()
            .map(|body| (key, sum_counter(&body, counter)))
    }))
    .await;
    answers.into_iter().collect()
}

pub(super) async fn take(world: &World, http: &reqwest::Client) -> Reading {
    let per_target = join_all(world.targets.iter().map(|t| async move {
        let stats = async {
            match (&t.redis, t.redis_addr) {
                // The commands go to one server, then to another after a failover, whose
                // count also holds what it replicated: none is the target's alone.
                _ if t.replicated.is_some() => None,
                // Under its lock: a `redis-restart` is not read half-way.
                (Some(redis), _) => redis.lock().await.info("commandstats").await.ok(),
                (None, Some(addr)) => info_at(&t.proxy, addr, "commandstats").await.ok(),
                (None, None) => None,
            }
        };
        let (fallbacks, stats) = tokio::join!(fallbacks(t, http), stats);
        (fallbacks, stats.map(|s| commands_executed(&s)))
    }))
    .await;
    let (fallbacks, store_commands) = per_target.into_iter().unzip();
    Reading {
        fallbacks,
        store_commands,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallbacks_count_each_process_from_its_own_start() {
        let before = [(10, 5.0), (11, 7.0)];
        // 11 killed, 12 started in between; 10 went on counting.
        let after = [(10, 8.0), (12, 4.0)];
        assert_eq!(fallbacks_between(Some(&before), Some(&after)), Some(7.0));
        assert_eq!(fallbacks_between(None, Some(&after)), None);
    }
}
