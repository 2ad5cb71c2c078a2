//! `failmode check TARGET`: a doctor for a new target. It starts the target as a run would
//! (its build step, a healthy redis-server of its own, its instances with every placeholder
//! filled), sends a few seconds of paced traffic from two callers, and says in plain words
//! what is wrong before any chaos, each failure with its fix:
//!
//! 1. **ready**: every instance answers its readiness path on `{port}`; else the process's
//!    exit status, or where it listens instead, and its log's last lines;
//! 2. **limits at `{limit}`**: a caller over the limit is admitted about the limit per window
//!    (the band is explained in `verdict`); none refused is "not limiting";
//! 3. **per caller**: a second caller under its limit is not refused while the first is over
//!    it (else the caller header is ignored: tenants limited together);
//! 4. **refusal status**: refusals come with the manifest's `refuses_with` (429 by default);
//! 5. **uses `{redis_url}`**: its Redis saw commands during the traffic (`INFO commandstats`).
//!
//! Redis is reached directly, without Toxiproxy: nothing is broken during a check, and a
//! proxy would only add a process. Exit 0 when everything passes, 1 when the target runs but
//! misbehaves, 2 on bad input (unknown target, broken manifest, a program that cannot start),
//! 130 when interrupted; every child is stopped on every path.

pub mod probe;
pub mod verdict;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use probe::{Measured, Plan};
use verdict::{Finding, Status};

use super::signals::Signals;
use crate::infra::redis::commands_executed;
use crate::infra::{InfraError, RedisServer};
use crate::project::Project;
use crate::targets::{Fleet, FleetLaunch, ManifestError, TargetDef, TargetError};

/// The limit a check starts the target with unless `--limit` says otherwise: small, so a
/// check sends little, and not a round number a service might have as its own default.
pub const DEFAULT_LIMIT: u32 = 10;
/// The window unless `--window`: one second keeps the whole check to about seven.
pub const DEFAULT_WINDOW: &str = "1s";
/// The longest window a check waits through (the check lasts six of them).
const LONGEST_WINDOW: Duration = Duration::from_secs(60);
/// The most requests per second a check sends: a doctor's visit, not a load test.
const FASTEST_RATE: f64 = 2_000.0;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// A target's name (`failmode list`: the project's, the checkout's or a built-in one) or
    /// the path of a manifest declaring one variant.
    pub target: String,
    /// Instances to start ({instance_count}). Default: the manifest's default_instances.
    #[arg(long)]
    pub instances: Option<u32>,
    /// Requests per caller per window the target is started with ({limit}).
    #[arg(long, default_value_t = DEFAULT_LIMIT)]
    pub limit: u32,
    /// The window of the limit ({window_ms}, {window_s}); humantime: 1s, 500ms.
    #[arg(long, default_value = DEFAULT_WINDOW, value_parser = humantime::parse_duration)]
    pub window: Duration,
    /// Skip the target's build command (it must already be built).
    #[arg(long)]
    pub no_build: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    // Boxed: a target's errors carry its log's tail, and this error is returned often.
    #[error(transparent)]
    Target(#[from] Box<TargetError>),
    #[error("the check's redis-server: {0}")]
    Redis(InfraError),
    #[error("cannot prepare the check's log folder {path}: {source}")]
    Logs {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// How a check ended, as an exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Healthy,
    Misbehaves,
    Interrupted,
}

impl Verdict {
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Healthy => 0,
            Self::Misbehaves => 1,
            Self::Interrupted => 130,
        }
    }
}

/// Runs the check of `args.target`, printing each finding as it comes.
pub async fn check(project: &Project, args: &CheckArgs) -> Result<Verdict, CheckError> {
    let def = project.find_target(&args.target)?;
    let plan = plan(&def, args)?;
    let log_dir = fresh_log_dir(project, &def)?;
    let mut signals = Signals::new();
    if !args.no_build {
        if let Some(command) = &def.build {
            println!("building {}: {}", def.name, command.join(" "));
        }
        let build = crate::targets::build(std::slice::from_ref(&def), project.root());
        tokio::select! {
            built = build => built.map_err(Box::new)?,
            _ = signals.next() => return Ok(Verdict::Interrupted),
        }
    }
    let mut redis = RedisServer::start("redis-check", &log_dir)
        .await
        .map_err(CheckError::Redis)?;
    let whose = if def.limit.is_some() {
        "its own [limit]"
    } else {
        "{limit}"
    };
    println!(
        "checking {} ({}): {} instance{}, limit {} per {} window ({whose}), callers by {}, its \
         own Redis at {}; logs in {}",
        def.name,
        def.manifest.display(),
        plan.instances,
        if plan.instances == 1 { "" } else { "s" },
        plan.limit,
        humantime::format_duration(plan.window),
        def.caller,
        redis.url(),
        log_dir.display()
    );
    let root = def.dir.clone().unwrap_or_else(|| project.root().to_owned());
    let examined = tokio::select! {
        // Dropped on a signal: the instances it started are killed with their process groups.
        found = examine(&def, &plan, (args.limit, args.window), &redis, &root, &log_dir) => Some(found),
        _ = signals.next() => None,
    };
    let _ = redis.stop().await;
    let Some(findings) = examined.transpose()? else {
        println!("interrupted: every instance and the redis-server stopped");
        return Ok(Verdict::Interrupted);
    };
    let failed = findings.iter().filter(|f| f.status == Status::Fail).count();
    let unchecked = findings
        .iter()
        .filter(|f| f.status == Status::Skipped)
        .count();
    if failed == 0 && unchecked == 0 {
        println!("all {} checks pass", findings.len());
        return Ok(Verdict::Healthy);
    }
    // A check that could not be made proves nothing: the target is not given a clean bill.
    let mut tally = Vec::new();
    if failed > 0 {
        tally.push(format!("{failed} of {} checks fail", findings.len()));
    }
    if unchecked > 0 {
        tally.push(format!(
            "{unchecked} of {} could not be checked",
            findings.len()
        ));
    }
    println!("{}; logs in {}", tally.join(", "), log_dir.display());
    Ok(Verdict::Misbehaves)
}

/// The check's traffic for this target and these flags, refused when it would not be quick.
fn plan(def: &TargetDef, args: &CheckArgs) -> Result<Plan, CheckError> {
    let input = |m: String| Err(CheckError::Input(m));
    if args.limit == 0 {
        return input("--limit must be at least 1".into());
    }
    let instances = args.instances.unwrap_or(def.default_instances);
    if instances == 0 {
        return input("--instances must be at least 1".into());
    }
    // A service that declares the limit it enforces is measured against that one; the flags
    // then only fill the placeholders.
    let (requests, window, whose) = match def.limit {
        Some(own) => (
            own.requests,
            own.window,
            format!("[limit] in {}", def.manifest.display()),
        ),
        None => (
            u64::from(args.limit),
            args.window,
            "--limit/--window".to_owned(),
        ),
    };
    if window.is_zero() || window > LONGEST_WINDOW {
        return input(format!(
            "the window of {whose} ({}) must be longer than zero and at most {}: a check lasts \
             six windows",
            humantime::format_duration(window),
            humantime::format_duration(LONGEST_WINDOW)
        ));
    }
    // Counted in f64: a declared limit may be far beyond what u32 arithmetic holds.
    let per_window = requests as f64 * f64::from(instances.saturating_add(2).max(3));
    let rate = per_window / window.as_secs_f64();
    if rate > FASTEST_RATE {
        return input(format!(
            "{requests} per {} ({whose}) with {instances} instance(s) would have the check send \
             {rate:.0} requests a second (at most {FASTEST_RATE:.0}): check with a smaller \
             limit or a longer window",
            humantime::format_duration(window),
        ));
    }
    // Below FASTEST_RATE × LONGEST_WINDOW, so every count of the plan fits in u32.
    let plan = Plan {
        limit: u32::try_from(requests).unwrap_or(u32::MAX),
        window,
        instances,
    };
    debug_assert_eq!(f64::from(plan.over_per_window()), per_window);
    Ok(plan)
}

/// `<results>/check/<target>/`, emptied: the logs of the last check of each target.
fn fresh_log_dir(project: &Project, def: &TargetDef) -> Result<PathBuf, CheckError> {
    let dir = project.results_dir().join("check").join(&def.name);
    let error = |source| CheckError::Logs {
        path: dir.clone(),
        source,
    };
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(error(e)),
        _ => {}
    }
    std::fs::create_dir_all(&dir).map_err(error)?;
    Ok(dir)
}

/// Starts the instances, probes them and stops them; returns every finding, printed.
async fn examine(
    def: &TargetDef,
    plan: &Plan,
    // {limit} and {window_ms}: the plan's unless the manifest declares a limit of its own.
    (limit, window): (u32, Duration),
    redis: &RedisServer,
    root: &Path,
    log_dir: &Path,
) -> Result<Vec<Finding>, CheckError> {
    let http = crate::targets::loopback_client();
    let launch = FleetLaunch {
        root: root.to_owned(),
        log_dir: log_dir.to_owned(),
        redis_url: redis.url(),
        sentinel: None,
        limit: f64::from(limit),
        window,
    };
    let began = Instant::now();
    let (fleet, started) = Fleet::start(def, launch, plan.instances, &http).await;
    let findings = match started {
        Ok(()) => {
            let ready = verdict::ready(def, plan.instances, began.elapsed());
            print!("{}", ready.render());
            Ok(std::iter::once(ready)
                .chain(probe(def, plan, redis, &fleet, &http).await)
                .collect())
        }
        Err(e) => match verdict::not_ready(def, &e) {
            Some(not_ready) => {
                let rest = Finding {
                    status: Status::Skipped,
                    line: "limit, per caller, refusal status, Redis: not checked (not ready)"
                        .to_owned(),
                    detail: Vec::new(),
                    fix: None,
                };
                print!("{}{}", not_ready.render(), rest.render());
                Ok(vec![not_ready, rest])
            }
            None => Err(Box::new(e).into()),
        },
    };
    fleet.stop().await;
    findings
}

/// The traffic and what it shows, on instances that are ready.
async fn probe(
    def: &TargetDef,
    plan: &Plan,
    redis: &RedisServer,
    fleet: &Fleet,
    http: &reqwest::Client,
) -> Vec<Finding> {
    if let Some(line) = def.warm_up.announce(&def.name) {
        println!("{line}");
    }
    let instances: Vec<_> = fleet.running().iter().map(|i| (i.index, i.addr)).collect();
    let warmed =
        crate::targets::warm_up::warm_up(def.warm_up, def.warm_up_aim(), &instances, http).await;
    if let Some(line) = warmed.summary(&def.name) {
        println!("{line}");
    }
    if let Some(trouble) = warmed.trouble() {
        println!("{}: {trouble}", def.name);
    }
    // The warm-up's admissions stay in the limiter's window a while (a sliding window weighs
    // the window before too). A limiter that counts callers together, which this check exists
    // to catch, counted them against caller A's budget: measured at once, A was admitted 7-8
    // a window of 9, and the budget left over let caller B through, hiding the finding.
    let settle = plan.window * 2;
    println!(
        "waiting {} for the warm-up to leave the limiter's counts …",
        humantime::format_duration(settle)
    );
    tokio::time::sleep(settle).await;
    let addrs: Vec<_> = fleet.running().iter().map(|i| i.addr).collect();
    let before = commands(redis).await;
    println!(
        "sending {} requests from two callers over {} …",
        plan.requests(),
        humantime::format_duration(plan.duration())
    );
    let measured: Measured = probe::measure(def, &addrs, plan).await;
    let after = commands(redis).await;
    let used = before.and_then(|b| after.map(|a| a.saturating_sub(b)));
    let findings = vec![
        verdict::limit(def, plan, &measured.over),
        verdict::per_caller(def, &measured),
        verdict::refusal_status(def, &measured.over),
        verdict::redis(def, used, measured.requests()),
    ];
    for f in &findings {
        print!("{}", f.render());
    }
    findings
}

/// Commands the Redis has run, its `INFO` (failmode's own) left out.
async fn commands(redis: &RedisServer) -> Result<u64, String> {
    let info = redis
        .info("commandstats")
        .await
        .map_err(|e| e.to_string())?;
    Ok(commands_executed(&info))
}
