//! `--attach`: a deployment started by hand on loopback (a redis-server, a Toxiproxy with a
//! proxy in front of it, two reference instances), which failmode runs a scenario against
//! without starting or stopping anything, and leaves as it found it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
use failmode::infra::toxiproxy::{Toxic, ToxicKind};
use failmode::run::progress::Say;
use failmode::run::world::undo_on;
use failmode::run::{RunError, RunOptions, run};
use failmode::scenario::Scenario;
use support::deployed::{ByHand, by_hand, by_hand_of};
use tokio_util::sync::CancellationToken;

const SCENARIO: &str = include_str!("fixtures/attach.toml");

fn options(scenario: &str, d: &ByHand, out: &std::path::Path) -> RunOptions {
    RunOptions {
        topology: failmode::run::Topology::Attached(d.deployment.clone()),
        ..support::run_options(Scenario::parse(scenario, "attached.toml").unwrap(), out)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_run_drives_the_deployment_and_leaves_it_as_it_was() {
    let mut d = by_hand().await;
    let pids: Vec<u32> = d.instances.iter().map(|i| i.process.pid()).collect();
    let redis_pid = d.redis.pid();
    let out = tempfile::tempdir().unwrap();
    let outcome = run(
        options(SCENARIO, &d, out.path()),
        CancellationToken::new(),
        &Say::default(),
    )
    .await
    .unwrap();
    let r = outcome.result;
    // The deployment's targets, not the scenario's.
    assert_eq!(r.targets.len(), 1);
    let t = &r.targets[0];
    assert_eq!((t.name.as_str(), t.instances), ("reference", 2));
    assert!(t.events.is_empty(), "{:?}", t.events);
    let fault = &t.phases[1];
    assert!(fault.faults_applied_at_s.is_some() && fault.faults_removed_at_s.is_some());
    // Its Redis cut through its own proxy: the reference decided locally, each of the two
    // instances giving acme half the limit: at least 40 a second, and nothing beyond the
    // limit and one window's slack at the phase's edges (one instance giving acme the whole
    // limit would be 100 a second). The slack, not a fixed rate: where the cut lands in a
    // window moves a request or two across the edge (CI measured 52.3/s once, 157 in 3 s).
    assert!(fault.fallbacks.unwrap() > 100.0, "{fault:?}");
    let acme = &fault.tenants[0];
    assert!(acme.admitted_per_s >= 40.0, "local share of 2: {acme:?}");
    assert_eq!(
        acme.over_admission_beyond_window,
        Some(0.0),
        "local share of 2: {acme:?}"
    );
    // INFO through the admin URL: the commands of the phases with Redis reachable.
    assert!(t.phases[0].store_commands.unwrap() > 100);
    assert_eq!(fault.store_commands, Some(0));

    // Nothing started or stopped, the proxy as it was: enabled, no toxic.
    for (i, pid) in d.instances.iter_mut().zip(pids) {
        assert_eq!(i.process.pid(), pid);
        assert!(
            i.process.try_exit().is_none(),
            "instance {} still runs",
            i.index
        );
    }
    assert_eq!(d.redis.pid(), redis_pid);
    let proxy = d.api.proxy("deployed-redis").await.unwrap();
    assert!(proxy.enabled && proxy.toxics.is_empty(), "{proxy:?}");
    drop(d.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_the_deployment_cannot_take_or_a_proxy_a_dead_run_left_is_refused_before_any_load()
{
    let d = by_hand().await;
    let out = tempfile::tempdir().unwrap();
    let stall = SCENARIO.replace(
        r#"faults = [{ type = "down" }, { type = "latency", latency_ms = 5 }]"#,
        r#"faults = [{ type = "stall" }]"#,
    );
    let e = run(
        options(&stall, &d, out.path()),
        CancellationToken::new(),
        &Say::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, RunError::NotAttachable { .. }), "{e}");
    assert!(e.to_string().contains("stall"), "{e}");

    // What a dead run leaves: its toxic and the proxy down, beside a toxic of someone else's.
    let latency = ToxicKind::Latency {
        latency_ms: 100,
        jitter_ms: 0,
    };
    d.api
        .add_toxic("deployed-redis", &Toxic::new("failmode-fault-0", latency))
        .await
        .unwrap();
    d.api
        .add_toxic("deployed-redis", &Toxic::new("theirs", latency))
        .await
        .unwrap();
    d.api.set_enabled("deployed-redis", false).await.unwrap();
    let e = run(
        options(SCENARIO, &d, out.path()),
        CancellationToken::new(),
        &Say::default(),
    )
    .await
    .unwrap_err();
    assert!(
        e.to_string().contains("faults reset --attach") && e.to_string().contains("disabled"),
        "{e}"
    );

    // `failmode faults reset --attach` removes what was failmode's and only that.
    let done = undo_on(&d.api, &["deployed-redis".to_owned()])
        .await
        .unwrap();
    assert_eq!(done.len(), 2, "{done:?}");
    let proxy = d.api.proxy("deployed-redis").await.unwrap();
    assert!(proxy.enabled);
    let names: Vec<&str> = proxy.toxics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["theirs"]);
}

/// The deployment's safety limit on latency: p99 above 250 ms for two seconds in a row.
const ABORT_ON_P99: &str = "\n[[abort]]\ntarget = \"timeout-only\"\nmetric = \"p99_ms\"\n\
                            max = 250\nfor = \"2s\"\n";

/// `attach-abort.toml` (a 20 s run, Redis's writes paused from 2 s to 18 s) attached to `d`:
/// asserts that the guard stopped it with exit 4 and a reason beginning with `reason`, wrote
/// the results marked aborted and partial, removed every fault and left the deployment's
/// instances running; returns the results and the second the guard named.
async fn aborted_run(d: &mut ByHand, reason: &str) -> (failmode::results::RunResult, u64) {
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    let deployment = d.dir.path().join("deployment.toml");
    let started = std::time::Instant::now();
    let run = support::run_fixture(
        &support::fixture_path("attach-abort.toml"),
        &folder,
        &["--attach", &deployment.to_string_lossy()],
    );
    let took = started.elapsed();
    let (stdout, stderr) = support::output_text(&run);
    assert_eq!(run.status.code(), Some(4), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("aborted by the abort guard: {reason}")),
        "{stderr}"
    );

    // Written, marked aborted with the reason, partial: the 20 s timeline stopped at about
    // 2 s of pause, 2 s of limit and the 1.5 s its requests take to settle.
    let r = failmode::results::RunResult::read(&folder).unwrap();
    assert!(r.partial);
    let aborted = r.aborted.clone().unwrap();
    assert!(aborted.starts_with(reason), "{aborted:?}");
    let at_s: u64 = aborted[reason.len()..]
        .split_once(" s")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no second in {aborted:?}"));
    assert!(r.duration_s < 8.0, "ran {} s", r.duration_s);
    assert!(took < std::time::Duration::from_secs(15), "took {took:?}");
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("aborted by the abort guard")),
        "{:?}",
        r.notes
    );
    assert_eq!(support::schema_errors(&folder), Vec::<String>::new());

    // Every fault removed: Redis takes a write at once (its pause had 12 s left), the proxy is
    // enabled, no toxic of ours; the deployment's instances still run (not failmode's to stop).
    let write = std::time::Instant::now();
    let mut redis = std::net::TcpStream::connect(d.redis.addr()).unwrap();
    redis
        .set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .unwrap();
    std::io::Write::write_all(&mut redis, b"SET failmode-probe 1\r\n").unwrap();
    let mut ok = [0u8; 5];
    std::io::Read::read_exact(&mut redis, &mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    assert!(
        write.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        write.elapsed()
    );
    let proxy = d.api.proxy("deployed-redis").await.unwrap();
    assert!(proxy.enabled);
    assert!(proxy.toxics.is_empty(), "{:?}", proxy.toxics);
    for i in &mut d.instances {
        assert!(
            i.process.try_exit().is_none(),
            "instance {} still runs",
            i.index
        );
    }
    (r, at_s)
}

fn phase<'a>(
    r: &'a failmode::results::RunResult,
    name: &str,
) -> &'a failmode::results::PhaseResult {
    r.targets[0].phases.iter().find(|p| p.name == name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_guard_crossed_removes_the_faults_stops_the_load_and_exits_4_with_the_reason() {
    // Fail-closed answers 5xx to every request while its Redis is paused: the limit the
    // scenario sets (its deployment file sets none).
    let mut d = by_hand_of("fail-closed", &[], "").await;
    assert!(d.deployment.abort.is_empty());
    let (r, _) = aborted_run(&mut d, "fail-closed: rate_5xx above 50.0 % for 2 s (at ").await;
    let fault = phase(&r, "fault");
    assert!(fault.all.counts.errors_5xx() > 0, "{fault:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_guard_on_p99_stops_a_run_whose_limiter_waits_out_every_paused_call() {
    // Without a breaker, every limiter call waits its 400 ms budget out while Redis's writes
    // are paused; with Redis healthy it answers in milliseconds. The limit is the deployment
    // file's; the scenario's on 5xx never bites, as the limiter falls back without one.
    let env = [("FAILMODE_STORE_TIMEOUT", "400ms")];
    let mut d = by_hand_of("timeout-only", &env, ABORT_ON_P99).await;
    let (r, at_s) = aborted_run(&mut d, "timeout-only: p99_ms above 250 ms for 2 s (at ").await;
    // Crossed in the fault's seconds, not before it.
    assert!(at_s >= 3, "at {at_s} s");
    let p99_ms = |name| phase(&r, name).all.latency_us.unwrap().p99 as f64 / 1000.0;
    assert!(p99_ms("fault") >= 250.0, "fault p99 {} ms", p99_ms("fault"));
    assert!(
        p99_ms("steady") < 250.0,
        "steady p99 {} ms",
        p99_ms("steady")
    );
}

#[test]
fn attach_with_infra_docker_is_refused_from_the_flags_naming_both() {
    let refused = support::failmode(&[
        "run",
        "slow-redis",
        "--attach",
        "no-such-deployment.toml",
        "--infra",
        "docker",
    ]);
    let (_, stderr) = support::output_text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--attach") && stderr.contains("--infra docker"),
        "{stderr}"
    );
    // Refused from the flags alone: neither the deployment file read nor the build asked of.
    assert!(!stderr.contains("no-such-deployment"), "{stderr}");
    assert!(!stderr.contains("--features docker"), "{stderr}");
}
