//! A scenario's population through a whole run: the busiest keys judged as tenants of their own,
//! the rest together, every request of the rest naming the key its draw gives. Proven against
//! the oracle's exact limiter, which admits the limit per caller key per window: what it
//! admits of each tenant follows from the schedule and the keys alone, computed here in
//! advance. Keys sent wrongly (one key for the whole rest, keys not in proportion to their
//! weights: a scrambled draw sent 11 more of the rest than the model, beyond its 7 near a
//! window's edge) move those counts; that each arrival's draw is the same in every target and
//! worker is `load::keys`'s unit tests'.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use std::sync::Arc;
use std::time::Duration;

use failmode::load::schedule::Schedule;
use failmode::load::{Arrival, Caller, Keys, Role, Share, Spread};
use failmode::results::RunResult;
use failmode::scenario::Scenario;
use support::engine::{plan, run, tenant};
use support::oracle::{self, NEAR_S};
use support::scripted_server::{Server, answer};
use support::{fixture_path, output_text, tenant_in};
use tokio_util::sync::CancellationToken;

/// Per tenant: (admitted, limited, arrivals near a window's boundary), by the model.
fn expected(scenario: &Scenario) -> Vec<(u64, u64, u64)> {
    for t in &scenario.tenants {
        assert_eq!(
            t.arrival,
            Arrival::Uniform,
            "the model is of uniform arrivals"
        );
    }
    let (arrivals, t0) = oracle::arrivals(scenario, 0);
    let window_s = scenario.window.as_secs_f64();
    // Admitted per (caller key, window): keys are the limiter's unit, not tenants.
    let mut used: BTreeMap<(String, i64), f64> = BTreeMap::new();
    scenario
        .tenants
        .iter()
        .zip(&arrivals)
        .enumerate()
        .map(|(ni, (tenant, at))| {
            let mut drawer = match &tenant.caller {
                Caller::Drawn(keys) => Some((keys, keys.drawer(scenario.seed, ni))),
                Caller::Key(_) => None,
            };
            let (mut admitted, mut limited, mut near) = (0, 0, 0);
            for (i, &at) in at.iter().enumerate() {
                let key = match &mut drawer {
                    Some((keys, d)) => keys.key(d.key_of(i as u64)),
                    None => tenant.caller.to_string(),
                };
                let clock = (at - t0) / window_s;
                if (clock - clock.round()).abs() * window_s < NEAR_S {
                    near += 1;
                }
                let n = used.entry((key, clock.floor() as i64)).or_default();
                if *n < scenario.limit {
                    *n += 1.0;
                    admitted += 1;
                } else {
                    limited += 1;
                }
            }
            (admitted, limited, near)
        })
        .collect()
}

#[test]
fn each_key_of_a_population_is_limited_on_its_own_as_its_draws_say_and_the_rest_is_judged_together()
{
    let fixture = fixture_path("oracle-population.toml");
    let scenario = Scenario::load(&fixture).unwrap();
    let names: Vec<&str> = scenario.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names.len(),
        1 + 9 + 1,
        "acme, crowd-1…crowd-9, crowd-rest: {names:?}"
    );
    let expected = expected(&scenario);
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    let run = support::run_fixture_trusted(&[], &fixture, &folder, &[]);
    let (stdout, stderr) = output_text(&run);
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    let r = RunResult::read(&folder).unwrap();
    assert!(r.untrusted().is_empty(), "{:?}", r.untrusted());

    let mut rest_limited = 0;
    for (tenant, &(admitted, limited, near)) in scenario.tenants.iter().zip(&expected) {
        let got = tenant_in(&r, "oracle-exact", "steady", &tenant.name);
        let c = got.counts;
        assert_eq!(c.offered, admitted + limited, "{}: {c:?}", tenant.name);
        assert_eq!(c.admitted + c.limited, c.offered, "{}: {c:?}", tenant.name);
        assert!(
            c.admitted.abs_diff(admitted) <= near,
            "{}: admitted {}, expected {admitted} with {near} near a window's edge",
            tenant.name,
            c.admitted
        );
        // Its allowance is its keys' together: one key's for acme and each top key.
        let keys = tenant.caller.keys() as f64;
        assert_eq!(
            got.allowance,
            scenario.limit * 6.0 * keys,
            "{}",
            tenant.name
        );
        if matches!(tenant.caller, Caller::Drawn(_)) {
            rest_limited = limited;
            // Every request of the rest is entitled (no key's average is above the limit),
            // so each refusal counts as wrongful, the right ones in their window too: a key's
            // draws bunch as a Poisson process's do (docs/load-engine.md).
            let wrongful = got.wrongful_denial.unwrap();
            let model = limited as f64 / (admitted + limited) as f64;
            println!(
                "{}: {limited} of {} refused by the model",
                tenant.name,
                admitted + limited
            );
            assert!(
                (wrongful - model).abs() <= near as f64 / c.offered as f64,
                "{}: wrongful denial {wrongful}, the model's {model}",
                tenant.name
            );
        }
    }
    // The rest's busier keys do go over the limit in some windows: the draws are exercised,
    // not only the sum.
    assert!(rest_limited >= 10, "{rest_limited}");

    let rest = r.tenants.iter().find(|t| t.name == "crowd-rest").unwrap();
    assert_eq!(rest.keys, Some(291));
    assert_eq!(rest.caller, "crowd-10…crowd-300");
    assert!(support::schema_errors(&folder).is_empty());
}

/// Every request of a drawn tenant names the key its arrival's draw gives, in one process and
/// in each worker's share: the multiset of keys the server saw is the model's exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_of_a_drawn_tenant_names_the_key_of_its_arrival_in_any_workers_share() {
    let weights: Vec<f64> = (1..=40).map(|k| 1.0 / f64::from(k)).collect();
    let keys = Arc::new(Keys::new("user-".into(), 3, weights).unwrap());
    for share in [Share::WHOLE, Share::new(2, 3).unwrap()] {
        let server = Server::start(|_| answer(200)).await;
        let mut crowd = tenant("crowd-rest", 300.0, Spread::RoundRobin);
        crowd.caller = Caller::Drawn(Arc::clone(&keys));
        let mut p = plan(
            vec![server.addr],
            vec![tenant("acme", 20.0, Spread::RoundRobin), crowd],
            Duration::from_millis(600),
        );
        p.role = Role::Sender(share);
        let (summary, _, _) = run(p.clone(), CancellationToken::new()).await;
        assert_eq!(summary.dropped, 0);
        let mut drawer = keys.drawer(p.seed, 1);
        let mut expected: Vec<String> = (0..)
            .zip(Schedule::new(
                p.seed,
                0,
                1,
                300.0,
                Arrival::Uniform,
                p.duration,
            ))
            .filter(|&(i, _)| share.takes(i))
            .map(|(i, _)| keys.key(drawer.key_of(i)))
            .collect();
        let mut seen: Vec<String> = server
            .seen()
            .into_iter()
            .map(|s| s.caller)
            .filter(|c| c != "acme")
            .collect();
        expected.sort();
        seen.sort();
        assert!(expected.len() > 50, "{share}: {}", expected.len());
        assert_eq!(seen, expected, "{share}");
    }
}
