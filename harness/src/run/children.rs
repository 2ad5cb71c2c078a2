//! Watching the children while the load runs: an instance, a Redis (or its replica or
//! sentinels) or the Toxiproxy server that dies mid-run is noticed, named with the last lines
//! of its log and recorded as an event of its target; the run goes on.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::since;
use super::world::World;
use crate::infra::describe_status;
use crate::infra::process::{Exit, exit_of, last_lines};
use crate::results::Event;

/// How much of a dead child's log its event quotes: enough for gunicorn's or Node's last words.
const DEATH_LOG_LINES: usize = 5;

/// How a child that is no longer running ended, or `None` while it runs.
fn death_of(pid: u32) -> Option<String> {
    match exit_of(pid) {
        Exit::Running => None,
        Exit::Exited(status) => Some(format!("exited with {}", describe_status(status))),
        // Reaped already (tokio may collect a child it owns): dead only if no such process.
        Exit::Unknown => {
            let gone = i32::try_from(pid).map_or(true, |raw| {
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None)
                    == Err(nix::errno::Errno::ESRCH)
            });
            gone.then(|| "is gone".to_owned())
        }
    }
}

/// Notices any child (instance, Redis, replica, sentinel) that dies mid-run; the run goes on.
pub(super) async fn watch(
    world: &World,
    start: Instant,
    done: &CancellationToken,
    events: &Mutex<Vec<Vec<Event>>>,
) {
    let mut reported: Vec<u32> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tick.tick() => {}
        }
        for (t, target) in world.targets.iter().enumerate() {
            let unreported_death =
                |pid: u32| (!reported.contains(&pid)).then(|| death_of(pid)).flatten();
            // Judged with the instance list held: `scale` and `kill-instance` take an
            // instance off it before they stop it, so what they end is not a death.
            // An attached deployment's processes are not failmode's children.
            let mut children: Vec<(u32, String, PathBuf, Option<String>)> = target
                .fleet
                .as_ref()
                .map(|fleet| {
                    fleet.inspect(|instances| {
                        instances
                            .iter()
                            .map(|i| {
                                let pid = i.process.pid();
                                let how = unreported_death(pid);
                                (
                                    pid,
                                    format!("instance {}", i.index),
                                    i.process.log_path().to_owned(),
                                    how,
                                )
                            })
                            .collect()
                    })
                })
                .unwrap_or_default();
            // Judged under its lock: a `redis-restart` replaces the process while holding it,
            // and the one it killed is not a death. Skipped for a tick while it does.
            // One a `failover` killed is the fault's, until the fault starts it again.
            if let Some(Ok(redis)) = target
                .redis
                .as_ref()
                .map(|r| r.try_lock())
                .filter(|r| r.as_ref().is_ok_and(|r| !r.is_killed()))
            {
                let pid = redis.pid();
                let how = unreported_death(pid);
                children.push((pid, "redis-server".into(), redis.log_path().to_owned(), how));
            }
            // A Sentinel topology's replica and sentinels: no fault stops them, so any end
            // is a death, and one the failover's outcome depends on.
            if let Some(replicated) = &target.replicated {
                let replica = &replicated.replica;
                let topology = std::iter::once((
                    replica.pid(),
                    "redis-server replica".to_owned(),
                    replica.log_path(),
                ))
                .chain(
                    replicated
                        .sentinels
                        .processes()
                        .iter()
                        .map(|s| (s.pid(), s.name().to_owned(), s.log_path())),
                );
                for (pid, what, log) in topology {
                    children.push((pid, what, log.to_owned(), unreported_death(pid)));
                }
            }
            if let (0, Some(server)) = (t, &world.toxiproxy_server) {
                let pid = server.pid();
                let how = unreported_death(pid);
                children.push((
                    pid,
                    "toxiproxy-server (every target's faults and proxies)".into(),
                    server.log_path().to_owned(),
                    how,
                ));
            }
            for (pid, what, log, how) in children {
                let Some(how) = how else { continue };
                reported.push(pid);
                let detail = format!(
                    "{what} (pid {pid}) {how}; its log, {}, ends:\n{}",
                    log.display(),
                    last_lines(&log, DEATH_LOG_LINES)
                );
                tracing::warn!(target = %target.def.name, "{detail}");
                events.lock().unwrap_or_else(|e| e.into_inner())[t].push(Event {
                    at_s: since(start, Instant::now()),
                    kind: "child-exited".to_owned(),
                    detail,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_child_that_exits_is_named_dead_with_its_status_and_a_running_one_is_not() {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "read _; exit 3"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        assert_eq!(death_of(pid), None);
        drop(child.stdin.take());
        // Not reaped: the watcher must see the zombie's status, as it does a child's.
        tokio::time::timeout(Duration::from_secs(5), async {
            while death_of(pid).is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("sh exits once its stdin closes");
        assert_eq!(death_of(pid).as_deref(), Some("exited with status 3"));
        child.wait().await.unwrap();
        assert_eq!(death_of(pid).as_deref(), Some("is gone"));
        assert_eq!(death_of(u32::MAX).as_deref(), Some("is gone"));
    }
}
