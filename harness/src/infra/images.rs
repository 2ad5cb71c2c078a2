//! The container images `--infra docker` starts, pinned here and nowhere else in the harness:
//! the same Redis and Toxiproxy as docker-compose.yml and `just setup`, so a run in containers
//! measures the versions a run with child processes does. Compiled without the `docker`
//! feature too, so the test that the three places agree runs in every build.

/// Redis 7.0.15: Debian 12's package, which failmode's own runs were measured with.
pub const REDIS_IMAGE: &str = "redis";
pub const REDIS_TAG: &str = "7.0.15";

/// Toxiproxy at scripts/setup.sh's `TOXIPROXY_VERSION`.
pub const TOXIPROXY_IMAGE: &str = "ghcr.io/shopify/toxiproxy";
pub const TOXIPROXY_TAG: &str = "2.12.0";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infra::workspace_root;

    fn read(relative: &str) -> String {
        let path = workspace_root().join(relative);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Every service's image, as Compose reads them: with the `<<: *anchor` merges applied
    /// (the Redis services take theirs from one anchor).
    fn compose_images() -> Vec<(String, String)> {
        let mut compose: serde_norway::Value =
            serde_norway::from_str(&read("docker-compose.yml")).unwrap();
        compose.apply_merge().unwrap();
        compose["services"]
            .as_mapping()
            .unwrap()
            .iter()
            .filter_map(|(name, service)| {
                Some((
                    name.as_str()?.to_owned(),
                    service["image"].as_str()?.to_owned(),
                ))
            })
            .collect()
    }

    #[test]
    fn the_pinned_images_are_docker_compose_ymls() {
        let images = compose_images();
        let of = |image: &str| -> Vec<&(String, String)> {
            images
                .iter()
                .filter(|(_, i)| i.split(':').next() == Some(image))
                .collect()
        };
        let (redis, toxiproxy) = (of(REDIS_IMAGE), of(TOXIPROXY_IMAGE));
        assert!(redis.iter().any(|(name, _)| name == "redis"), "{images:?}");
        assert_eq!(toxiproxy.len(), 1, "{images:?}");
        for (name, image) in redis {
            assert_eq!(image, &format!("{REDIS_IMAGE}:{REDIS_TAG}"), "{name}");
        }
        for (name, image) in toxiproxy {
            assert_eq!(
                image,
                &format!("{TOXIPROXY_IMAGE}:{TOXIPROXY_TAG}"),
                "{name}"
            );
        }
    }

    #[test]
    fn the_pinned_toxiproxy_is_the_one_setup_installs() {
        let setup = read("scripts/setup.sh");
        let pinned: Vec<&str> = setup
            .lines()
            .filter_map(|l| l.trim().strip_prefix("TOXIPROXY_VERSION="))
            .collect();
        assert_eq!(
            pinned,
            [TOXIPROXY_TAG],
            "TOXIPROXY_VERSION in scripts/setup.sh"
        );
    }
}
