//! What the binary carries: every shipped scenario, the reference limiter's manifest, and the
//! manifests of a few peers for `failmode init --template`, embedded as they were when it was
//! built (`include_str!`), so an installed `failmode` needs nothing from failmode's checkout.
//! A unit test keeps [`SCENARIOS`] equal to `scenarios/`: a new scenario cannot be forgotten.

/// The shipped scenarios, `scenarios/NAME.toml`, by name.
pub(crate) const SCENARIOS: [(&str, &str); 21] = [
    ("baseline", include_str!("../../../scenarios/baseline.toml")),
    (
        "client-pause",
        include_str!("../../../scenarios/client-pause.toml"),
    ),
    ("eviction", include_str!("../../../scenarios/eviction.toml")),
    ("flapping", include_str!("../../../scenarios/flapping.toml")),
    (
        "hung-redis",
        include_str!("../../../scenarios/hung-redis.toml"),
    ),
    (
        "lost-instance",
        include_str!("../../../scenarios/lost-instance.toml"),
    ),
    (
        "noisy-neighbour",
        include_str!("../../../scenarios/noisy-neighbour.toml"),
    ),
    ("peers", include_str!("../../../scenarios/peers.toml")),
    (
        "peers-errors",
        include_str!("../../../scenarios/peers-errors.toml"),
    ),
    (
        "peers-failover",
        include_str!("../../../scenarios/peers-failover.toml"),
    ),
    (
        "redis-busy",
        include_str!("../../../scenarios/redis-busy.toml"),
    ),
    (
        "redis-down",
        include_str!("../../../scenarios/redis-down.toml"),
    ),
    (
        "redis-oom",
        include_str!("../../../scenarios/redis-oom.toml"),
    ),
    (
        "redis-readonly",
        include_str!("../../../scenarios/redis-readonly.toml"),
    ),
    (
        "redis-restart",
        include_str!("../../../scenarios/redis-restart.toml"),
    ),
    (
        "retry-storm",
        include_str!("../../../scenarios/retry-storm.toml"),
    ),
    (
        "scale-out-outage",
        include_str!("../../../scenarios/scale-out-outage.toml"),
    ),
    (
        "script-flush",
        include_str!("../../../scenarios/script-flush.toml"),
    ),
    (
        "sentinel-failover",
        include_str!("../../../scenarios/sentinel-failover.toml"),
    ),
    (
        "slow-redis",
        include_str!("../../../scenarios/slow-redis.toml"),
    ),
    (
        "sticky-tenant",
        include_str!("../../../scenarios/sticky-tenant.toml"),
    ),
];

/// Where the reference's manifest sits in failmode's repository, which names it in errors.
pub(crate) const REFERENCE_MANIFEST_PATH: &str = "targets/reference/target.toml";
/// The reference limiter's manifest: each of its policies is a built-in target.
pub(crate) const REFERENCE_MANIFEST: &str = include_str!("../../../targets/reference/target.toml");

/// Peer manifests `failmode init --template NAME` can start from outside the checkout, by
/// their path in failmode's repository (inside the checkout every peer's is found there).
pub(crate) const TEMPLATES: [(&str, &str); 6] = [
    (
        "targets/node/express-rate-limit/target.toml",
        include_str!("../../../targets/node/express-rate-limit/target.toml"),
    ),
    (
        "targets/node/fastify-rate-limit/target.toml",
        include_str!("../../../targets/node/fastify-rate-limit/target.toml"),
    ),
    (
        "targets/node/rate-limiter-flexible/target.toml",
        include_str!("../../../targets/node/rate-limiter-flexible/target.toml"),
    ),
    (
        "targets/python/flask-limiter/target.toml",
        include_str!("../../../targets/python/flask-limiter/target.toml"),
    ),
    (
        "targets/go/redis-rate/target.toml",
        include_str!("../../../targets/go/redis-rate/target.toml"),
    ),
    (
        "targets/java/spring-cloud-gateway/target.toml",
        include_str!("../../../targets/java/spring-cloud-gateway/target.toml"),
    ),
];

/// A shipped scenario's text by name.
pub(crate) fn scenario(name: &str) -> Option<&'static str> {
    SCENARIOS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn repository() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
    }

    #[test]
    fn every_scenario_in_the_scenarios_folder_is_built_in_as_it_is_there() {
        let dir = repository().join("scenarios");
        let on_disk = crate::scenario::list(&dir);
        let built_in: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            built_in, on_disk,
            "add the new scenario to SCENARIOS in harness/src/project/builtin.rs"
        );
        for (name, text) in SCENARIOS {
            let file = std::fs::read_to_string(dir.join(format!("{name}.toml"))).unwrap();
            assert_eq!(text, file, "{name}");
            let s = crate::scenario::Scenario::parse(text, name).unwrap();
            assert_eq!(s.name, name);
        }
    }

    #[test]
    fn the_embedded_manifests_are_the_repositorys_and_parse() {
        let all = std::iter::once((REFERENCE_MANIFEST_PATH, REFERENCE_MANIFEST)).chain(TEMPLATES);
        for (path, text) in all {
            let file = std::fs::read_to_string(repository().join(path)).unwrap();
            assert_eq!(text, file, "{path}");
            let defs = crate::targets::manifest::parse(text, Path::new(path)).unwrap();
            assert!(!defs.is_empty(), "{path}");
        }
    }
}
