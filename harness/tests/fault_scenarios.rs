//! The shipped scenarios of the faults inside Redis (`redis-restart`, `client-pause`,
//! `noisy-neighbour`, `eviction`, and the error replies `redis-oom`, `redis-readonly`,
//! `redis-busy`, `script-flush`), of the topology (`sticky-tenant`) and of the clients
//! (`retry-storm`), each scaled down and run by the harness on the reference and a policy or
//! two beside it, asserting the outcome `scenarios/README.md` states; and `flapping` at full
//! length on the reference alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use failmode::results::RunResult;
use failmode::results::read::SeriesRow;
use support::shipped::{reports, run_at};
use support::tenant_in;

/// A fifth of each timeline: 2 s steady, 6 s of fault, 3 s after.
const SCALE: f64 = 0.2;

async fn run_scaled(name: &str, targets: &[&str]) -> (RunResult, Vec<SeriesRow>) {
    run_at(name, targets, SCALE).await
}

/// The quiet failure: Redis answers every call, with no error reply, and forgets the counters.
/// Redis's own count of error replies (INFO errorstats) is the measure of "no error": the
/// reference, which falls back on a slow call, answers no error in any phase; fail-closed,
/// which answers 500 on any store trouble, still lets acme through. Fail-closed's 500s are not
/// counted here: its 20 ms budget also fails when the machine stalls, which no fault causes (a
/// CI run saw 6 of 870 in the fault phase and 1 % after it, with no error reply from Redis).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_lets_acme_through_with_no_error_reply_from_redis_nor_error_from_the_reference() {
    let (r, _) = run_scaled("eviction", &["reference", "fail-closed"]).await;
    for target in ["reference", "fail-closed"] {
        let acme = tenant_in(&r, target, "fault", "acme");
        // Its counters are evicted as fast as they are written: nearly all of acme passes.
        assert!(acme.over_admission.unwrap() > 1.0, "{target}: {acme:?}");
        let evicted = reports(&r, target);
        assert!(
            evicted.iter().any(|d| d.contains("keys evicted")),
            "{evicted:?}"
        );
        let replies = error_replies(&r, target);
        assert!(
            replies.ends_with(": none (INFO errorstats)"),
            "{target}: {replies}"
        );
    }
    for phase in ["steady", "fault", "recovery"] {
        let all = tenant_in(&r, "reference", phase, "all");
        assert_eq!(
            all.counts.server_error + all.counts.unavailable + all.counts.transport_error,
            0,
            "reference {phase}: no error anywhere: {all:?}"
        );
    }
}

/// What a restart at `pos` (0..1) into a window adds to a tenant sending `rate` a second
/// (uniformly) over a limit that admits `per_window` a window in steady overload, under the
/// sliding-window counter, against what it would have got. In steady overload the window's
/// count grows as `per_window * pos` (the previous window's count decays), so that much is
/// already in. For `down` seconds nothing answers and every instance decides by its local
/// share, fresh, admitting what arrives. Then both counts are gone: the rest of the window
/// admits `min(per_window, rate * (1 - pos - down))`. Every later window ends at
/// `per_window` again. With no down time: zero at a window's edges, and at most
/// `per_window * (1 - per_window / rate)`.
fn restart_burst(pos: f64, down: f64, per_window: f64, rate: f64) -> f64 {
    let rest = (1.0 - pos - down).max(0.0);
    (per_window * pos + rate * down + per_window.min(rate * rest) - per_window).max(0.0)
}

/// [`restart_burst`] when what was admitted during the down time is counted on the new
/// server: it takes room from the rest of the window rather than adding to it.
fn restart_burst_counted(pos: f64, down: f64, per_window: f64, rate: f64) -> f64 {
    let rest = (1.0 - pos - down).max(0.0);
    let during = rate * down;
    (per_window * pos + during + (per_window - during).max(0.0).min(rate * rest) - per_window)
        .max(0.0)
}

#[test]
fn a_restart_adds_nothing_at_a_windows_edge_and_most_where_the_rest_just_holds_a_limit() {
    // Counted on the new server, the down time adds nothing while the rest has room.
    assert!((restart_burst_counted(0.2, 0.05, 50.0, 120.0) - 10.0).abs() < 1e-9);
    assert!(restart_burst_counted(0.2, 0.05, 50.0, 120.0) < restart_burst(0.2, 0.05, 50.0, 120.0));
    assert_eq!(restart_burst(0.0, 0.0, 50.0, 120.0), 0.0);
    assert!(restart_burst(1.0, 0.0, 50.0, 120.0).abs() < 1e-9);
    let peak = 1.0 - 50.0 / 120.0;
    assert!((restart_burst(peak, 0.0, 50.0, 120.0) - 50.0 * peak).abs() < 1e-9);
    assert!(restart_burst(0.3, 0.0, 50.0, 120.0) < restart_burst(peak, 0.0, 50.0, 120.0));
    assert!(restart_burst(0.9, 0.0, 50.0, 120.0) < restart_burst(peak, 0.0, 50.0, 120.0));
    // While Redis is down the local share lets the arrivals through.
    assert!((restart_burst(0.2, 0.05, 50.0, 120.0) - (10.0 + 6.0)).abs() < 1e-9);
}

/// The number after `label` in a fault's report.
fn reported(report: &str, label: &str) -> f64 {
    report
        .split(label)
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} in {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_admits_what_the_lost_counts_held_back_then_limits_again() {
    let (r, series) = run_scaled("redis-restart", &["reference"]).await;
    let restarted = reports(&r, "reference");
    let report = restarted
        .iter()
        .find(|d| d.contains("started again empty"))
        .unwrap_or_else(|| panic!("{restarted:?}"));
    // The scenario's window is 1 s; Redis's `TIME` reads the clock the report was taken on.
    let pos = reported(report, "unix time ").fract();
    let down = reported(report, "answering ") / 1_000.0;
    let acme = |phase: &str| -> Vec<&SeriesRow> {
        let rows: Vec<&SeriesRow> = series
            .iter()
            .filter(|s| s.target == "reference" && s.tenant == "acme" && s.phase == phase)
            .collect();
        // A phase's last second may be cut short by the phase's end.
        rows[..rows.len() - 1].to_vec()
    };
    // What a second admits in steady overload: one under the limit (a request is admitted
    // while the estimate plus one stays within it).
    let recovery = acme("recovery");
    let per_second =
        recovery.iter().map(|s| s.counts.admitted).sum::<u64>() as f64 / recovery.len() as f64;
    let fault = acme("fault");
    // The whole burst falls within two windows of the restart, at the fault's start.
    let admitted: u64 = fault.iter().map(|s| s.counts.admitted).sum();
    let burst = admitted as f64 - per_second * fault.len() as f64;
    // The instances notice the loss and retry on a back-off of 25, 50, 100 ms…: they are
    // back on the new server up to one step (50 ms) after it answers.
    // The least: the instances count what their turns admitted during the down time on the
    // new server as soon as they reach it (the reference's reconciliation), so those arrivals
    // take the rest of the window's room instead of adding to it.
    let low = restart_burst_counted(pos, down, per_second, 120.0);
    // An instance that failed five calls in a row meanwhile opens its breaker and decides
    // locally for its 1 s cooldown, past the window's end, admitting up to its local share
    // that Redis never counts (seen in CI: 23 measured where the model said 13.6). The
    // instances' own fallback counter says how many decisions were local beyond the down time
    // the model already counts; acme's part of those may be admitted on top.
    let fault_phase = &r.targets[0].phases[1];
    let all_rate = tenant_in(&r, "reference", "fault", "all").counts.offered as f64
        / (fault_phase.end_s - fault_phase.start_s);
    let local_beyond = (fault_phase.fallbacks.unwrap_or(0.0) - all_rate * (down + 0.05)).max(0.0)
        * 120.0
        / all_rate;
    let high = restart_burst(pos, down + 0.05, per_second, 120.0) + local_beyond;
    println!(
        "{report}: {pos:.3} into a window, {low:.1}–{high:.1} more expected \
         ({local_beyond:.1} of them local decisions past the down time), {burst:.1} measured"
    );
    // ±3: a span of whole seconds holds the steady count ±1 at each end (admissions are
    // 1/limit apart, seconds and windows are not aligned), and a back-off step may start
    // late. Measured within 0.4 of the range over six runs, the restart from 0.06 to 0.99
    // into its window.
    assert!(
        burst >= low - 3.0 && burst <= high + 3.0,
        "{pos:.3} into a window, down {down:.3} s: {low:.1}–{high:.1} more expected, \
         {burst:.1} measured: {fault:?}"
    );
    // Counting resumes on the new server (its script loaded again). The burst spans the
    // restart's window and the next (whose estimate weighs the lost window's count), and the
    // run's seconds are not aligned with the windows: it reaches into the fault's second
    // second (seen in CI: 72 admitted there, the kill 0.66 into its window, the burst as
    // expected above). Every second after those two is at the limit.
    for s in &fault[2..] {
        assert!(
            s.counts.admitted as f64 <= r.limit + 2.0,
            "limited again: {s:?}"
        );
    }
    let all = tenant_in(&r, "reference", "fault", "all");
    assert!(
        all.counts.server_error + all.counts.unavailable == 0,
        "{all:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_is_served_by_the_breaker_and_refused_by_fail_closed() {
    let (r, _) = run_scaled("client-pause", &["reference", "fail-closed"]).await;
    for quiet in ["globex", "initech"] {
        let t = tenant_in(&r, "reference", "fault", quiet);
        assert!(t.wrongful_denial.unwrap() < 0.02, "{quiet}: {t:?}");
    }
    let acme = tenant_in(&r, "reference", "fault", "acme");
    assert!(
        acme.over_admission.unwrap() < 0.1 && acme.wrongful_denial.unwrap() < 0.1,
        "local share holds acme near the limit: {acme:?}"
    );
    let closed = tenant_in(&r, "fail-closed", "fault", "all");
    assert!(
        closed.counts.server_error as f64 > 0.95 * closed.counts.offered as f64,
        "{closed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noisy_neighbour_pushes_some_calls_past_the_budget_the_reference_falls_back_on() {
    let (r, _) = run_scaled("noisy-neighbour", &["reference", "fail-closed"]).await;
    let scans = reports(&r, "reference");
    assert!(scans.iter().any(|d| d.contains("full scans")), "{scans:?}");
    let reference = r.targets.iter().find(|t| t.name == "reference").unwrap();
    let fault = reference.phases.iter().find(|p| p.name == "fault").unwrap();
    // Calls that arrive during a scan wait for it, past the 20 ms budget: measured 13 % of
    // requests decided by the fallback (36 ms scans), and no error.
    let fallbacks = fault.fallbacks.unwrap();
    assert!(
        fallbacks > 0.02 * fault.all.counts.offered as f64,
        "{fallbacks} of {:?}",
        fault.all.counts
    );
    assert_eq!(fault.all.counts.server_error, 0, "{:?}", fault.all);
    let closed = tenant_in(&r, "fail-closed", "fault", "all");
    assert!(
        closed.counts.server_error as f64 > 0.02 * closed.counts.offered as f64,
        "the same waits answer 500 when closed: {closed:?}"
    );
}

/// Issue 19's bar. A fresh-clone CI run once measured 7.9 % (1,618 of 1,500) while runs here
/// measured 0.0 %: the instances find Redis again up to a reconnect backoff (250 ms) apart, and
/// when a window's edge fell between them (the cuts repeat every 4 s, so a run's cuts all end
/// at the same point of the second, on an edge or not), some decided by Redis beside others'
/// turns. The fleet now agrees on the window it rejoins the store in, at least 0.5 s ahead
/// (`targets/reference/tests/fleet.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flapping_redis_lets_acme_through_the_reference_at_most_five_percent_over_the_limit() {
    // Full length (55 s): flapping is a 1 s cut against a 1 s window and the breaker's 1 s
    // cool-down; scaled, the cut ends before the breaker has opened and probed.
    let (r, _) = run_at("flapping", &["reference"], 1.0).await;
    let acme = tenant_in(&r, "reference", "fault", "acme");
    // The bar. Measured 0.0–2.1 % in fourteen runs (1,499–1,531 of 1,500, within the
    // phase edges' slack); 5.8 % and 11.1 % (1,587 and 1,666) when the instances found the
    // store again a cool-down apart and some decided by it in a window where others still
    // took turns.
    assert!(acme.over_admission.unwrap() <= 0.05, "{acme:?}");
    // Nor held below it: the phase's edges may cut up to a window's 50 either way, so at
    // least 28 windows' worth. Carries counted again at every call once refused nearly all of
    // acme in the window after each cut (1,175 admitted).
    assert!(acme.counts.admitted >= 1_400, "{acme:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_pinned_to_one_instance_gets_one_share_of_the_limit_during_an_outage() {
    let (r, _) = run_scaled("sticky-tenant", &["reference", "local-only"]).await;
    // Local share: limit / 4 instances, 12 whole requests a window, and acme reaches only
    // one instance: about 12 of its 50 entitled a second (measured: 12.1/s, wrongful denial
    // 75.8 %), while globex and initech, spread evenly, are served in full.
    let acme = tenant_in(&r, "reference", "fault", "acme");
    assert!(
        (0.70..0.80).contains(&acme.wrongful_denial.unwrap()) && acme.admitted_per_s < 15.0,
        "{acme:?}"
    );
    for quiet in ["globex", "initech"] {
        let t = tenant_in(&r, "reference", "fault", quiet);
        assert!(t.wrongful_denial.unwrap() < 0.02, "{quiet}: {t:?}");
    }
    // While Redis is healthy, where acme lands does not matter.
    let steady = tenant_in(&r, "reference", "steady", "acme");
    assert!(steady.wrongful_denial.unwrap() < 0.05, "{steady:?}");
    // The whole limit per instance, as local-only keeps it, holds a pinned acme at the limit.
    let alone = tenant_in(&r, "local-only", "fault", "acme");
    assert!(
        alone.wrongful_denial.unwrap() < 0.05 && alone.over_admission.unwrap() < 0.1,
        "{alone:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrying_clients_triple_the_load_on_a_fail_closed_limiter_and_not_on_the_reference() {
    let (r, _) = run_scaled(
        "retry-storm",
        &["fail-closed", "fail-closed-503", "reference"],
    )
    .await;
    let amplification = |target: &str, tenant: &str| {
        tenant_in(&r, target, "fault", tenant)
            .counts
            .client_amplification()
            .unwrap()
    };
    for target in ["fail-closed", "fail-closed-503"] {
        // Every request fails during the cut and acme's library sends it twice more at once.
        // The fault ends well before the run does, so no retry is cut short.
        let acme = amplification(target, "acme");
        assert!((acme - 3.0).abs() < 0.01, "{target}: acme {acme}");
        // Backoff: 4 attempts, fewer only for the requests whose later attempts fall after
        // the cut (at most 0.1 + 0.2 + 0.4 s of waits: the last 0.7 s of 6, at 5/s).
        let initech = amplification(target, "initech");
        assert!(
            (3.7..=4.0).contains(&initech),
            "{target}: initech {initech}"
        );
        // The throttle starts refusing once its requests pass twice its accepts (the 40 of
        // the steady phase), 2 s into the cut, and refuses more as its history fills: about
        // 21 of 120 expected (the chance of the n-th is (n − 80) / (n + 1)), sd 4; measured
        // 12–24 (0.80–0.90), and 0.81–0.83 at full length.
        let hooli = amplification(target, "hooli");
        assert!((0.7..0.95).contains(&hooli), "{target}: hooli {hooli}");
    }
    // A bare 500 tells globex's client nothing: sent once. A 503 with Retry-After: 1 is sent
    // again a second later, twice: the waits show in its latency, not as fewer attempts.
    let bare = amplification("fail-closed", "globex");
    assert!((bare - 1.0).abs() < 1e-9, "globex on 500: {bare}");
    let told = amplification("fail-closed-503", "globex");
    assert!(told > 2.5, "globex on 503 + Retry-After: {told}");
    let waited = tenant_in(&r, "fail-closed-503", "fault", "globex")
        .latency_us
        .unwrap()
        .p50;
    assert!(waited >= 1_900_000, "two 1 s waits: p50 {waited} µs");
    // The reference answers 429 to acme (no client retries a 429) and admits the rest:
    // not one retry, nothing throttled.
    let all = tenant_in(&r, "reference", "fault", "all");
    assert_eq!(
        (all.counts.retries, all.counts.throttled),
        (0, 0),
        "{all:?}"
    );
    assert!(tenant_in(&r, "reference", "fault", "acme").counts.limited > 0);
    let closed = tenant_in(&r, "fail-closed", "fault", "all");
    assert!(
        closed.counts.client_amplification().unwrap() > 2.3,
        "{closed:?}"
    );
}

/// The number before `label` in a fault's report ("… in rotation 533 ms after").
fn ms_before(report: &str, label: &str) -> u64 {
    let head = report
        .split(label)
        .next()
        .unwrap_or_else(|| panic!("no {label:?} in {report}"));
    head.split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before {label:?} in {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_instances_told_there_are_four_let_acme_through_at_twice_the_limit() {
    let (r, _) = run_scaled("scale-out-outage", &["reference", "local-only"]).await;
    let scale_out = r.targets[0]
        .phases
        .iter()
        .find(|p| p.name == "scale-out")
        .unwrap();
    for target in ["reference", "local-only"] {
        let scaled = reports(&r, target);
        let out = scaled
            .iter()
            .find(|d| d.contains("scaled out 4 → 8"))
            .unwrap_or_else(|| panic!("{target}: {scaled:?}"));
        // The phase named `fault` begins once all eight are in rotation.
        let ready_s = ms_before(out, "ms after") as f64 / 1_000.0;
        assert!(
            ready_s < scale_out.end_s - scale_out.start_s,
            "{target}: ready {ready_s} s after, the scale-out phase lasts {} s",
            scale_out.end_s - scale_out.start_s
        );
        let t = r.targets.iter().find(|t| t.name == target).unwrap();
        assert!(
            t.events.iter().all(|e| e.kind == "fault-report"),
            "{target}: {:?}",
            t.events
        );
    }
    // Each of the eight takes its turns as one of the 4 it was told (or last counted), the new
    // ones (ranks 4–7) repeating the old ones' turns: twice the limit a window. An instance
    // sees 15 of acme's requests a second, more than its 12 or 13, so every window admits
    // exactly 100. The phase's windows are the wall clock's, not the phase's: its first and
    // last may each hold a whole window's 100 or none of it, so over `length` seconds the
    // rate is 100 × (length ± 1) / length (seed 000's shares measured 91–92 here).
    let acme = tenant_in(&r, "reference", "fault", "acme");
    let fault = r.targets[0]
        .phases
        .iter()
        .find(|p| p.name == "fault")
        .unwrap();
    let length = fault.end_s - fault.start_s;
    let twice = 2.0 * r.limit;
    assert!(
        (twice * (length - 1.0) / length..=twice * (length + 1.0) / length)
            .contains(&acme.admitted_per_s),
        "the stale divisor over {length} s: {acme:?}"
    );
    for quiet in ["globex", "initech"] {
        let t = tenant_in(&r, "reference", "fault", quiet);
        assert!(t.wrongful_denial.unwrap() < 0.02, "{quiet}: {t:?}");
    }
    let all = tenant_in(&r, "reference", "fault", "all");
    assert_eq!(
        all.counts.server_error + all.counts.unavailable + all.counts.transport_error,
        0,
        "{all:?}"
    );
    // With the whole limit per instance, local-only lets acme through in full.
    let local = tenant_in(&r, "local-only", "fault", "acme");
    assert!(local.admitted_per_s > 118.0, "{local:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_still_dividing_by_four_refuse_a_quarter_of_acmes_entitlement() {
    let (r, _) = run_scaled("lost-instance", &["reference"]).await;
    let events = reports(&r, "reference");
    assert!(
        events
            .iter()
            .any(|d| d.contains("instance 1") && d.contains("SIGKILL")),
        "{events:?}"
    );
    assert!(
        events.iter().any(|d| d.contains("in place of instance 1")),
        "replaced when the fault ends: {events:?}"
    );
    // Three of the four shares of acme's limit: 25 % wrongly refused over whole windows. The
    // phase's edges may add up to one window's limit (decided by the store before the cut
    // lands, or a window the cut splits): CI measured 17.7 % over a 6 s phase. A divisor of 3
    // would admit the whole allowance and fail the upper bound on admissions.
    let acme = tenant_in(&r, "reference", "fault", "acme");
    let three_shares = 0.75 * acme.allowance;
    let admitted = acme.counts.admitted as f64;
    assert!(
        admitted <= three_shares + r.limit && admitted >= 0.68 * acme.allowance,
        "the divisor stayed 4 ({three_shares} ± one window's {}): {acme:?}",
        r.limit
    );
    for quiet in ["globex", "initech"] {
        let t = tenant_in(&r, "reference", "fault", quiet);
        assert!(t.wrongful_denial.unwrap() < 0.02, "{quiet}: {t:?}");
    }
    // The balancer took the dead instance out at once: at most the requests in flight on
    // it when it died fail.
    let all = tenant_in(&r, "reference", "fault", "all");
    assert!(all.counts.transport_error <= 3, "{all:?}");
    assert_eq!(
        all.counts.server_error + all.counts.unavailable,
        0,
        "{all:?}"
    );
}

/// The error reports of `target`'s faults (Redis's error replies, by code).
fn error_replies<'a>(r: &'a RunResult, target: &str) -> &'a str {
    reports(r, target)
        .into_iter()
        .find(|d| d.contains("error replies"))
        .unwrap_or_else(|| panic!("{target}: no error-reply report"))
}

/// A Redis that answers every limiter call with an error (`code`): the reference's breaker
/// opens and its local share holds every caller near the limit with no 5xx; fail-closed
/// answers 500; fail-open admits all of acme.
async fn store_wide_errors(scenario: &str, code: &str) {
    let (r, _) = run_scaled(scenario, &["reference", "fail-closed", "fail-open"]).await;
    for quiet in ["globex", "initech"] {
        let t = tenant_in(&r, "reference", "fault", quiet);
        assert!(
            t.wrongful_denial.unwrap() < 0.02,
            "{scenario} {quiet}: {t:?}"
        );
    }
    let acme = tenant_in(&r, "reference", "fault", "acme");
    assert!(
        acme.over_admission.unwrap() < 0.1 && acme.wrongful_denial.unwrap() < 0.1,
        "{scenario}: local share holds acme near the limit: {acme:?}"
    );
    let all = tenant_in(&r, "reference", "fault", "all");
    assert_eq!(all.counts.server_error, 0, "{scenario}: {all:?}");
    let closed = tenant_in(&r, "fail-closed", "fault", "all");
    assert!(
        closed.counts.server_error as f64 > 0.95 * closed.counts.offered as f64,
        "{scenario}: {closed:?}"
    );
    let open = tenant_in(&r, "fail-open", "fault", "acme");
    assert!(
        open.over_admission.unwrap() > 1.0,
        "{scenario}: fail-open admits acme's whole 120/s: {open:?}"
    );
    for target in ["reference", "fail-closed", "fail-open"] {
        // The limiter's own calls got them, not only failmode's (a busy fault's probe).
        let replies = error_replies(&r, target);
        assert!(
            replies.contains(&format!("-{code} ")) && replies.contains("evalsha"),
            "{target}: {replies}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_out_of_memory_answers_oom_and_the_reference_holds_its_share() {
    store_wide_errors("redis-oom", "OOM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_redis_answers_readonly_and_the_reference_holds_its_share() {
    store_wide_errors("redis-readonly", "READONLY").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_redis_answers_busy_and_the_reference_holds_its_share() {
    store_wide_errors("redis-busy", "BUSY").await;
}

/// redis-rs's `Script` loads the script again on -NOSCRIPT: the callers never know. Redis's
/// error replies show -NOSCRIPT and nothing else; the reference answers no error in any phase
/// and neither limiter's decisions change. Fail-closed's 500s are not counted: the reload's
/// extra round trip, like any call on a stalled machine, can outlast its 20 ms budget (a CI
/// run saw 16 of 870 in the fault phase and 3 % after it, when no script was missing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushed_scripts_are_reloaded_on_noscript_and_no_decision_changes() {
    let (r, _) = run_scaled("script-flush", &["reference", "fail-closed"]).await;
    for phase in ["steady", "fault", "recovery"] {
        let all = tenant_in(&r, "reference", phase, "all");
        let errors = all.counts.server_error + all.counts.unavailable + all.counts.transport_error;
        assert_eq!(errors, 0, "reference {phase}: {all:?}");
    }
    for target in ["reference", "fail-closed"] {
        let acme = tenant_in(&r, target, "fault", "acme");
        assert!(acme.over_admission.unwrap() < 0.05, "{target}: {acme:?}");
        let replies = error_replies(&r, target);
        let (_, codes) = replies.split_once("every client: ").unwrap();
        let codes = codes.trim_end_matches(" (INFO errorstats)");
        assert!(
            codes.starts_with("-NOSCRIPT ") && !codes.contains(", -"),
            "{target}: only -NOSCRIPT: {replies}"
        );
    }
}
