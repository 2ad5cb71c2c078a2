//! `just bench-loadgen`: the load engine against `oha` at the same fixed rates, side by side
//! against one loopback server, as a Markdown table.
//!
//! The server runs in this process, on a thread of its own; each generator runs as a child
//! process (this binary again, with `--child`), so what is measured is the generator alone:
//! - ours: `getrusage(RUSAGE_SELF)` of the child around the run (every thread of the engine
//!   and the recorder), and its peak RSS;
//! - oha: the child spawns oha and reads `getrusage(RUSAGE_CHILDREN)` once oha is reaped, its
//!   only child: oha's CPU and peak RSS, from the kernel, after the fact.
//!
//! Both send GET /api at the same total rate; ours as two tenants in a 3:1 split (uniform
//! arrivals, round robin over the one instance), oha as one stream (`-q`, with its latency
//! correction). The two latencies are not taken from the same instant: ours is from each
//! request's scheduled instant, its send lag included; oha's "correction" starts each
//! request's clock when its rate timer woke (`Instant::now()` after `sleep_until`, in oha
//! 1.16's `client.rs`), so its timer's lateness, however large (tokio's millisecond, or a
//! stall of the process), is left out, and only its queue behind busy connections is
//! counted. The table shows ours from the send too, which leaves out our lag as oha's leaves
//! out its timer's.
//!
//! Each generator runs `--runs` times per rate, interleaved, and each figure is the median of
//! the runs: the server shares the machine's cores, and one run alone is noisy. The table goes
//! to stdout and, from a run with the default flags, to `docs/bench-loadgen.md`, with the
//! date, revision, cores and load average. The highest rate the engine held (no drops, every
//! tenant within 0.5 %) is recorded as this machine's capacity in the user's cache, which a
//! run compares its scenario's rate with before it starts.
//!
//! Flags: `--secs N` (5) per run, `--runs N` (3), `--rates 100,1000,…` (100, 1000, 5000,
//! 10000, 20000, 40000), `--senders N` (the engine's sender threads; its own choice by rate without),
//! `--keys N` (acme's requests each draw one of N caller keys, as a population's do),
//! `--oha PATH` (`.tools/bin/oha`, else `oha` on the PATH).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "loadgen/server.rs"]
mod server;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use failmode::load::capacity::record_benchmark;
use failmode::load::{
    Arrival, Caller, Client, Keys, LoadPlan, Outcome, Recorder, Rotation, Sample, Senders, Spread,
    TargetPlan, TenantPlan, try_run,
};
use hdrhistogram::Histogram;
use nix::sys::resource::{UsageWho, getrusage};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The allocator `failmode` runs with (`harness/src/main.rs`): a bench is its own binary, so
/// without this the engine's children and the server in this process would run on glibc's
/// malloc, measuring CPU and memory no user's run has.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The tenants' shares of the total rate.
const SPLIT: [(&str, f64); 2] = [("acme", 0.75), ("globex", 0.25)];

/// A rate is held when no request is dropped and every tenant is sent within this share of
/// its rate (the bar).
const HELD_WITHIN_PERCENT: f64 = 0.5;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .map(|i| args[i + 1].clone())
    };
    match flag("--child").as_deref() {
        Some("engine") => child_engine(
            flag("--rate").unwrap().parse().unwrap(),
            secs(&flag),
            flag("--addr").unwrap().parse().unwrap(),
            senders(&flag),
            keys(&flag),
        ),
        Some("oha") => child_oha(
            &flag("--oha").unwrap(),
            flag("--rate").unwrap().parse().unwrap(),
            secs(&flag),
            flag("--addr").unwrap().parse().unwrap(),
        ),
        Some(other) => panic!("unknown child {other}"),
        None => parent(
            secs(&flag),
            (senders(&flag), keys(&flag)),
            flag("--runs").map_or(3, |r| r.parse().unwrap()),
            flag("--rates").map_or(
                vec![100.0, 1_000.0, 5_000.0, 10_000.0, 20_000.0, 40_000.0],
                |r| {
                    let mut rates: Vec<f64> = r.split(',').map(|x| x.parse().unwrap()).collect();
                    // The ceiling is read bottom up.
                    rates.sort_by(f64::total_cmp);
                    rates
                },
            ),
            flag("--oha").unwrap_or_else(default_oha),
            ["--secs", "--runs", "--rates", "--senders", "--keys"]
                .iter()
                .all(|f| flag(f).is_none()),
        ),
    }
}

fn secs(flag: &dyn Fn(&str) -> Option<String>) -> u64 {
    flag("--secs").map_or(5, |s| s.parse().unwrap())
}

/// `--senders N`: the engine's sender threads; its own choice ([`Senders::Auto`]) without.
fn senders(flag: &dyn Fn(&str) -> Option<String>) -> Senders {
    flag("--senders").map_or(Senders::Auto, |n| Senders::Fixed(n.parse().unwrap()))
}

/// `--keys N`: acme's requests each draw one of N caller keys (Zipf 1.0), as a scenario's
/// population's rest does; one key without.
fn keys(flag: &dyn Fn(&str) -> Option<String>) -> Option<usize> {
    flag("--keys").map(|n| n.parse().unwrap())
}

fn default_oha() -> String {
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/oha");
    if local.exists() {
        local.to_string_lossy().into_owned()
    } else {
        "oha".into()
    }
}

/// One generator's run, as a child reports it on stdout.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Report {
    /// Requests that got an answer or failed (not dropped), per tenant for ours.
    requests: Vec<u64>,
    dropped: u64,
    /// Of those, more than a second behind the schedule (ours); the rest hit the in-flight
    /// bound (1,000), which slow answers fill.
    dropped_behind: u64,
    not_2xx: u64,
    cpu_us: f64,
    /// Voluntary context switches: the generator's thread(s) going to sleep and waking.
    switches: u64,
    peak_rss_kib: u64,
    /// RSS 1 s into the run and at its end (ours only): memory must not grow with the run.
    rss_early_kib: u64,
    rss_end_kib: u64,
    send_lag_p50_us: u64,
    send_lag_p99_us: u64,
    latency_p99_us: u64,
    /// Ours only: from each request's actual send, as oha's clock starts at its timer's wake.
    latency_from_send_p99_us: u64,
}

/// The median of `values` (the mean of the middle two for an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Where the table is written: a page the docs link to, so that the table a reader sees is
/// always the one this benchmark wrote, never one copied by hand.
fn table_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/bench-loadgen.md")
}

/// The short revision, `-dirty` with uncommitted changes (the table then measured code no
/// commit holds).
fn git_revision() -> String {
    failmode::run::git_revision(Path::new(env!("CARGO_MANIFEST_DIR"))).map_or_else(
        || "unknown".into(),
        |rev| {
            let (hash, dirty) = rev.split_at(rev.find('-').unwrap_or(rev.len()));
            format!("{}{dirty}", &hash[..hash.len().min(7)])
        },
    )
}

/// `published`: the run is the benchmark's own (the default rates, length and runs), whose
/// table the docs show.
fn parent(
    secs: u64,
    (senders, keys): (Senders, Option<usize>),
    runs: usize,
    rates: Vec<f64>,
    oha: String,
    published: bool,
) {
    assert!(runs > 0, "--runs must be at least 1");
    let version = Command::new(&oha).arg("--version").output().map_or_else(
        |e| panic!("{oha}: {e} (run `just bench-loadgen`, which installs it)"),
        |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
    );
    let addr = server::start_server();
    let me = std::env::current_exe().unwrap();
    let run_child = |which: &str, rate: f64| -> Report {
        let mut child = Command::new(&me);
        if let Senders::Fixed(n) = senders {
            child.args(["--senders", &n.to_string()]);
        }
        if let Some(n) = keys {
            child.args(["--keys", &n.to_string()]);
        }
        let out = child
            .args(["--child", which, "--rate", &rate.to_string()])
            .args([
                "--secs",
                &secs.to_string(),
                "--addr",
                &addr.to_string(),
                "--oha",
                &oha,
            ])
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "{which} child failed at {rate} req/s");
        serde_json::from_slice(&out.stdout).unwrap()
    };

    let mut out = String::new();
    let mut line = |text: String| {
        println!("{text}");
        out.push_str(&text);
        out.push('\n');
    };
    line("# The load engine against oha (written by `just bench-loadgen`)\n".into());
    line(format!(
        "{}, revision {}: failmode's load engine vs {version}, {secs} s per run, {runs} runs per \
         generator and rate (each figure the median of the runs), GET /api on one loopback \
         server in the bench's process, {} cores, load average {} at the start{}.\n",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        git_revision(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
        keys.map_or_else(String::new, |n| format!(
            "; acme's requests each draw one of {n} caller keys (Zipf 1.0)"
        ))
    ));
    line(
        "| total req/s | rate error acme / globex | dropped: failmode (most in a run; behind schedule) | send lag p50 / p99 | latency p99: failmode from the schedule / from the send; oha from its timer's wake | CPU per request: failmode / oha | sleeps per request: failmode / oha | peak RSS: failmode / oha | failmode RSS at 1 s → end |"
            .into(),
    );
    line("|---:|---|---:|---|---|---|---|---|---|".into());
    let mut notes = Vec::new();
    // The highest rate held, and every rate below it held too: one that holds above a rate
    // that failed is the machine's noise, not a ceiling.
    let mut ceiling: Option<f64> = None;
    let mut failed_below = false;
    for rate in rates {
        // Interleaved, each first in turn, so that whatever else the machine does falls on
        // both alike.
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for run in 0..runs {
            if run % 2 == 0 {
                ours.push(run_child("engine", rate));
                theirs.push(run_child("oha", rate));
            } else {
                theirs.push(run_child("oha", rate));
                ours.push(run_child("engine", rate));
            }
        }
        let med = |reports: &[Report], figure: &dyn Fn(&Report) -> f64| {
            median(reports.iter().map(figure).collect())
        };
        let error = |i: usize| {
            move |r: &Report| {
                let planned = rate * SPLIT[i].1;
                (r.requests[i] as f64 / secs as f64 / planned - 1.0) * 100.0
            }
        };
        let per = |x: fn(&Report) -> f64| {
            move |r: &Report| x(r) / r.requests.iter().sum::<u64>().max(1) as f64
        };
        let cpu = per(|r| r.cpu_us);
        let sleeps = per(|r| r.switches as f64);
        let ms = |x: fn(&Report) -> u64| move |r: &Report| x(r) as f64 / 1e3;
        let mib = |x: fn(&Report) -> u64| move |r: &Report| x(r) as f64 / 1024.0;
        let cpu_ratio = med(&ours, &cpu) / med(&theirs, &cpu);
        let held = med(&ours, &|r| r.dropped as f64) == 0.0
            && (0..SPLIT.len()).all(|i| med(&ours, &error(i)).abs() <= HELD_WITHIN_PERCENT);
        if held && !failed_below {
            ceiling = Some(ceiling.map_or(rate, |c: f64| c.max(rate)));
        } else {
            failed_below = true;
        }
        line(format!(
            "| {rate:.0} | {:+.2} % / {:+.2} % | {} ({}) | {:.3} / {:.3} ms | {:.3} / {:.3}; {:.3} ms | {:.1} / {:.1} µs (**{cpu_ratio:.2}×**) | {:.2} / {:.2} | {:.1} / {:.1} MiB | {:.1} → {:.1} MiB |",
            med(&ours, &error(0)),
            med(&ours, &error(1)),
            ours.iter().map(|r| r.dropped).max().unwrap_or(0),
            ours.iter()
                .max_by_key(|r| r.dropped)
                .map_or(0, |r| r.dropped_behind),
            med(&ours, &ms(|r| r.send_lag_p50_us)),
            med(&ours, &ms(|r| r.send_lag_p99_us)),
            med(&ours, &ms(|r| r.latency_p99_us)),
            med(&ours, &ms(|r| r.latency_from_send_p99_us)),
            med(&theirs, &ms(|r| r.latency_p99_us)),
            med(&ours, &cpu),
            med(&theirs, &cpu),
            med(&ours, &sleeps),
            med(&theirs, &sleeps),
            med(&ours, &mib(|r| r.peak_rss_kib)),
            med(&theirs, &mib(|r| r.peak_rss_kib)),
            med(&ours, &mib(|r| r.rss_early_kib)),
            med(&ours, &mib(|r| r.rss_end_kib)),
        ));
        for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            if a.not_2xx > 0 {
                notes.push(format!(
                    "at {rate} req/s, run {}: failmode got {} answers other than 2xx",
                    k + 1,
                    a.not_2xx
                ));
            }
            if b.dropped + b.not_2xx > 0 {
                notes.push(format!(
                    "at {rate} req/s, run {}: oha counted {} errors (requests cut at its \
                     deadline among them) and {} answers other than 2xx",
                    k + 1,
                    b.dropped,
                    b.not_2xx
                ));
            }
        }
    }
    line(format!(
        "\nCPU: user + system time of the generator's process (the server excluded) over the \
         requests answered; failmode ÷ oha in bold (of the medians), ≤ 1 is the goal. Sleeps: voluntary context switches per request. Rate error: requests sent per \
         tenant within the run ÷ planned. Dropped: requests failmode did not send in \
         the run that dropped most: its in-flight bound of 1,000 (which answers slower than \
         1,000 ÷ the rate fill), or more than a second behind its schedule (in brackets). \
         Load average at the end: \
         {}.",
        load_average()
    ));
    for note in notes {
        line(format!("- {note}"));
    }
    line(String::new());
    line(held_up_to(ceiling));
    if published {
        record_ceiling(ceiling);
    } else {
        eprintln!("the ceiling is not recorded: only a run with the default flags records it");
    }
    if published {
        let path = table_path();
        std::fs::write(&path, out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("written to {}", path.display());
    } else {
        eprintln!("not written to the docs: only a run with the default flags is published");
    }
}

/// The table's last line: the highest rate the engine held.
fn held_up_to(ceiling: Option<f64>) -> String {
    match ceiling {
        None => format!(
            "No rate held (no drops, every tenant within {HELD_WITHIN_PERCENT} % of its rate)."
        ),
        Some(ceiling) => format!(
            "The engine's ceiling here: {ceiling:.0} req/s, the highest rate tried that it held \
             (no drops and every tenant within {HELD_WITHIN_PERCENT} % of its rate, in the \
             median run) with every lower rate held too. A run of the benchmark's own records \
             it as this machine's capacity in the user's cache (`capacity.json`): a run asking \
             more is warned before it starts."
        ),
    }
}

/// Records the engine's ceiling in the user's cache, where a run compares its scenario's rate
/// with it before it starts (`failmode::load::capacity`). A lower bound: the next rate tried
/// failed, or none higher was tried.
fn record_ceiling(ceiling: Option<f64>) {
    let Some(ceiling) = ceiling else {
        eprintln!("nothing recorded as this machine's capacity: no rate held");
        return;
    };
    let how = format!(
        "just bench-loadgen at revision {}, {}",
        git_revision(),
        humantime::format_rfc3339_seconds(std::time::SystemTime::now())
    );
    match failmode::infra::programs::cache_dir()
        .ok_or_else(|| "no home folder".to_owned())
        .and_then(|dir| record_benchmark(&dir, ceiling, how).map_err(|e| e.to_string()))
    {
        Ok(file) => eprintln!(
            "{ceiling:.0} req/s recorded as this machine's capacity in {}",
            file.display()
        ),
        Err(e) => eprintln!("the ceiling could not be recorded: {e}"),
    }
}

/// The 1-minute load average: anything else running on the machine shows in every figure.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

/// Counts and histograms only: constant memory, as the harness's own recorder.
struct Tally {
    requests: Vec<AtomicU64>,
    dropped: AtomicU64,
    not_2xx: AtomicU64,
    /// Send lag, latency from the schedule, latency from the send.
    histograms: Mutex<(Histogram<u64>, Histogram<u64>, Histogram<u64>)>,
    duration: Duration,
}

impl Recorder for Tally {
    fn record_repeated(&self, s: &Sample, n: u64) {
        match s.outcome {
            Outcome::Dropped(_) => {
                self.dropped.fetch_add(n, Ordering::Relaxed);
                return;
            }
            Outcome::Admitted => {}
            _ => {
                self.not_2xx.fetch_add(n, Ordering::Relaxed);
            }
        }
        // Sent within the run: a generator falling behind would push sends past its end.
        if s.scheduled + s.send_lag < self.duration {
            self.requests[s.tenant].fetch_add(n, Ordering::Relaxed);
        }
        let mut h = self.histograms.lock().unwrap();
        h.0.saturating_record_n(s.send_lag.as_micros() as u64, n);
        h.1.saturating_record_n(s.latency.as_micros() as u64, n);
        h.2.saturating_record_n(s.service_time.as_micros() as u64, n);
    }
}

fn child_engine(rate: f64, secs: u64, addr: SocketAddr, senders: Senders, keys: Option<usize>) {
    let duration = Duration::from_secs(secs);
    let caller = |name: &str| match keys {
        Some(n) if name == "acme" => {
            let weights = (1..=n).map(|k| 1.0 / k as f64).collect();
            Caller::Drawn(Arc::new(Keys::new("user-".into(), 1, weights).unwrap()))
        }
        _ => Caller::Key(name.into()),
    };
    let plan = LoadPlan {
        targets: vec![TargetPlan {
            name: "bench".into(),
            instances: Rotation::new([addr]),
            path: "/api".into(),
            caller: failmode::identity::CallerIdentity::Header {
                header: "x-caller".into(),
            },
            connections: failmode::load::Connections::default(),
        }],
        tenants: SPLIT
            .iter()
            .map(|&(name, share)| TenantPlan {
                name: name.into(),
                caller: caller(name),
                rate_per_s: rate * share,
                arrival: Arrival::Uniform,
                spread: Spread::RoundRobin,
                client: Client::None,
            })
            .collect(),
        duration,
        seed: 1,
        request_timeout: Duration::from_secs(2),
        max_in_flight_per_target: 1_000,
        role: failmode::load::Role::Sender(failmode::load::Share::WHOLE),
        senders,
    };
    let tally = Arc::new(Tally {
        requests: SPLIT.iter().map(|_| AtomicU64::new(0)).collect(),
        dropped: AtomicU64::new(0),
        not_2xx: AtomicU64::new(0),
        histograms: Mutex::new((
            Histogram::new_with_bounds(1, 60_000_000, 3).unwrap(),
            Histogram::new_with_bounds(1, 60_000_000, 3).unwrap(),
            Histogram::new_with_bounds(1, 60_000_000, 3).unwrap(),
        )),
        duration,
    });
    // The caller's side is a current-thread runtime parked on the result, as the harness's.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = cpu_us(UsageWho::RUSAGE_SELF);
    let switches_before = switches(UsageWho::RUSAGE_SELF);
    let start = Instant::now() + Duration::from_millis(20);
    let (summary, rss_early_kib) = runtime.block_on(async {
        let run = try_run(plan, start, tally.clone(), CancellationToken::new());
        let early = async {
            tokio::time::sleep_until((start + Duration::from_secs(1)).into()).await;
            rss_kib()
        };
        tokio::join!(run, early)
    });
    let summary = summary.unwrap();
    let cpu = cpu_us(UsageWho::RUSAGE_SELF) - before;
    let switches_during = switches(UsageWho::RUSAGE_SELF) - switches_before;
    let h = tally.histograms.lock().unwrap();
    let report = Report {
        requests: tally
            .requests
            .iter()
            .map(|r| r.load(Ordering::Relaxed))
            .collect(),
        dropped: summary.dropped,
        dropped_behind: summary.dropped_by_cause.backlog,
        not_2xx: tally.not_2xx.load(Ordering::Relaxed),
        cpu_us: cpu,
        switches: switches_during,
        peak_rss_kib: getrusage(UsageWho::RUSAGE_SELF).unwrap().max_rss() as u64,
        rss_early_kib,
        rss_end_kib: rss_kib(),
        send_lag_p50_us: h.0.value_at_quantile(0.5),
        send_lag_p99_us: h.0.value_at_quantile(0.99),
        latency_p99_us: h.1.value_at_quantile(0.99),
        latency_from_send_p99_us: h.2.value_at_quantile(0.99),
    };
    println!("{}", serde_json::to_string(&report).unwrap());
}

fn child_oha(oha: &str, rate: f64, secs: u64, addr: SocketAddr) {
    let before = cpu_us(UsageWho::RUSAGE_CHILDREN);
    let switches_before = switches(UsageWho::RUSAGE_CHILDREN);
    let out = Command::new(oha)
        .args([
            "--no-tui",
            "--latency-correction",
            "--output-format",
            "json",
        ])
        .args(["-q", &rate.to_string(), "-z", &format!("{secs}s")])
        .args(["-H", "x-caller: acme"])
        .arg(format!("http://{addr}/api"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "oha failed");
    let reaped = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let count = |key: &str| -> u64 {
        json[key]
            .as_object()
            .map_or(0, |m| m.values().filter_map(|v| v.as_u64()).sum())
    };
    let ok = json["statusCodeDistribution"]["200"].as_u64().unwrap_or(0);
    let answered = count("statusCodeDistribution");
    let latency_p99_s = json["latencyPercentiles"]["p99"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let report = Report {
        requests: vec![answered],
        dropped: count("errorDistribution"),
        not_2xx: answered - ok,
        cpu_us: cpu_us(UsageWho::RUSAGE_CHILDREN) - before,
        switches: switches(UsageWho::RUSAGE_CHILDREN) - switches_before,
        peak_rss_kib: reaped.max_rss() as u64,
        latency_p99_us: (latency_p99_s * 1e6) as u64,
        ..Report::default()
    };
    println!("{}", serde_json::to_string(&report).unwrap());
}

fn switches(who: UsageWho) -> u64 {
    getrusage(who).unwrap().voluntary_context_switches() as u64
}

fn cpu_us(who: UsageWho) -> f64 {
    let u = getrusage(who).unwrap();
    let us = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e6 + t.tv_usec() as f64;
    us(u.user_time()) + us(u.system_time())
}

fn rss_kib() -> u64 {
    procfs::process::Process::myself()
        .and_then(|me| me.status())
        .ok()
        .and_then(|status| status.vmrss)
        .unwrap_or(0)
}
