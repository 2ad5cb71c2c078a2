//! The faults inside a target's Redis that change its settings or its role for a phase and
//! put them back at its end: eviction's memory cap, out of memory, demoted to a replica, busy
//! with a script, its scripts flushed. Each reads Redis's error replies when it begins and
//! says at its end how many, of which code, Redis gave meanwhile: what the limiter met.

use std::net::SocketAddr;

use super::step::{Done, FaultError, Op, Saved, Step, Undo, own_partner_name, partner_name};
use crate::faults::Fault;
use crate::infra::redis_errors::{self, errors_between};
use crate::infra::redis_native;
use crate::infra::{RedisServer, redis};

/// The files a partner's first sync writes, primary's and partners': they hold the limiter's
/// counts, so they are deleted once the sync is done.
pub(super) fn sync_files(name: &str, dir: &std::path::Path) -> [std::path::PathBuf; 3] {
    [
        redis::rdb_file(name),
        redis::rdb_file(&partner_name(name)),
        redis::rdb_file(&own_partner_name(name)),
    ]
    .map(|f| dir.join(f))
}

/// Deletes the file a partner was receiving its sync into when it was stopped: Redis receives
/// a sync into `temp-<unixtime>.<pid>.rdb` and renames it to its RDB file ([`sync_files`])
/// once it has it all. `REPLICAOF NO ONE` deletes it, a shutdown does not (nor a kill), and it
/// holds the limiter's counts. Only the files of `pids`, servers stopped: the run's other
/// servers share the folder.
pub(super) fn remove_cut_off_syncs(dir: &std::path::Path, pids: &[u32]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix("temp-")?.strip_suffix(".rdb"))
            .and_then(|stamp_pid| stamp_pid.rsplit_once('.')?.1.parse::<u32>().ok());
        if pid.is_some_and(|pid| pids.contains(&pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The fault's `type`, to begin its report with.
fn label(fault: &Fault) -> &'static str {
    match fault {
        Fault::Eviction { .. } => "eviction",
        Fault::Oom {} => "oom",
        Fault::Readonly {} => "readonly",
        Fault::Busy { .. } => "busy",
        Fault::ScriptFlush {} => "script-flush",
        _ => "fault",
    }
}

impl Step<'_> {
    /// Applies `fault` (saving what it changed and Redis's error count), or puts it back and
    /// reports the error replies since.
    pub(super) async fn inside_redis(
        &self,
        fault: &Fault,
        op: Op,
        done: &mut Done,
    ) -> Result<(), FaultError> {
        let addr = self.redis_addr(fault)?;
        let key = (self.slot, self.name.clone());
        match op {
            Op::Apply => {
                let errors = redis_errors::error_counts(addr).await?;
                let undo = self.change(fault, addr, done).await?;
                self.saved
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, Saved { errors, undo });
            }
            Op::Remove => {
                let saved = self
                    .saved
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
                // Never applied (its apply failed, and said so): nothing to put back.
                let Some(saved) = saved else { return Ok(()) };
                self.put_back(fault, addr, saved.undo, done).await?;
                let after = redis_errors::error_counts(addr).await?;
                done.reports.push(format!(
                    "{}: Redis's error replies to every client: {} (INFO errorstats)",
                    label(fault),
                    errors_between(&saved.errors, &after)
                ));
            }
        }
        Ok(())
    }

    /// Makes the change; counts the commands it ran on the target's Redis itself.
    async fn change(
        &self,
        fault: &Fault,
        addr: SocketAddr,
        done: &mut Done,
    ) -> Result<Undo, FaultError> {
        Ok(match fault {
            Fault::Eviction {
                policy,
                headroom_bytes,
                ..
            } => {
                let saved = redis_native::squeeze_memory(addr, policy, *headroom_bytes).await?;
                done.commands += 4;
                Undo::Memory(saved)
            }
            Fault::Oom {} => {
                let saved = redis_errors::exhaust_memory(addr).await?;
                done.commands += 4;
                Undo::Memory(saved)
            }
            Fault::Busy { threshold } => {
                let before = redis_errors::lower_busy_threshold(addr, *threshold).await?;
                done.commands += 2;
                // The script itself runs beside the load for the whole phase (`ongoing`).
                Undo::Threshold(before)
            }
            Fault::ScriptFlush {} => {
                redis_errors::flush_scripts(addr).await?;
                done.commands += 1;
                Undo::Nothing
            }
            Fault::Readonly {} => {
                // The partner starts without the lock, so readings of this Redis go on.
                let (name, dir) = {
                    let redis = self.redis(fault)?.lock().await;
                    (redis.name().to_owned(), redis.dir().to_owned())
                };
                let files = sync_files(&name, &dir);
                let ready = self
                    .partners
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_mut(self.slot)
                    .and_then(Option::take);
                let ready = match ready {
                    Some((partner, attached))
                        if redis_errors::in_sync(addr, partner.addr()).await? =>
                    {
                        Some((partner, attached))
                    }
                    // Attached before something replaced the history it holds: a fresh one.
                    Some((mut stale, _)) => {
                        let stale_pid = stale.pid();
                        let _ = stale.stop().await;
                        let _ = std::fs::remove_file(&files[1]);
                        remove_cut_off_syncs(&dir, &[stale_pid]);
                        None
                    }
                    None => None,
                };
                let (mut partner, attached) = match ready {
                    Some((partner, attached)) => (partner, Some(attached)),
                    None => (
                        RedisServer::start(&own_partner_name(&name), &dir).await?,
                        None,
                    ),
                };
                // The syncs' files hold the limiter's counts: not left in the results folder.
                let partner_file = dir.join(redis::rdb_file(partner.name()));
                // CLIENT PAUSE/UNPAUSE and REPLICAOF; CONFIG GET/SET too unless the partner
                // was attached ahead (then in an earlier phase). The partner's own commands and
                // the replication handshake are left out.
                let (demoted, commands) = match attached {
                    Some(attached) => (
                        redis_errors::swap_roles(addr, partner.addr(), attached).await,
                        3,
                    ),
                    None => (redis_errors::demote(addr, partner.addr()).await, 5),
                };
                let demoted = match demoted {
                    Ok(demoted) => demoted,
                    Err(e) => {
                        // Half done: the target must stay the primary its limiter writes to.
                        let back = redis_errors::promote_back(addr, None).await;
                        let partner_pid = partner.pid();
                        let _ = partner.stop().await;
                        files.iter().for_each(|f| drop(std::fs::remove_file(f)));
                        remove_cut_off_syncs(&dir, &[partner_pid]);
                        return Err(match back {
                            Ok(()) => e.into(),
                            Err(back) => FaultError::Undo(format!(
                                "{e}; and making it the primary again failed: {back}"
                            )),
                        });
                    }
                };
                let _ = std::fs::remove_file(&files[0]);
                done.commands += commands;
                done.reports.push(format!(
                    "readonly: redis-server {addr} a replica of a partner at {} (synced first, \
                     writes paused {:.0} ms for the swap: no count lost)",
                    partner.addr(),
                    demoted.writes_paused.as_secs_f64() * 1000.0
                ));
                Undo::Partner(Box::new((partner, demoted, partner_file)))
            }
            _ => unreachable!("{fault} is not routed here by Step::run"),
        })
    }

    async fn put_back(
        &self,
        fault: &Fault,
        addr: SocketAddr,
        undo: Undo,
        done: &mut Done,
    ) -> Result<(), FaultError> {
        match undo {
            Undo::Nothing => {}
            Undo::Memory(saved) => {
                let evicted = redis_native::release_memory(addr, &saved).await?;
                // CONFIG SET twice, KEYS and UNLINK of the filler.
                done.commands += 4;
                // Under `oom`'s noeviction nothing is evicted: its report is the -OOM replies.
                if matches!(fault, Fault::Eviction { .. }) || evicted > 0 {
                    done.reports.push(format!(
                        "{}: {evicted} keys evicted (INFO evicted_keys); maxmemory {} and {} put \
                         back",
                        label(fault),
                        saved.maxmemory,
                        saved.policy
                    ));
                }
            }
            Undo::Threshold(before) => {
                redis_errors::restore_busy_threshold(addr, &before).await?;
                done.commands += 1;
            }
            Undo::Partner(partner) => {
                let (mut partner, demoted, file) = *partner;
                let back = redis_errors::promote_back(addr, Some(&demoted)).await;
                // Stopped whatever happened: a partner left running would hold nothing.
                let stopped = partner.stop().await;
                let _ = std::fs::remove_file(file);
                back?;
                stopped?;
                done.commands += 2;
                done.reports.push(format!(
                    "readonly: redis-server {addr} the primary again (REPLICAOF NO ONE), the \
                     partner stopped"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_off_sync_of_the_given_servers_is_deleted_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            "temp-1796486986.111.rdb",
            "temp-1796486987.222.rdb",
            "temp-111.rdb",
            "target.rdb",
            "temp-1796486986.111.log",
        ];
        for f in files {
            std::fs::write(dir.path().join(f), b"counts").unwrap();
        }
        remove_cut_off_syncs(dir.path(), &[111, 333]);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "target.rdb",
                "temp-111.rdb",
                "temp-1796486986.111.log",
                "temp-1796486987.222.rdb"
            ]
        );
    }
}
