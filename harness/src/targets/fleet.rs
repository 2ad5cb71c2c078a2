//! A target's running instances through a run: started together, scaled out or in, killed
//! and replaced, and the [`Rotation`] the load balancer follows.
//!
//! Topology changes are serialised by one async lock; the instance list itself sits behind a
//! plain mutex held only for a copy or a push, so a reading at a phase boundary or the death
//! watcher never waits for an instance to become ready. An instance is taken off the list
//! before it is stopped or killed, so a death the run caused is never reported as one.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::manifest::SentinelEndpoint;
use super::{Instance, Launch, TargetDef, TargetError, start_instance};
use crate::infra::InfraError;
use crate::load::Rotation;

/// How long an instance gets to exit on SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// What every instance of the target is started with, owned for the whole run.
#[derive(Debug, Clone)]
pub struct FleetLaunch {
    pub root: PathBuf,
    pub log_dir: PathBuf,
    pub redis_url: String,
    /// The sentinels, when Redis is a Sentinel topology.
    pub sentinel: Option<SentinelEndpoint>,
    pub limit: f64,
    pub window: Duration,
}

/// A running instance as the rest of the run sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub index: usize,
    pub addr: SocketAddr,
    pub pid: u32,
    pub log: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(transparent)]
    Start(#[from] TargetError),
    #[error("{target} instance {index} (pid {pid}): {source}")]
    Signal {
        target: String,
        index: usize,
        pid: u32,
        source: InfraError,
    },
    #[error("{target} has no running instance {index} (running: {running:?})")]
    NoSuchInstance {
        target: String,
        index: usize,
        running: Vec<usize>,
    },
}

#[derive(Debug)]
pub struct Fleet {
    def: TargetDef,
    launch: FleetLaunch,
    /// The instance count the first instances were configured with.
    configured: u32,
    http: reqwest::Client,
    instances: Mutex<Vec<Instance>>,
    next_index: Mutex<usize>,
    /// Killed and not yet replaced.
    down: Mutex<Vec<usize>>,
    rotation: Rotation,
    changing: tokio::sync::Mutex<()>,
}

impl Fleet {
    /// Starts `count` instances at once (interpreters take a second or more each). Those
    /// that started are kept even when a sibling failed, so stopping the fleet stops them.
    pub async fn start(
        def: &TargetDef,
        launch: FleetLaunch,
        count: u32,
        http: &reqwest::Client,
    ) -> (Self, Result<(), TargetError>) {
        let fleet = Self {
            def: def.clone(),
            launch,
            configured: count,
            http: http.clone(),
            instances: Mutex::new(Vec::new()),
            next_index: Mutex::new(0),
            down: Mutex::new(Vec::new()),
            rotation: Rotation::new(std::iter::empty()),
            changing: tokio::sync::Mutex::new(()),
        };
        let result = fleet.start_more(count as usize, count).await.map(drop);
        (fleet, result)
    }

    /// Starts `n` new instances configured with `instance_count`, all at once, and puts each
    /// in rotation once ready. On a failure the others are still added.
    async fn start_more(&self, n: usize, instance_count: u32) -> Result<Vec<usize>, TargetError> {
        let first = {
            let mut next = self.next_index.lock().unwrap_or_else(|e| e.into_inner());
            let first = *next;
            *next += n;
            first
        };
        let launch = Launch {
            root: &self.launch.root,
            log_dir: &self.launch.log_dir,
            redis_url: &self.launch.redis_url,
            sentinel: self.launch.sentinel.as_ref(),
            instance_count,
            limit: self.launch.limit,
            window: self.launch.window,
        };
        let started = join_all(
            (first..first + n).map(|index| start_instance(&self.def, index, &launch, &self.http)),
        )
        .await;
        let mut indexes = Vec::new();
        let mut first_error = None;
        for result in started {
            match result {
                Ok(instance) => {
                    self.rotation.set(instance.index, instance.addr, true);
                    indexes.push(instance.index);
                    self.lock().push(instance);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(indexes),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Instance>> {
        self.instances.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// What the load balancer follows.
    pub fn rotation(&self) -> Rotation {
        self.rotation.clone()
    }

    /// The instance count the first instances were started with.
    pub fn configured(&self) -> u32 {
        self.configured
    }

    /// How many instances run now.
    pub fn size(&self) -> usize {
        self.lock().len()
    }

    /// The instances running now, in index order.
    pub fn running(&self) -> Vec<Running> {
        self.lock()
            .iter()
            .map(|i| Running {
                index: i.index,
                addr: i.addr,
                pid: i.process.pid(),
                log: i.process.log_path().to_owned(),
            })
            .collect()
    }

    /// Runs `f` on the running instances with the list held: a topology change waits, so
    /// what `f` sees of each process (e.g. that it died) is not a change made meanwhile.
    pub fn inspect<T>(&self, f: impl FnOnce(&[Instance]) -> T) -> T {
        f(&self.lock())
    }

    /// Scales to `to` instances: new ones (configured with `instance_count`) join the
    /// rotation once ready; the newest ones leave it first and are then stopped. Returns
    /// what it did, for the run's events. Scaling back to the size before undoes it.
    pub async fn scale_to(&self, to: usize, instance_count: u32) -> Result<String, TargetError> {
        let _one_change = self.changing.lock().await;
        let began = Instant::now();
        let now = self.lock().len();
        if to > now {
            let started = self.start_more(to - now, instance_count).await?;
            return Ok(format!(
                "scaled out {now} → {to}: instances {} started (configured with instance count \
                 {instance_count}), all ready and in rotation {} ms after",
                list(&started),
                began.elapsed().as_millis()
            ));
        }
        let leaving: Vec<Instance> = {
            let mut instances = self.lock();
            let keep = to.min(instances.len());
            instances.split_off(keep)
        };
        for i in &leaving {
            self.rotation.leave(i.index);
        }
        let indexes: Vec<usize> = leaving.iter().map(|i| i.index).collect();
        stop_all(leaving).await;
        Ok(format!(
            "scaled in {now} → {}: instances {} taken out of rotation and stopped",
            self.lock().len(),
            list(&indexes)
        ))
    }

    /// SIGKILLs instance `index` (out of rotation first, as a balancer that sees refused
    /// connections would take it out). Returns what it did.
    pub async fn kill(&self, index: usize) -> Result<String, FleetError> {
        let _one_change = self.changing.lock().await;
        let mut victim = {
            let mut instances = self.lock();
            let Some(at) = instances.iter().position(|i| i.index == index) else {
                return Err(FleetError::NoSuchInstance {
                    target: self.def.name.clone(),
                    index,
                    running: instances.iter().map(|i| i.index).collect(),
                });
            };
            instances.remove(at)
        };
        self.rotation.leave(index);
        let pid = victim.process.pid();
        self.down
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(index);
        victim
            .process
            .kill()
            .await
            .map_err(|source| FleetError::Signal {
                target: self.def.name.clone(),
                index,
                pid,
                source,
            })?;
        Ok(format!(
            "instance {index} (pid {pid}) killed (SIGKILL): {} in rotation",
            self.rotation.in_rotation()
        ))
    }

    /// Starts one instance, configured as the first ones were, in place of `killed` if it
    /// has not been replaced yet. Returns what it did, if anything.
    pub async fn replace(&self, killed: usize) -> Result<Option<String>, TargetError> {
        let _one_change = self.changing.lock().await;
        {
            let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
            let Some(at) = down.iter().position(|&i| i == killed) else {
                return Ok(None);
            };
            down.remove(at);
        }
        let began = Instant::now();
        let started = self.start_more(1, self.configured).await?;
        Ok(Some(format!(
            "instance {} started in place of instance {killed}, ready {} ms after: {} in \
             rotation",
            list(&started),
            began.elapsed().as_millis(),
            self.rotation.in_rotation()
        )))
    }

    /// Stops every instance, each with its grace, all at once.
    pub async fn stop(&self) {
        let _one_change = self.changing.lock().await;
        let all = std::mem::take(&mut *self.lock());
        stop_all(all).await;
    }
}

async fn stop_all(instances: Vec<Instance>) {
    join_all(instances.into_iter().map(|mut i| async move {
        let _ = i.process.stop(STOP_GRACE).await;
    }))
    .await;
}

fn list(indexes: &[usize]) -> String {
    indexes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
