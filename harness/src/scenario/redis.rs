//! `[redis]`: what each target's Redis is. One server (the default), or a Sentinel topology
//! (a primary, a replica fed through a delayed link, three sentinels), which the `failover`
//! fault needs and which holds no other fault: the sentinels watch the primary through the
//! target's proxy, so a cut, a hang or a stopped Redis there would be a failover of its own.

use std::time::Duration;

use toml::Spanned;

use super::ScenarioError;
use super::invalid::Invalid;
use super::raw::{RawPhase, RawRedis, RawTopologyName};
use crate::faults::Fault;

/// What each target's Redis is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedisTopology {
    /// One redis-server behind the target's proxy.
    #[default]
    Single,
    /// The primary behind the target's proxy, a replica behind a proxy of its own that
    /// replicates through a link delayed by `replication_lag`, and three sentinels that hand
    /// out the proxies' addresses.
    Sentinel { replication_lag: Duration },
}

/// On loopback a replica is never behind, so a failover would lose nothing; behind by this,
/// it misses the increments of the last tenth of a second, as a replica in another zone does.
const DEFAULT_REPLICATION_LAG: Duration = Duration::from_millis(100);

/// The topology `[redis]` asks for, checked against the phases' faults: a `failover` needs a
/// Sentinel topology, happens at most once, and is the last fault (after it the primary has
/// moved, so a fault on the target's Redis or proxy would act on the old one).
pub(super) fn topology(
    raw: Option<&Spanned<RawRedis>>,
    phases: &[Spanned<RawPhase>],
    invalid: &Invalid,
) -> Result<RedisTopology, ScenarioError> {
    let topology = match raw.map(|r| (r.span(), r.get_ref())) {
        None => RedisTopology::Single,
        Some((span, r)) => match (r.topology, r.replication_lag) {
            (RawTopologyName::Single, Some(_)) => {
                return Err(invalid.at(
                    "redis.replication_lag",
                    span,
                    "there is no replication in a single Redis: only with topology = \
                     \"sentinel\""
                        .into(),
                ));
            }
            (RawTopologyName::Single, None) => RedisTopology::Single,
            (RawTopologyName::Sentinel, lag) => RedisTopology::Sentinel {
                replication_lag: lag.map_or(DEFAULT_REPLICATION_LAG, |d| d.0),
            },
        },
    };
    if topology != RedisTopology::Single
        && let Some(other) = phases.iter().find(|p| {
            p.get_ref()
                .faults
                .iter()
                .any(|f| !matches!(f, Fault::Failover { .. }))
        })
    {
        return Err(invalid.at(
            "phases.faults",
            other.span(),
            format!(
                "phase {:?}: in a Sentinel topology the only fault is `failover` (the \
                 sentinels watch the primary through the target's proxy: a cut, hang or \
                 stopped Redis there would make them fail over on their own)",
                other.get_ref().name
            ),
        ));
    }
    let mut by_start: Vec<&Spanned<RawPhase>> = phases.iter().collect();
    by_start.sort_by_key(|p| p.get_ref().start.0);
    let is_failover = |f: &Fault| matches!(f, Fault::Failover { .. });
    let Some(at) = by_start
        .iter()
        .position(|p| p.get_ref().faults.iter().any(is_failover))
    else {
        return Ok(topology);
    };
    let failover = by_start[at];
    if topology == RedisTopology::Single {
        return Err(invalid.at(
            "phases.faults",
            failover.span(),
            format!(
                "phase {:?} fails the primary over, which needs a replica to promote and \
                 sentinels to promote it: add [redis] topology = \"sentinel\"",
                failover.get_ref().name
            ),
        ));
    }
    if failover.get_ref().faults.len() > 1 {
        return Err(invalid.at(
            "phases.faults",
            failover.span(),
            format!(
                "phase {:?}: a failover is the phase's only fault",
                failover.get_ref().name
            ),
        ));
    }
    if let Some(later) = by_start[at + 1..]
        .iter()
        .find(|p| !p.get_ref().faults.is_empty())
    {
        return Err(invalid.at(
            "phases.faults",
            later.span(),
            format!(
                "phase {:?} comes after the failover in {:?}: the primary has moved, so its \
                 faults would act on the old one; a failover is the scenario's last fault",
                later.get_ref().name,
                failover.get_ref().name
            ),
        ));
    }
    Ok(topology)
}

#[cfg(test)]
mod tests {
    use super::super::Scenario;
    use super::*;

    /// A scenario with `redis` as its `[redis]` table (none if empty) and `faults` per phase.
    fn scenario(redis: &str, faults: [&str; 3]) -> String {
        let [steady, fault, after] = faults;
        format!(
            "[policy]\nlimit = 10\nwindow = \"2s\"\n{redis}\n\
             [[tenants]]\nname = \"a\"\nrate = 3\n[[targets]]\nname = \"reference\"\n\
             [[phases]]\nname = \"fault\"\nstart = \"3s\"\nend = \"9s\"\nfaults = [{fault}]\n\
             [[phases]]\nname = \"steady\"\nstart = \"0s\"\nend = \"3s\"\nfaults = [{steady}]\n\
             [[phases]]\nname = \"after\"\nstart = \"9s\"\nend = \"12s\"\nfaults = [{after}]\n"
        )
    }

    fn parse(text: &str) -> Result<RedisTopology, String> {
        Scenario::parse(text, "t.toml")
            .map(|s| s.redis)
            .map_err(|e| e.to_string())
    }

    const SENTINEL: &str = "[redis]\ntopology = \"sentinel\"";
    const FAILOVER: &str = "{ type = \"failover\" }";

    #[test]
    fn a_sentinel_topology_gets_its_replication_lag_or_the_default_and_single_is_the_default() {
        assert_eq!(
            parse(&scenario("", ["", "", ""])),
            Ok(RedisTopology::Single)
        );
        assert_eq!(
            parse(&scenario(SENTINEL, ["", FAILOVER, ""])),
            Ok(RedisTopology::Sentinel {
                replication_lag: DEFAULT_REPLICATION_LAG
            })
        );
        let lagged = format!("{SENTINEL}\nreplication_lag = \"250ms\"");
        assert_eq!(
            parse(&scenario(&lagged, ["", "", ""])),
            Ok(RedisTopology::Sentinel {
                replication_lag: Duration::from_millis(250)
            })
        );
    }

    #[test]
    fn a_failover_needs_sentinels_stands_alone_and_is_the_last_fault_each_refused_at_its_line() {
        let e = parse(&scenario("", ["", FAILOVER, ""])).unwrap_err();
        assert!(
            e.contains("topology = \"sentinel\"") && e.contains("line 10"),
            "{e}"
        );
        let e = parse(&scenario(
            SENTINEL,
            ["", &format!("{FAILOVER}, {FAILOVER}"), ""],
        ))
        .unwrap_err();
        assert!(e.contains("only fault"), "{e}");
        // The phase after it by time, though written first in the file.
        let e = parse(&scenario(SENTINEL, [FAILOVER, FAILOVER, ""])).unwrap_err();
        assert!(
            e.contains("\"fault\" comes after the failover in \"steady\"") && e.contains("line 11"),
            "{e}"
        );
        // Any other fault, before a failover or without one, is the sentinels' to act on.
        for faults in [
            ["", "{ type = \"down\" }", FAILOVER],
            ["", "{ type = \"stall\" }", ""],
        ] {
            let e = parse(&scenario(SENTINEL, faults)).unwrap_err();
            assert!(e.contains("the only fault is `failover`"), "{e}");
        }
        let e = parse(&scenario(
            "[redis]\ntopology = \"single\"\nreplication_lag = \"1s\"",
            ["", "", ""],
        ))
        .unwrap_err();
        assert!(e.contains("redis.replication_lag"), "{e}");
        let e = parse(&scenario("[redis]\ntopology = \"cluster\"", ["", "", ""])).unwrap_err();
        assert!(e.contains("cluster"), "{e}");
    }
}
