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

    fn compose_image(service: &str) -> String {
        let compose: serde_norway::Value =
            serde_norway::from_str(&read("docker-compose.yml")).unwrap();
        compose["services"][service]["image"]
            .as_str()
            .unwrap_or_else(|| panic!("docker-compose.yml: services.{service}.image"))
            .to_owned()
    }

    #[test]
    fn the_pinned_images_are_docker_compose_ymls() {
        assert_eq!(compose_image("redis"), format!("{REDIS_IMAGE}:{REDIS_TAG}"));
        assert_eq!(
            compose_image("toxiproxy"),
            format!("{TOXIPROXY_IMAGE}:{TOXIPROXY_TAG}")
        );
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
