//! Opening a sender's kept-alive connections before its schedule starts, at the rates where a
//! cold start would feed on itself.
//!
//! From an empty pool the first requests open connections (two at a time, the others waiting
//! for them: `exchange.rs`), and a connect, with the server's accept, costs more than a request
//! on a kept one: a run's first moments would measure its own cold start. Measured on the
//! project's 2-core machine at 40,000 req/s against one loopback server, when every request
//! still opened its own: the answers slowed, more requests were in flight, each opening
//! another connection, and within 60 ms of the start 1,000 were in flight (the bound), 1,355
//! were dropped, and the run's p99 from the schedule was that start (5.7 ms, where oha's was
//! 1.3). A client in production has a warm pool; a run should measure the limiter from its
//! first second, not its own cold start.
//!
//! Each pool is opened as many connections as its share of the sender's rate sends in
//! [`WARM_FOR`]: none for a pool of less than 500 requests a second, whose first requests open
//! what they need without piling up; at most the pool's idle cap, and for all of a target's
//! pools together at most the sender's part of the target's bound on requests in flight (its
//! `max_connections` when that is lower). A warmed connection is counted as opened by the
//! first request that takes it (`new_connections`); one that no request takes (its instance
//! left the rotation, or it idled out) is never counted. The warm-up stops 2 ms before the
//! schedule's start, whatever is still connecting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::exchange::Pool;
use super::members::Members;

/// A pool is warmed with what its rate sends in this long.
const WARM_FOR: Duration = Duration::from_millis(2);

/// The warm-up ends this long before the start: tokio's timer may fire a millisecond late.
const STOP_BEFORE_START: Duration = Duration::from_millis(2);

/// One stream's requests as the warm-up sees them: the instances they go to and how often.
pub(super) struct Demand<'a> {
    pub(super) members: &'a Members,
    pub(super) target: usize,
    pub(super) tenant: usize,
    /// Instances (indexes into `members`) with their shares of the stream's requests.
    pub(super) spread: Vec<(usize, f64)>,
    pub(super) rate_per_s: f64,
    /// The connections this sender may warm for the target, all its pools together.
    pub(super) budget: usize,
}

/// Per target, how many of the senders (each given its `assigned` streams, indexes in
/// target-major target × tenant order) send to it: they share its bound when they warm its
/// pools. At least one, so a share of the bound is always defined.
pub(super) fn senders_per_target(
    assigned: &[Vec<usize>],
    targets: usize,
    tenants: usize,
) -> Vec<usize> {
    let tenants = tenants.max(1);
    (0..targets)
        .map(|t| {
            let to_t = |streams: &&Vec<usize>| streams.iter().any(|&i| i / tenants == t);
            assigned.iter().filter(to_t).count().max(1)
        })
        .collect()
}

/// The connections to open in each pool for these streams: each stream's rate split over its
/// instances, summed per pool, for [`WARM_FOR`]; at most the pool's idle cap, and at most the
/// target's budget over all its pools (shared in proportion when they want more).
pub(super) fn plan<'a>(demands: impl IntoIterator<Item = Demand<'a>>) -> Vec<(Arc<Pool>, usize)> {
    // Per pool: its target, its rate, the target's budget.
    let mut pools: Vec<(Arc<Pool>, usize, f64, usize)> = Vec::new();
    for d in demands {
        for &(instance, share) in &d.spread {
            let pool = d.members.pool(instance, d.tenant);
            let rate = d.rate_per_s * share;
            match pools.iter_mut().find(|(p, ..)| Arc::ptr_eq(p, pool)) {
                Some((_, _, total, _)) => *total += rate,
                None => pools.push((Arc::clone(pool), d.target, rate, d.budget)),
            }
        }
    }
    let wanted: Vec<usize> = pools
        .iter()
        .map(|(pool, _, rate, _)| {
            // Whole connections only: truncated, so below 500 a second a pool gets none.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let wanted = (rate * WARM_FOR.as_secs_f64()) as usize;
            wanted.min(pool.max_idle().map_or(usize::MAX, |m| m.get()))
        })
        .collect();
    let of_target = |target: usize| -> usize {
        pools
            .iter()
            .zip(&wanted)
            .filter(|((_, t, ..), _)| *t == target)
            .map(|(_, w)| w)
            .sum()
    };
    pools
        .iter()
        .zip(&wanted)
        .filter_map(|((pool, target, _, budget), &wanted)| {
            // Over the budget, each pool gets its share of it, as its requests do.
            let total = of_target(*target);
            let n = if total <= *budget {
                wanted
            } else {
                wanted * budget / total
            };
            (n > 0).then(|| (Arc::clone(pool), n))
        })
        .collect()
}

/// Opens the planned connections, all at once, until shortly before `start`.
pub(super) async fn open(pools: &[(Arc<Pool>, usize)], start: Instant) {
    let Some(until) = start.checked_sub(STOP_BEFORE_START) else {
        return;
    };
    if pools.is_empty() || Instant::now() >= until {
        return;
    }
    let all = futures_util::future::join_all(pools.iter().map(|(pool, n)| pool.warm(*n)));
    let _ = tokio::time::timeout_at(until.into(), all).await;
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::num::NonZeroUsize;

    use super::*;
    use crate::load::Rotation;
    use crate::load::members::Followed;

    fn members(instances: u16, sources: usize, max_idle: Option<usize>) -> Arc<Members> {
        let rotation =
            Rotation::new((0..instances).map(|i| SocketAddr::from(([127, 0, 0, 1], 1000 + i))));
        let sources: Arc<[_]> = (0..sources)
            .map(|s| Some(std::net::IpAddr::from([127, 0, 0, 2 + s as u8])))
            .collect();
        let sources = if sources.len() == 1 {
            Arc::from([None])
        } else {
            sources
        };
        let mut followed = Followed::new(rotation, sources, max_idle.and_then(NonZeroUsize::new));
        Arc::clone(followed.current())
    }

    /// A stream of tenant `tenant` to target 0, spread over instances as `pick_instance`
    /// would (`Stream::spread_over`, tested with the stream).
    fn demand<'a>(
        members: &'a Members,
        tenant: usize,
        spread: &[(usize, f64)],
        rate_per_s: f64,
    ) -> Demand<'a> {
        Demand {
            members,
            target: 0,
            tenant,
            spread: spread.to_vec(),
            rate_per_s,
            budget: 1_000,
        }
    }

    const EVEN: &[(usize, f64)] = &[(0, 0.5), (1, 0.5)];

    fn counts(plan: &[(Arc<Pool>, usize)]) -> Vec<(u16, usize)> {
        let mut c: Vec<_> = plan.iter().map(|(p, n)| (p.addr().port(), *n)).collect();
        c.sort_unstable();
        c
    }

    #[test]
    fn a_targets_bound_is_shared_only_among_the_senders_that_send_to_it() {
        // Three targets of two tenants (streams 0–5, target-major).
        let by_target = [vec![0, 1, 2], vec![3, 4], vec![]];
        assert_eq!(senders_per_target(&by_target, 3, 2), [1, 2, 1]);
        let by_tenant = [vec![0, 2, 4], vec![1, 3, 5]];
        assert_eq!(senders_per_target(&by_tenant, 3, 2), [2, 2, 2]);
        // A target no sender sends to still divides its bound by one.
        assert_eq!(senders_per_target(&[vec![0]], 2, 1), [1, 1]);
    }

    #[test]
    fn a_pool_gets_what_its_share_of_the_rate_sends_in_two_milliseconds_summed_over_tenants() {
        let m = members(2, 1, None);
        let plan = plan([
            demand(&m, 0, EVEN, 30_000.0),
            demand(&m, 1, EVEN, 10_000.0),
            demand(&m, 3, &[(1, 1.0)], 4_000.0),
        ]);
        // Instance 0: 15,000 + 5,000 a second; instance 1: the same and 4,000 more.
        assert_eq!(counts(&plan), [(1000, 40), (1001, 48)]);
    }

    #[test]
    fn below_500_a_second_a_pool_is_not_warmed_and_the_caps_bound_the_rest() {
        let m = members(2, 1, None);
        assert!(plan([demand(&m, 0, EVEN, 999.0)]).is_empty());
        assert_eq!(
            counts(&plan([demand(&m, 0, EVEN, 1_000.0)])),
            [(1000, 1), (1001, 1)]
        );
        // The target's budget is for all its pools together, shared as they want it.
        let budget = Demand {
            budget: 300,
            ..demand(&m, 0, EVEN, 1e6)
        };
        assert_eq!(counts(&plan([budget])), [(1000, 150), (1001, 150)]);
        let uneven = Demand {
            budget: 200,
            ..demand(&m, 0, &[(0, 0.75), (1, 0.25)], 200_000.0)
        };
        assert_eq!(counts(&plan([uneven])), [(1000, 150), (1001, 50)]);
        let idle = members(1, 1, Some(7));
        assert_eq!(
            counts(&plan([demand(&idle, 0, &[(0, 1.0)], 1e6)])),
            [(1000, 7)]
        );
    }

    #[test]
    fn each_target_has_its_own_budget() {
        let (a, b) = (members(1, 1, None), members(1, 1, None));
        let plan = plan([
            Demand {
                budget: 10,
                ..demand(&a, 0, &[(0, 1.0)], 1e6)
            },
            Demand {
                target: 1,
                budget: 20,
                ..demand(&b, 0, &[(0, 1.0)], 1e6)
            },
        ]);
        let n: Vec<usize> = plan.iter().map(|(_, n)| *n).collect();
        assert_eq!(n, [10, 20]);
    }

    #[test]
    fn a_target_telling_callers_by_address_warms_each_tenants_own_pool() {
        let m = members(1, 2, None);
        let plan = plan([
            demand(&m, 0, &[(0, 1.0)], 10_000.0),
            demand(&m, 1, &[(0, 1.0)], 2_000.0),
        ]);
        let mut by_source: Vec<usize> = plan.iter().map(|(_, n)| *n).collect();
        by_source.sort_unstable();
        assert_eq!(by_source, [4, 20]);
    }
}
