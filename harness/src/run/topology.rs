//! Where a run's world comes from: started here (Redis and Toxiproxy as child processes or as
//! containers) or attached to, started by someone else. One value, so a run cannot be both
//! attached and in containers: the command line refuses that pair where it builds this.

use crate::deployment::Deployment;

#[derive(Debug, Clone)]
pub enum Topology {
    /// Redis and Toxiproxy as child processes (`--infra local`).
    Local,
    /// Redis and Toxiproxy as containers (`--infra docker`); the instances are still child
    /// processes.
    Docker,
    /// Nothing started: the load and the faults go to this deployment, whose targets replace
    /// the scenario's (`--attach`).
    Attached(Deployment),
}

impl Topology {
    /// The deployment attached to, if any.
    pub fn attached(&self) -> Option<&Deployment> {
        match self {
            Self::Attached(deployment) => Some(deployment),
            Self::Local | Self::Docker => None,
        }
    }
}

impl From<crate::infra::Infra> for Topology {
    fn from(infra: crate::infra::Infra) -> Self {
        match infra {
            crate::infra::Infra::Local => Self::Local,
            crate::infra::Infra::Docker => Self::Docker,
        }
    }
}
