//! Where a run's Redis and Toxiproxy run (`failmode run --infra`): `local` child processes,
//! the default, or `docker` containers, which only a binary built with the cargo feature
//! `docker` can start. The target instances are child processes either way.

use std::fmt;
use std::str::FromStr;

/// The command that builds a failmode able to run `--infra docker`.
pub const DOCKER_BUILD: &str = "cargo build --release -p failmode --features docker";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Infra {
    /// redis-server and toxiproxy-server child processes.
    #[default]
    Local,
    /// Redis and Toxiproxy containers (see `infra::containers`).
    Docker,
}

/// `--infra docker` asked of a binary built without the `docker` feature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--infra docker needs a failmode built with the cargo feature `docker` ({DOCKER_BUILD}); \
     this one was built without it"
)]
pub struct DockerNotBuilt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown infrastructure {0:?}: `local` (child processes) or `docker` (containers)")]
pub struct UnknownInfra(String);

impl Infra {
    /// Whether this binary can start it.
    pub fn check_built(self) -> Result<(), DockerNotBuilt> {
        match self {
            Self::Local => Ok(()),
            Self::Docker if cfg!(feature = "docker") => Ok(()),
            Self::Docker => Err(DockerNotBuilt),
        }
    }
}

impl FromStr for Infra {
    type Err = UnknownInfra;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "local" => Ok(Self::Local),
            "docker" => Ok(Self::Docker),
            other => Err(UnknownInfra(other.to_owned())),
        }
    }
}

impl fmt::Display for Infra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Local => "local",
            Self::Docker => "docker",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infra_names_parse_and_print_back() {
        for infra in [Infra::Local, Infra::Docker] {
            assert_eq!(infra.to_string().parse::<Infra>(), Ok(infra));
        }
        assert_eq!(Infra::default(), Infra::Local);
        let unknown = "podman".parse::<Infra>().unwrap_err().to_string();
        assert!(
            unknown.contains("\"podman\"") && unknown.contains("`docker`"),
            "{unknown}"
        );
    }

    #[test]
    fn docker_is_refused_by_a_binary_built_without_the_feature_naming_the_build() {
        assert_eq!(Infra::Local.check_built(), Ok(()));
        let docker = Infra::Docker.check_built();
        if cfg!(feature = "docker") {
            assert_eq!(docker, Ok(()));
        } else {
            let message = docker.unwrap_err().to_string();
            assert!(message.contains(DOCKER_BUILD), "{message}");
        }
    }
}
