//! What the machine was doing around a run, from `/proc`: how busy all its cores were, how
//! much time the hypervisor stole, how long the cgroup was throttled, what the test process
//! itself took, and which other processes that outlived the run took the CPU. A scaled-down
//! run on 2 cores measures the machine as much as the target when something else is busy, so
//! a test that judges a target's healthy phase waits for a quiet machine first and says what
//! it saw when it fails. Diagnostic only: a `/proc` that cannot be read is said, never fatal.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use procfs::CurrentSI as _;
use procfs::KernelStats;

/// Busy share of all cores (steal included) below which the machine counts as quiet: the
/// tail of a previous run's children exiting and the test kit's own polling stay under it;
/// a run of four instances does not.
const QUIET_BELOW: f64 = 0.25;

/// A spell shorter than this can fall between two bursts of a busy neighbour.
const QUIET_FOR: Duration = Duration::from_secs(2);

/// All the waiting one test binary may do: a machine that never quiets down (steady steal from
/// other guests) must not add a minute to each of its runs.
const WAIT_BUDGET: Duration = Duration::from_secs(180);

static WAITED: Mutex<Duration> = Mutex::new(Duration::ZERO);

/// CPU ticks (utime + stime, and the same of reaped children) of one process.
#[derive(Clone, Copy, Default)]
struct Ticks {
    own: u64,
    children: u64,
}

/// CPU ticks by state, all cores summed; the cgroup's throttled time; ticks by process,
/// keyed by pid and start time so that a reused pid is another process.
struct Snapshot {
    at: Instant,
    busy: u64,
    steal: u64,
    total: u64,
    throttled_us: Option<u64>,
    processes: BTreeMap<(i32, u64), (String, Ticks)>,
}

/// `throttled_usec` of this process's cgroup (v2), where there is one.
fn throttled_us() -> Option<u64> {
    let text = std::fs::read_to_string("/sys/fs/cgroup/cpu.stat").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("throttled_usec "))
        .and_then(|v| v.trim().parse().ok())
}

impl Snapshot {
    fn take() -> Option<Snapshot> {
        let at = Instant::now();
        let cpu = KernelStats::current().ok()?.total;
        let steal = cpu.steal.unwrap_or(0);
        // Guest time is already inside user and nice.
        let busy = cpu.user
            + cpu.nice
            + cpu.system
            + cpu.irq.unwrap_or(0)
            + cpu.softirq.unwrap_or(0)
            + steal;
        let total = busy + cpu.idle + cpu.iowait.unwrap_or(0);
        let processes = procfs::process::all_processes()
            .ok()?
            .filter_map(Result::ok)
            .filter_map(|p| p.stat().ok())
            .map(|s| {
                let children = (s.cutime + s.cstime).max(0) as u64;
                let ticks = Ticks {
                    own: s.utime + s.stime,
                    children,
                };
                ((s.pid, s.starttime), (s.comm, ticks))
            })
            .collect();
        Some(Snapshot {
            at,
            busy,
            steal,
            total,
            throttled_us: throttled_us(),
            processes,
        })
    }

    /// What happened between this snapshot and `now`.
    fn until(&self, now: &Snapshot) -> Usage {
        let ticks = now.total.saturating_sub(self.total).max(1) as f64;
        let per_second = procfs::ticks_per_second() as f64;
        let me = std::process::id() as i32;
        let mut itself = None;
        let mut others = Vec::new();
        for (key, (comm, t)) in &now.processes {
            let before = self.processes.get(key).map(|(_, b)| *b).unwrap_or_default();
            let own = t.own.saturating_sub(before.own) as f64 / per_second;
            let children = t.children.saturating_sub(before.children) as f64 / per_second;
            if key.0 == me {
                itself = Some((own, children));
            } else if own + children >= 0.05 {
                others.push((comm.clone(), key.0, own + children));
            }
        }
        others.sort_by(|a, b| b.2.total_cmp(&a.2));
        others.truncate(5);
        Usage {
            seconds: now.at.duration_since(self.at).as_secs_f64(),
            busy: now.busy.saturating_sub(self.busy) as f64 / ticks,
            steal: now.steal.saturating_sub(self.steal) as f64 / ticks,
            throttled_s: now
                .throttled_us
                .zip(self.throttled_us)
                .map(|(n, b)| n.saturating_sub(b) as f64 / 1e6),
            itself,
            others,
        }
    }
}

/// The machine over a span: busy and stolen shares of all cores, the cgroup's throttled
/// seconds, the test process's own CPU and its reaped children's (the targets a run started
/// are gone by its end, and counted there), and the other processes alive at its end that
/// took the most CPU in it, their reaped children included (a cargo or npm whose workers
/// exited still shows).
struct Usage {
    seconds: f64,
    busy: f64,
    steal: f64,
    throttled_s: Option<f64>,
    itself: Option<(f64, f64)>,
    others: Vec<(String, i32, f64)>,
}

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "over {:.1} s all cores {:.0} % busy, {:.0} % stolen by the hypervisor",
            self.seconds,
            self.busy * 100.0,
            self.steal * 100.0
        )?;
        if let Some(t) = self.throttled_s {
            write!(f, ", cgroup throttled {t:.1} s")?;
        }
        if let Some((own, children)) = self.itself {
            write!(
                f,
                "; this test {own:.1} s of CPU, its exited children {children:.1} s"
            )?;
        }
        write!(f, "; busiest other processes still alive:")?;
        if self.others.is_empty() {
            return write!(f, " none above 0.05 s");
        }
        for (comm, pid, cpu) in &self.others {
            write!(f, " {comm}[{pid}] {cpu:.1} s")?;
        }
        Ok(())
    }
}

/// Measures the machine from now until [`Watch::said`].
struct Watch(Option<Snapshot>);

impl Watch {
    fn start() -> Watch {
        Watch(Snapshot::take())
    }

    /// What the machine did since [`Watch::start`], or why that cannot be said.
    fn usage(&self) -> Result<Usage, &'static str> {
        match (&self.0, Snapshot::take()) {
            (Some(before), Some(now)) => Ok(before.until(&now)),
            _ => Err("/proc/stat or /proc/<pid>/stat not readable"),
        }
    }

    /// [`Watch::usage`] as a message says it.
    fn said(&self) -> String {
        said(&self.usage())
    }
}

fn said(usage: &Result<Usage, &'static str>) -> String {
    match usage {
        Ok(u) => u.to_string(),
        Err(e) => (*e).to_owned(),
    }
}

/// A run's account of the machine: the wait for a quiet one before it, and what the machine
/// did from then on.
pub(crate) struct Around {
    before: Quiet,
    during: Watch,
}

impl Around {
    /// Waits for a quiet machine ([`await_quiet`]), then starts watching it.
    pub(crate) async fn quiet(limit: Duration) -> Around {
        let before = await_quiet(limit).await;
        Around {
            before,
            during: Watch::start(),
        }
    }

    /// What a message about the run says of the machine, so far.
    pub(crate) fn said(&self) -> String {
        format!(
            "the machine before the run: {}; during it: {}",
            self.before,
            self.during.said()
        )
    }
}

/// How a wait for a quiet machine ended, and the last spell it measured.
struct Quiet {
    waited: Duration,
    gave_up: bool,
    last: Result<Usage, &'static str>,
}

impl fmt::Display for Quiet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = if self.gave_up {
            "gave up waiting for a quiet machine after"
        } else {
            "quiet after"
        };
        write!(
            f,
            "{how} {:.0} s ({})",
            self.waited.as_secs_f64(),
            said(&self.last)
        )
    }
}

/// Waits, up to `limit` and what is left of this binary's [`WAIT_BUDGET`], for the cores to
/// be quiet for [`QUIET_FOR`]. Uses tokio's clock for the spell, so a paused runtime would
/// read every spell as quiet: no test that calls this pauses time.
async fn await_quiet(limit: Duration) -> Quiet {
    let started = Instant::now();
    let left = WAIT_BUDGET.saturating_sub(*WAITED.lock().unwrap_or_else(|e| e.into_inner()));
    let deadline = started + limit.min(left);
    let quiet = loop {
        let watch = Watch::start();
        tokio::time::sleep(QUIET_FOR).await;
        let last = watch.usage();
        let calm = match &last {
            Ok(u) => u.busy < QUIET_BELOW,
            // Nothing to judge by: do not hold the run up.
            Err(_) => true,
        };
        if calm || Instant::now() >= deadline {
            break Quiet {
                waited: started.elapsed(),
                gave_up: !calm,
                last,
            };
        }
    };
    // The first spell is measured on any machine; only the waiting beyond it is spent.
    *WAITED.lock().unwrap_or_else(|e| e.into_inner()) += quiet.waited.saturating_sub(QUIET_FOR);
    quiet
}
