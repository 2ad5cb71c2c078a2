//! What the machine was doing around a run, from `/proc`: how busy both cores were, how much
//! time the hypervisor stole, and which processes that outlived the run took the CPU. A
//! scaled-down run on 2 cores measures the machine as much as the target when something else
//! is busy, so a test that judges a target's healthy phase waits for a quiet machine first
//! and says what it saw when it fails.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use procfs::CurrentSI as _;
use procfs::KernelStats;

/// Busy share of all cores (steal included) below which the machine counts as quiet: the
/// tail of a previous run's children exiting, a test kit's own polling, not a run.
const QUIET_BELOW: f64 = 0.25;

/// How long a quiet spell must last.
const QUIET_FOR: Duration = Duration::from_secs(2);

/// CPU ticks by state, all cores summed, and by process.
struct Snapshot {
    at: Instant,
    busy: u64,
    steal: u64,
    total: u64,
    processes: BTreeMap<i32, (String, u64)>,
}

impl Snapshot {
    fn take() -> Snapshot {
        let at = Instant::now();
        let cpu = KernelStats::current().expect("/proc/stat").total;
        let steal = cpu.steal.unwrap_or(0);
        let busy = cpu.user
            + cpu.nice
            + cpu.system
            + cpu.irq.unwrap_or(0)
            + cpu.softirq.unwrap_or(0)
            + steal;
        let total = busy + cpu.idle + cpu.iowait.unwrap_or(0);
        let processes = procfs::process::all_processes()
            .map(|all| {
                all.filter_map(Result::ok)
                    .filter_map(|p| p.stat().ok())
                    .map(|s| (s.pid, (s.comm, s.utime + s.stime)))
                    .collect()
            })
            .unwrap_or_default();
        Snapshot {
            at,
            busy,
            steal,
            total,
            processes,
        }
    }

    /// What happened between this snapshot and now.
    fn until_now(&self) -> Usage {
        let now = Snapshot::take();
        let ticks = now.total.saturating_sub(self.total).max(1) as f64;
        let per_second = procfs::ticks_per_second() as f64;
        let mut top: Vec<(String, i32, f64)> = now
            .processes
            .iter()
            .map(|(pid, (comm, t))| {
                let before = self.processes.get(pid).map_or(0, |(_, b)| *b);
                (
                    comm.clone(),
                    *pid,
                    t.saturating_sub(before) as f64 / per_second,
                )
            })
            .filter(|(_, pid, cpu)| *pid != std::process::id() as i32 && *cpu >= 0.05)
            .collect();
        top.sort_by(|a, b| b.2.total_cmp(&a.2));
        top.truncate(5);
        Usage {
            seconds: now.at.duration_since(self.at).as_secs_f64(),
            busy: now.busy.saturating_sub(self.busy) as f64 / ticks,
            steal: now.steal.saturating_sub(self.steal) as f64 / ticks,
            top,
        }
    }
}

/// The machine over a span: busy and stolen shares of all cores, and the processes alive at
/// its end that took the most CPU in it (a process that exited within it is not listed: a
/// run's own children are gone by the time it ends, so what is left is what ran beside it).
pub(crate) struct Usage {
    seconds: f64,
    busy: f64,
    steal: f64,
    top: Vec<(String, i32, f64)>,
}

impl Usage {
    pub(crate) fn quiet(&self) -> bool {
        self.busy < QUIET_BELOW
    }
}

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "over {:.1} s all cores {:.0} % busy, {:.0} % stolen by the hypervisor; busiest \
             processes still alive:",
            self.seconds,
            self.busy * 100.0,
            self.steal * 100.0
        )?;
        if self.top.is_empty() {
            return write!(f, " none above 0.05 s");
        }
        for (comm, pid, cpu) in &self.top {
            write!(f, " {comm}[{pid}] {cpu:.1} s")?;
        }
        Ok(())
    }
}

/// Measures the machine from now until [`Watch::usage`].
pub(crate) struct Watch(Snapshot);

impl Watch {
    pub(crate) fn start() -> Watch {
        Watch(Snapshot::take())
    }

    pub(crate) fn usage(&self) -> Usage {
        self.0.until_now()
    }
}

/// Waits, up to `limit`, for the cores to be quiet for [`QUIET_FOR`]. Returns the last spell
/// measured: quiet, or what kept the machine busy until the limit.
pub(crate) async fn await_quiet(limit: Duration) -> Usage {
    let deadline = Instant::now() + limit;
    loop {
        let watch = Watch::start();
        tokio::time::sleep(QUIET_FOR).await;
        let usage = watch.usage();
        if usage.quiet() || Instant::now() >= deadline {
            return usage;
        }
    }
}
