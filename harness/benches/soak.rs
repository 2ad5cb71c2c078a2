//! `just soak [SCALE]`: `failmode run harness/benches/soak.toml` (30 minutes at 5,000 req/s
//! on the reference's four instances, a fault in every minute) with a sampler beside it that
//! reads, every minute, the resident memory (`VmRSS`) and the open file descriptors of the
//! harness and of each reference instance, from `/proc`. At the end it says whether each
//! stayed within 10 % of its first-minute reading, and the most of its RSS seen in
//! transparent huge pages, and exits 1 if one did not stay within (or if the run failed).
//!
//! The first minute is the baseline rather than the start because everything grows in it:
//! connections are opened up to the concurrency the load needs, buffers and histograms fill.
//! A leak is growth after that. Each reading is the least of [`SAMPLES`] samples a second
//! apart (scaled with the minute), ending on the minute: every request in flight holds a
//! connection (an fd on both sides) and its buffers, so a single sample taken during a
//! momentary latency peak of the shared machine counts that peak's requests in flight, which
//! are gone a second later; a leak raises the least of them as much as any.
//!
//! Flags: `--scale X` (1: every minute, the run's and the sampler's, lasts X minutes; 0.1 runs
//! the whole soak in 3), `--failmode PATH` (`target/release/failmode`).
//! The harness's output goes to `results/soak-failmode.{out,err}`; its table is printed at the
//! end.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Samples per reading, a second apart; the reading is the least RSS and fds (see the header).
const SAMPLES: u32 = 5;
/// Readings, one a minute; must match the scenario's length.
const MINUTES: u32 = 30;
/// How far a reading may stray from the first minute's and still be flat.
const MAX_CHANGE: f64 = 0.10;
/// The last reading is taken this long (scaled) before the timeline's end, not on it, so it
/// cannot race the harness stopping the instances.
const LAST_READING_EARLY: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    match soak() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("soak: {e}");
            ExitCode::from(2)
        }
    }
}

fn soak() -> Result<bool, String> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let scale: f64 = match flag("--scale") {
        Some(s) => s
            .parse()
            .map_err(|_| format!("--scale {s}: not a number"))?,
        None => 1.0,
    };
    if !(scale.is_finite() && scale > 0.0) {
        return Err("--scale must be greater than zero".into());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the harness crate has no parent directory")?
        .to_path_buf();
    let failmode =
        flag("--failmode").map_or_else(|| root.join("target/release/failmode"), PathBuf::from);
    let minute = Duration::from_secs_f64(60.0 * scale);

    fs::create_dir_all(root.join("results")).map_err(|e| format!("results/: {e}"))?;
    let out_path = root.join("results/soak-failmode.out");
    let err_path = root.join("results/soak-failmode.err");
    let file = |p: &Path| fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut child = Command::new(&failmode)
        .current_dir(&root)
        .args([
            "run",
            "harness/benches/soak.toml",
            "--no-build",
            "--duration-scale",
        ])
        .arg(scale.to_string())
        .stdin(Stdio::null())
        .stdout(file(&out_path)?)
        .stderr(file(&err_path)?)
        .spawn()
        .map_err(|e| format!("{}: {e}", failmode.display()))?;
    let harness = child.id();
    println!(
        "soak: {} minutes of {:.0} s each; failmode run is pid {harness}, its output in {}",
        MINUTES,
        minute.as_secs_f64(),
        err_path.display()
    );

    // The clock starts when the first instance exists: the timeline starts a little later,
    // once they all answer, so each reading lands a little before its minute's mark, still in
    // the healthy quarter the scenario leaves there.
    let start = wait_for_instances(&mut child, harness)?;
    // A second apart in a full-length soak; scaled with its minutes, so the samples stay in
    // the healthy quarter of a shortened one too.
    let gap = Duration::from_secs(1).mul_f64(scale);
    let mut table = Table::default();
    for k in 1..=MINUTES {
        let mut at = minute * k;
        if k == MINUTES {
            at = at.saturating_sub(LAST_READING_EARLY.mul_f64(scale));
        }
        let first_sample = at.saturating_sub(gap * (SAMPLES - 1));
        sleep(first_sample.saturating_sub(start.elapsed()));
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!(
                "failmode run ended before minute {k} ({status}); see {}",
                err_path.display()
            ));
        }
        table.read(k, start.elapsed(), gap, harness);
    }

    let status = child.wait().map_err(|e| e.to_string())?;
    print!("{}", fs::read_to_string(&out_path).unwrap_or_default());
    let flat = table.verdict();
    if !status.success() {
        println!(
            "failmode run exited with {status}; see {}",
            err_path.display()
        );
        return Ok(false);
    }
    Ok(flat)
}

/// Waits until the harness has started a reference instance; returns that instant.
fn wait_for_instances(child: &mut Child, harness: u32) -> Result<Instant, String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!(
                "failmode run ended before any instance started ({status})"
            ));
        }
        if !instances(harness).is_empty() {
            return Ok(Instant::now());
        }
        sleep(Duration::from_millis(20));
    }
    Err("no reference instance after 120 s".into())
}

/// The reference instances among the harness's descendants, by pid. By executable rather
/// than by parentage alone: the harness also starts redis-server, Toxiproxy and `sh` guards.
fn instances(harness: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, ppid) in processes() {
        children.entry(ppid).or_default().push(pid);
    }
    let mut found = Vec::new();
    let mut todo = vec![harness];
    while let Some(pid) = todo.pop() {
        for &c in children.get(&pid).map_or(&[][..], Vec::as_slice) {
            todo.push(c);
            let exe = fs::read_link(format!("/proc/{c}/exe")).unwrap_or_default();
            if exe.file_name().is_some_and(|n| n == "failmode-reference") {
                found.push(c);
            }
        }
    }
    found.sort_unstable();
    found
}

/// Every process's (pid, parent pid).
fn processes() -> Vec<(u32, u32)> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The name in parentheses may hold spaces and parentheses itself: the fields that
        // follow start after the last ')'. They are the state, then the parent's pid.
        let rest = &stat[stat.rfind(')')? + 1..];
        let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
        Some((pid, ppid))
    })
    .collect()
}

#[derive(Clone, Copy, Debug)]
struct Reading {
    rss_kib: u64,
    fds: u64,
    /// Of the RSS, anonymous memory in transparent huge pages (`AnonHugePages`), if the kernel
    /// says: it moves in 2 MiB steps without any change in use, so a step that is all huge
    /// pages is not a leak.
    huge_kib: Option<u64>,
}

fn reading(pid: u32) -> Option<Reading> {
    let process = procfs::process::Process::new(i32::try_from(pid).ok()?).ok()?;
    let rss_kib = process.status().ok()?.vmrss?;
    let fds = process.fd_count().ok()? as u64;
    // smaps_rollup is one map: the whole address space's totals, in bytes.
    let huge_kib = process.smaps_rollup().ok().and_then(|rollup| {
        let total = rollup.memory_map_rollup.0.first()?;
        Some(*total.extension.map.get("AnonHugePages")? / 1024)
    });
    Some(Reading {
        rss_kib,
        fds,
        huge_kib,
    })
}

/// The readings by process: the harness first, then the instances in pid order.
#[derive(Debug, Default)]
struct Table {
    /// In the order of the columns.
    names: Vec<(u32, String)>,
    rows: Vec<BTreeMap<u32, Reading>>,
}

impl Table {
    fn read(&mut self, minute: u32, elapsed: Duration, gap: Duration, harness: u32) {
        let mut pids = vec![harness];
        pids.extend(instances(harness));
        if self.names.is_empty() {
            self.names.push((harness, "harness".into()));
            for (i, pid) in pids[1..].iter().enumerate() {
                self.names.push((*pid, format!("ref{i}")));
            }
            let mut header = "| minute | at (s) |".to_string();
            let mut rule = "|---:|---:|".to_string();
            for (_, name) in &self.names {
                header += &format!(" {name} RSS MiB | fds |");
                rule += "---:|---:|";
            }
            println!("{header}\n{rule}");
        }
        // Each process's least RSS and fds, and most huge pages, over the samples ending on
        // the minute.
        let mut per_pid: BTreeMap<u32, Reading> = BTreeMap::new();
        for sample in 0..SAMPLES {
            if sample > 0 {
                sleep(gap);
            }
            for &(pid, _) in &self.names {
                if let Some(r) = reading(pid) {
                    let l = per_pid.entry(pid).or_insert(r);
                    l.rss_kib = l.rss_kib.min(r.rss_kib);
                    l.fds = l.fds.min(r.fds);
                    l.huge_kib = l.huge_kib.max(r.huge_kib);
                }
            }
        }
        let mut row = BTreeMap::new();
        let end = elapsed + gap * (SAMPLES - 1);
        let mut line = format!("| {minute} | {:.0} |", end.as_secs_f64());
        for &(pid, _) in &self.names {
            match per_pid.get(&pid).copied() {
                Some(r) => {
                    // Huge pages only where there are some, so that a step in RSS lines up
                    // with them or not.
                    let huge = match r.huge_kib {
                        Some(h) if h > 0 => format!(" ({:.1} huge)", mib(h)),
                        _ => String::new(),
                    };
                    line += &format!(" {:.1}{huge} | {} |", mib(r.rss_kib), r.fds);
                    row.insert(pid, r);
                }
                None => line += " gone | gone |",
            }
        }
        for pid in pids
            .iter()
            .filter(|p| !self.names.iter().any(|(n, _)| n == *p))
        {
            line += &format!(" (new instance pid {pid}, not followed)");
        }
        println!("{line}");
        self.rows.push(row);
    }

    /// Prints each process's first and last readings and its largest change from the first;
    /// true if every process was read every minute and stayed within [`MAX_CHANGE`].
    fn verdict(&self) -> bool {
        let mut all_flat = self.rows.len() >= 2;
        println!(
            "\nAgainst minute 1 (flat: every later reading within {:.0} %):",
            MAX_CHANGE * 100.0
        );
        for (pid, name) in &self.names {
            let series: Vec<Reading> = self
                .rows
                .iter()
                .filter_map(|row| row.get(pid).copied())
                .collect();
            let (Some(first), Some(last)) = (series.first(), series.last()) else {
                println!("  {name}: never read");
                all_flat = false;
                continue;
            };
            let worst = |f: fn(&Reading) -> u64| {
                series
                    .iter()
                    .map(|r| change(f(first), f(r)))
                    .fold(0.0_f64, |w, c| if c.abs() > w.abs() { c } else { w })
            };
            let rss = worst(|r| r.rss_kib);
            let fds = worst(|r| r.fds);
            let huge = series.iter().filter_map(|r| r.huge_kib).max();
            let complete = series.len() == self.rows.len();
            let flat = complete && rss.abs() <= MAX_CHANGE && fds.abs() <= MAX_CHANGE;
            all_flat &= flat;
            println!(
                "  {name} (pid {pid}): RSS {:.1} → {:.1} MiB (largest change {:+.1} %; in huge pages at most {}), fds {} → {} ({:+.1} %){}: {}",
                mib(first.rss_kib),
                mib(last.rss_kib),
                rss * 100.0,
                huge.map_or("unknown".into(), |h| format!("{:.1} MiB", mib(h))),
                first.fds,
                last.fds,
                fds * 100.0,
                if complete { "" } else { ", missing readings" },
                if flat { "flat" } else { "NOT FLAT" },
            );
        }
        all_flat
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The relative change from `first` to `now`; any growth from zero counts as infinite.
fn change(first: u64, now: u64) -> f64 {
    if first == 0 {
        if now == 0 { 0.0 } else { f64::INFINITY }
    } else {
        (now as f64 - first as f64) / first as f64
    }
}
