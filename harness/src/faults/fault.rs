//! A fault as a scenario writes it: `{ type = "down" }`, `{ type = "flap", period = "4s",
//! down = "1s" }`, any Toxiproxy toxic (`{ type = "latency", latency_ms = 40 }`), or one
//! inside the target's own Redis (`{ type = "redis-restart" }`, `{ type = "client-pause" }`,
//! `{ type = "noisy-neighbour" }`, `{ type = "eviction" }`), one that makes that Redis answer
//! with errors (`{ type = "oom" }`, `{ type = "readonly" }`, `{ type = "busy" }`,
//! `{ type = "script-flush" }`), or in the target's topology
//! (`{ type = "scale", to = 8 }`, `{ type = "kill-instance", instance = 1 }`,
//! `{ type = "failover", how = "kill" }`).

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

pub use crate::infra::redis_native::PauseMode;
use crate::infra::toxiproxy::ToxicKind;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    /// The proxy is disabled: open connections are cut and new ones refused.
    Down {},
    /// Redis holds every connection open and nothing passes either way: commands do not
    /// reach it and no reply comes back (Toxiproxy `timeout` 0 on both directions).
    Hang {},
    /// Redis itself stops (SIGSTOP to the target's own redis-server, SIGCONT at the end):
    /// connections stay open, commands wait in the socket buffers and all run when it
    /// resumes — a Redis blocked by a slow script, a fork or a pause. Not through the proxy.
    Stall {},
    /// Down for `down` at the start of every `period`, up for the rest, for the whole phase.
    Flap {
        #[serde(with = "crate::duration")]
        period: Duration,
        #[serde(with = "crate::duration")]
        down: Duration,
    },
    /// The target's redis-server killed (SIGKILL) at the phase's start and started again
    /// empty on the same port after `down` (default: at once): every counter and loaded
    /// script is gone, and clients reconnect to a Redis that knows nothing.
    RedisRestart {
        #[serde(default, with = "crate::duration")]
        down: Duration,
    },
    /// `CLIENT PAUSE` for the whole phase: Redis itself stops answering (`all`, the default)
    /// or stops executing writes (`write`) while every connection stays up.
    ClientPause {
        #[serde(default)]
        mode: PauseMode,
    },
    /// Another client on the same Redis: `keys` filler keys in a database of their own and a
    /// full `KEYS` scan over them in a loop, `pause` apart; Redis runs one command at a time,
    /// so the limiter's own calls queue behind each scan. The scans' durations are recorded.
    NoisyNeighbour {
        #[serde(default = "default_neighbour_keys")]
        keys: u64,
        #[serde(default, with = "crate::duration")]
        pause: Duration,
    },
    /// Memory pressure while everything stays "healthy": `maxmemory` set to what Redis uses
    /// plus `headroom_bytes`, under `policy`, and a writer adding `value_bytes` values at
    /// `rate` a second beside the limiter's keys, so keys (the limiter's among them) are
    /// evicted with no error anywhere. Put back at the phase's end; the evictions are recorded.
    Eviction {
        #[serde(default = "default_eviction_policy")]
        policy: String,
        #[serde(default = "default_eviction_rate")]
        rate: u32,
        #[serde(default = "default_eviction_value_bytes")]
        value_bytes: usize,
        #[serde(default = "default_eviction_headroom")]
        headroom_bytes: u64,
    },
    /// Redis out of memory for the phase: `maxmemory` below what it uses, under `noeviction`,
    /// so every write (a limiter's script at its first write) is answered `-OOM` and reads
    /// still work. Put back at the phase's end; the error replies are recorded.
    Oom {},
    /// The target's Redis demoted to a replica for the phase, as a client still pinned to the
    /// old primary sees it after a failover: writes answered `-READONLY`, reads work. An empty
    /// partner redis-server becomes its replica and syncs (when the run starts), then, at the
    /// phase's start, their roles are swapped with
    /// the target's writes paused until the partner has them all (milliseconds), so no count
    /// is lost; at the phase's end the target, a synced replica, is made a primary again.
    Readonly {},
    /// Another client runs a script that never ends, with Redis's busy threshold lowered to
    /// `threshold`: every other command is answered `-BUSY` for the phase, until `SCRIPT
    /// KILL` at its end.
    Busy {
        #[serde(default = "default_busy_threshold", with = "crate::duration")]
        threshold: Duration,
    },
    /// `SCRIPT FLUSH` at the phase's start: every loaded script is gone, so a limiter calling
    /// `EVALSHA` is answered `-NOSCRIPT` until it loads its script again.
    ScriptFlush {},
    /// The target scaled to `to` instances at the phase's start: new ones, configured with
    /// `instance_count` (default: `to`, a deployment that knows its new size), join the
    /// balancer's rotation once ready; the newest leave it first and are then stopped. Scaled
    /// back to the size before at the phase's end.
    Scale {
        to: u32,
        #[serde(default)]
        instance_count: Option<u32>,
    },
    /// Instance `instance` (its index, from 0) killed with SIGKILL at the phase's start and
    /// taken out of the balancer's rotation; a new instance (configured as the first ones)
    /// started in its place `restart` after, or at the phase's end.
    KillInstance {
        #[serde(default)]
        instance: usize,
        #[serde(default, with = "crate::duration::optional")]
        restart: Option<Duration>,
    },
    /// The primary of a Sentinel topology (`[redis] topology = "sentinel"`) replaced by its
    /// replica at the phase's start, which has missed the increments still on the delayed
    /// replication link: `how = "kill"` (the default) SIGKILLs the primary, which the
    /// sentinels call down after a second and fail over, and starts it again, empty, at the
    /// phase's end (the sentinels make it a replica); `how = "sentinel"` asks them for a
    /// failover at once (`SENTINEL FAILOVER`), the old primary demoted. One-way: the replica
    /// stays the primary for the rest of the run.
    Failover {
        #[serde(default)]
        how: FailoverHow,
    },
    /// A Toxiproxy toxic on the replies (downstream).
    #[serde(untagged)]
    Toxic(ToxicKind),
}

/// How a `failover` replaces the primary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailoverHow {
    /// SIGKILL of the primary: the sentinels find it down and promote the replica.
    #[default]
    Kill,
    /// `SENTINEL FAILOVER`: promoted at once, the old primary demoted while it still runs.
    Sentinel,
}

fn default_neighbour_keys() -> u64 {
    // About 20 ms of Redis per full scan on this project's machine, with the CPU to itself.
    200_000
}

fn default_busy_threshold() -> Duration {
    // Low, so other clients are answered -BUSY almost at once rather than held unanswered
    // (Redis's default is 5 s).
    Duration::from_millis(10)
}

fn default_eviction_policy() -> String {
    "allkeys-lru".into()
}

fn default_eviction_rate() -> u32 {
    200
}

fn default_eviction_value_bytes() -> usize {
    64 * 1024
}

fn default_eviction_headroom() -> u64 {
    // Room for a dozen or so filler values: few keys fit, so the limiter's are among the
    // candidates every eviction samples (Redis's LRU clock ticks in seconds, so keys touched
    // within the same second tie).
    1024 * 1024
}

impl Fault {
    /// Stretches the fault's own times with the timeline (`--duration-scale`).
    pub fn scale(&mut self, factor: f64) {
        match self {
            Self::Flap { period, down } => {
                *period = period.mul_f64(factor);
                *down = down.mul_f64(factor);
            }
            Self::RedisRestart { down } => *down = down.mul_f64(factor),
            Self::KillInstance {
                restart: Some(after),
                ..
            } => *after = after.mul_f64(factor),
            // A neighbour's pause shapes its load (how busy Redis is), not the timeline.
            _ => {}
        }
    }

    /// Stops Redis answering while it acts, so readings must be taken before it starts.
    pub fn silences_redis(&self) -> bool {
        matches!(
            self,
            Self::Stall {}
                | Self::ClientPause {
                    mode: PauseMode::All
                }
                | Self::RedisRestart { .. }
                | Self::Busy { .. }
        )
    }

    /// Runs for the whole phase beside the load (a task of its own), not only at its edges.
    pub fn is_ongoing(&self) -> bool {
        matches!(
            self,
            Self::Flap { .. }
                | Self::NoisyNeighbour { .. }
                | Self::Eviction { .. }
                | Self::Busy { .. }
                | Self::Failover { .. }
                | Self::KillInstance {
                    restart: Some(_),
                    ..
                }
        )
    }

    /// Listed in two adjacent phases, it stays in place across their boundary instead of
    /// being removed and applied again (which would let Redis through for an instant).
    pub fn spans_adjacent_phases(&self) -> bool {
        // Not `stall`: a Redis left stopped across the boundary could not be read there.
        matches!(self, Self::Down {} | Self::Scale { .. })
    }

    /// Can be played on a deployment failmode attached to: through its Toxiproxy, or a
    /// `CLIENT PAUSE` its Redis lifts by itself. Not what needs failmode's own processes
    /// (stopping, killing or restarting them) nor what writes to the deployment's Redis.
    pub fn attachable(&self) -> bool {
        matches!(
            self,
            Self::Down {}
                | Self::Hang {}
                | Self::Flap { .. }
                | Self::Toxic(_)
                | Self::ClientPause { .. }
        )
    }

    /// Signals the target's redis-server process itself (SIGSTOP, SIGKILL and a new process on
    /// the same port), or starts a partner server beside it on loopback (`readonly`), which
    /// only a Redis failmode runs as its child process has: not an attached deployment's, not
    /// one in a container (`--infra docker`).
    pub fn needs_redis_process(&self) -> bool {
        matches!(
            self,
            Self::Stall {} | Self::RedisRestart { .. } | Self::Readonly {} | Self::Failover { .. }
        )
    }

    /// Starts or stops the target's instances.
    pub fn changes_topology(&self) -> bool {
        matches!(self, Self::Scale { .. } | Self::KillInstance { .. })
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Down {} => f.write_str("down"),
            Self::Hang {} => f.write_str("hang"),
            Self::Stall {} => f.write_str("stall (redis-server stopped)"),
            Self::RedisRestart { down } if down.is_zero() => {
                f.write_str("redis-restart (killed, started again empty)")
            }
            Self::RedisRestart { down } => write!(
                f,
                "redis-restart (killed, started again empty after {})",
                humantime::format_duration(*down)
            ),
            Self::ClientPause { mode } => match mode {
                PauseMode::All => f.write_str("client-pause (CLIENT PAUSE ALL)"),
                PauseMode::Write => f.write_str("client-pause (CLIENT PAUSE WRITE)"),
            },
            Self::NoisyNeighbour { keys, pause } => {
                write!(f, "noisy-neighbour (KEYS over {keys} keys")?;
                if !pause.is_zero() {
                    write!(f, ", {} apart", humantime::format_duration(*pause))?;
                }
                f.write_str(")")
            }
            Self::Eviction {
                policy,
                rate,
                value_bytes,
                headroom_bytes,
            } => write!(
                f,
                "eviction (maxmemory used + {} KiB, {policy}, {rate} writes/s of {} KiB)",
                headroom_bytes / 1024,
                value_bytes / 1024
            ),
            Self::Oom {} => f.write_str("oom (maxmemory below use, noeviction: -OOM)"),
            Self::Readonly {} => f.write_str("readonly (demoted to a replica: -READONLY)"),
            Self::Busy { threshold } => write!(
                f,
                "busy (an endless script, busy threshold {}: -BUSY)",
                humantime::format_duration(*threshold)
            ),
            Self::ScriptFlush {} => f.write_str("script-flush (SCRIPT FLUSH: -NOSCRIPT)"),
            Self::Flap { period, down } => write!(
                f,
                "flap: down {} every {}",
                humantime::format_duration(*down),
                humantime::format_duration(*period)
            ),
            Self::Scale {
                to,
                instance_count: Some(count),
            } => write!(f, "scale to {to} (configured instance count {count})"),
            Self::Scale { to, .. } => write!(f, "scale to {to}"),
            Self::KillInstance { instance, restart } => {
                write!(f, "kill-instance {instance} (SIGKILL)")?;
                if let Some(after) = restart {
                    write!(f, ", replaced after {}", humantime::format_duration(*after))?;
                }
                Ok(())
            }
            Self::Failover {
                how: FailoverHow::Kill,
            } => f.write_str("failover (primary killed, the sentinels promote its replica)"),
            Self::Failover {
                how: FailoverHow::Sentinel,
            } => f.write_str("failover (SENTINEL FAILOVER: the replica promoted at once)"),
            Self::Toxic(kind) => {
                f.write_str(kind.api_type())?;
                if let serde_json::Value::Object(attributes) = kind.api_attributes() {
                    for (k, v) in attributes {
                        write!(f, " {k}={v}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Holder {
        faults: Vec<Fault>,
    }

    fn parse(text: &str) -> Result<Vec<Fault>, String> {
        toml::from_str::<Holder>(text)
            .map(|h| h.faults)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_fault_form_of_a_scenario_parses() {
        let faults = parse(
            r#"faults = [
                { type = "down" },
                { type = "hang" },
                { type = "flap", period = "4s", down = "1s" },
                { type = "latency", latency_ms = 40, jitter_ms = 10 },
                { type = "timeout", timeout_ms = 0 },
                { type = "stall" },
                { type = "redis-restart", down = "2s" },
                { type = "client-pause", mode = "write" },
                { type = "noisy-neighbour", keys = 1000 },
                { type = "eviction", rate = 50 },
                { type = "oom" },
                { type = "readonly" },
                { type = "busy", threshold = "20ms" },
                { type = "script-flush" },
                { type = "failover" },
                { type = "failover", how = "sentinel" },
            ]"#,
        )
        .unwrap();
        assert_eq!(faults[0], Fault::Down {});
        assert_eq!(faults[1], Fault::Hang {});
        assert_eq!(
            faults[2],
            Fault::Flap {
                period: Duration::from_secs(4),
                down: Duration::from_secs(1)
            }
        );
        assert_eq!(
            faults[3],
            Fault::Toxic(ToxicKind::Latency {
                latency_ms: 40,
                jitter_ms: 10
            })
        );
        assert_eq!(faults[3].to_string(), "latency jitter=10 latency=40");
        assert_eq!(faults[5], Fault::Stall {});
        assert_eq!(
            faults[6],
            Fault::RedisRestart {
                down: Duration::from_secs(2)
            }
        );
        assert_eq!(
            faults[7],
            Fault::ClientPause {
                mode: PauseMode::Write
            }
        );
        assert_eq!(
            faults[8],
            Fault::NoisyNeighbour {
                keys: 1000,
                pause: Duration::ZERO
            }
        );
        assert_eq!(
            faults[9],
            Fault::Eviction {
                policy: "allkeys-lru".into(),
                rate: 50,
                value_bytes: 64 * 1024,
                headroom_bytes: 1024 * 1024
            }
        );
        assert!(faults[7].to_string().contains("WRITE") && !faults[7].silences_redis());
        assert!(faults[6].silences_redis() && faults[9].is_ongoing());
        assert_eq!(faults[10], Fault::Oom {});
        assert_eq!(faults[11], Fault::Readonly {});
        assert_eq!(
            faults[12],
            Fault::Busy {
                threshold: Duration::from_millis(20)
            }
        );
        assert_eq!(faults[13], Fault::ScriptFlush {});
        assert_eq!(
            faults[14],
            Fault::Failover {
                how: FailoverHow::Kill
            }
        );
        assert_eq!(
            faults[15],
            Fault::Failover {
                how: FailoverHow::Sentinel
            }
        );
        // Its promotion is awaited beside the load, not at the phase's start.
        assert!(faults[14].needs_redis_process() && faults[14].is_ongoing());
        // A busy Redis answers nothing but -BUSY, so it is read before and it runs throughout.
        assert!(faults[12].silences_redis() && faults[12].is_ongoing());
        assert!(!faults[10].silences_redis() && !faults[11].silences_redis());
        assert_eq!(
            faults[12].to_string(),
            "busy (an endless script, busy threshold 20ms: -BUSY)"
        );
        // None of them is played on a deployment failmode attached to.
        assert!(faults[10..].iter().all(|f| !f.attachable()));
    }

    #[test]
    fn unknown_types_and_keys_are_refused() {
        assert!(parse(r#"faults = [{ type = "gremlins" }]"#).is_err());
        assert!(parse(r#"faults = [{ type = "down", for = "3s" }]"#).is_err());
        assert!(parse(r#"faults = [{ type = "latency", latency_ms = 40, colour = 1 }]"#).is_err());
    }

    #[test]
    fn only_stall_redis_restart_and_readonly_need_failmodes_own_redis_process() {
        let faults = parse(
            r#"faults = [
                { type = "down" }, { type = "hang" }, { type = "flap", period = "4s", down = "1s" },
                { type = "latency", latency_ms = 40 }, { type = "stall" }, { type = "redis-restart" },
                { type = "client-pause" }, { type = "noisy-neighbour" }, { type = "eviction" },
                { type = "scale", to = 2 }, { type = "kill-instance" }, { type = "oom" },
                { type = "readonly" }, { type = "busy" }, { type = "script-flush" },
            ]"#,
        )
        .unwrap();
        let needing: Vec<String> = faults
            .iter()
            .filter(|f| f.needs_redis_process())
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            needing,
            [
                "stall (redis-server stopped)",
                "redis-restart (killed, started again empty)",
                "readonly (demoted to a replica: -READONLY)"
            ]
        );
    }

    #[test]
    fn scaling_a_flap_scales_its_period_and_cut() {
        let mut f = Fault::Flap {
            period: Duration::from_secs(4),
            down: Duration::from_secs(1),
        };
        f.scale(0.5);
        assert_eq!(
            f,
            Fault::Flap {
                period: Duration::from_secs(2),
                down: Duration::from_millis(500)
            }
        );
    }
}

#[cfg(test)]
mod topology_tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Holder {
        faults: Vec<Fault>,
    }

    #[test]
    fn the_topology_faults_parse_scale_with_the_timeline_and_say_what_they_do() {
        let mut faults = toml::from_str::<Holder>(
            r#"faults = [
                { type = "scale", to = 8, instance_count = 4 },
                { type = "scale", to = 2 },
                { type = "kill-instance", instance = 1, restart = "5s" },
                { type = "kill-instance" },
            ]"#,
        )
        .unwrap()
        .faults;
        assert_eq!(
            faults[0].to_string(),
            "scale to 8 (configured instance count 4)"
        );
        assert_eq!(
            faults[1],
            Fault::Scale {
                to: 2,
                instance_count: None
            }
        );
        assert!(faults[2].is_ongoing() && !faults[3].is_ongoing());
        assert!(faults[0].spans_adjacent_phases() && !faults[2].spans_adjacent_phases());
        faults[2].scale(0.2);
        assert_eq!(
            faults[2],
            Fault::KillInstance {
                instance: 1,
                restart: Some(Duration::from_secs(1))
            }
        );
        assert_eq!(
            faults[2].to_string(),
            "kill-instance 1 (SIGKILL), replaced after 1s"
        );
        assert_eq!(
            faults[3],
            Fault::KillInstance {
                instance: 0,
                restart: None
            }
        );
    }
}
