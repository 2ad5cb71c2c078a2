use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::*;

fn def() -> TargetDef {
    let text = "default_instances = 1\nstart = { command = [\"bin/svc\", \"{port}\"] }\n\
                ready = { path = \"/healthz\", timeout = \"2s\" }\n\
                request = { path = \"/api\", caller_header = \"x-caller\" }\n\
                [[variants]]\nname = \"svc\"\n";
    crate::targets::manifest::parse(text, &PathBuf::from("svc/target.toml"))
        .unwrap()
        .remove(0)
}

fn plan(limit: u32, instances: u32) -> Plan {
    Plan {
        limit,
        window: Duration::from_secs(1),
        instances,
    }
}

/// Caller A's tally over the measured windows: `per_window` admitted, the rest refused with
/// `status`.
fn over(plan: &Plan, per_window: u32, status: u16) -> Tally {
    let sent = plan.over_per_window() * WINDOWS_MEASURED;
    let admitted = per_window * WINDOWS_MEASURED;
    let refused = sent - admitted;
    Tally {
        sent,
        admitted,
        refused: if refused > 0 {
            BTreeMap::from([(status, refused)])
        } else {
            BTreeMap::new()
        },
        ..Tally::default()
    }
}

#[test]
fn the_band_holds_the_limit_and_one_windows_limit_more_over_the_measured_windows() {
    let k = f64::from(WINDOWS_MEASURED);
    let one = Band::of(&plan(30, 1));
    assert!((one.low - (27.0 - 1.0 / k)).abs() < 1e-9, "{one:?}");
    assert!((one.high - (30.0 + 31.0 / k)).abs() < 1e-9, "{one:?}");
    for limit in [1, 2, 7, 10, 33, 100] {
        for instances in [1, 2, 4, 9] {
            let band = Band::of(&plan(limit, instances));
            let limit = f64::from(limit);
            // Redis counts for every instance: the band does not widen with them.
            assert_eq!(band, Band::of(&plan(limit as u32, 1)));
            // Twice the limit, or a limit a fifth lower, is never accepted.
            assert!(band.high < 2.0 * limit, "{limit}: {band:?}");
            assert!(
                band.low > 0.8 * limit - 1e-9 || limit < 5.0,
                "{limit}: {band:?}"
            );
            assert!(band.low > 0.0 && band.low < limit, "{limit}: {band:?}");
        }
    }
}

#[test]
fn admissions_at_the_limit_pass_and_far_from_it_fail_with_the_placeholders() {
    let p = plan(12, 1);
    assert_eq!(limit(&def(), &p, &over(&p, 12, 429)).status, Status::Pass);
    assert_eq!(limit(&def(), &p, &over(&p, 15, 429)).status, Status::Pass);
    for wrong in [2, 30] {
        let f = limit(&def(), &p, &over(&p, wrong, 429));
        assert_eq!(f.status, Status::Fail, "{wrong}");
        assert!(
            f.line.starts_with("not limiting at the configured limit") && f.line.contains("≈"),
            "{}",
            f.line
        );
        assert!(f.fix.as_ref().unwrap().contains("{limit}"), "{f:?}");
    }
}

#[test]
fn everything_admitted_is_not_limiting_and_nothing_admitted_names_the_likely_cause() {
    let p = plan(5, 1);
    let all = over(&p, p.over_per_window(), 429);
    let f = limit(&def(), &p, &all);
    assert!(f.line.starts_with("not limiting: "), "{}", f.line);
    let none = over(&p, 0, 400);
    let f = limit(&def(), &p, &none);
    assert!(
        f.line.starts_with("admits nothing") && f.line.contains("x-caller"),
        "{}",
        f.line
    );
}

#[test]
fn instances_counting_on_their_own_are_named() {
    let p = plan(10, 3);
    let f = limit(&def(), &p, &over(&p, 30, 429));
    assert_eq!(f.status, Status::Fail);
    assert!(
        f.fix
            .unwrap()
            .contains("each instance seems to count on its own")
    );
}

#[test]
fn a_refused_caller_b_means_tenants_limited_together() {
    let p = plan(10, 1);
    let a = over(&p, 10, 429);
    let mut b = Tally {
        sent: 5,
        admitted: 5,
        ..Tally::default()
    };
    let alone = Measured {
        over: a.clone(),
        beside: b.clone(),
        over_beside: 0,
    };
    assert_eq!(per_caller(&def(), &alone).status, Status::Pass);
    b.admitted = 1;
    b.refused.insert(429, 4);
    let f = per_caller(
        &def(),
        &Measured {
            over: a,
            beside: b,
            over_beside: 0,
        },
    );
    assert!(f.line.starts_with("tenants limited together"), "{}", f.line);
    assert!(f.line.contains("`x-caller`"), "{}", f.line);
    let unlimited = Measured {
        over: over(&p, p.over_per_window(), 429),
        beside: Tally::default(),
        over_beside: 0,
    };
    assert_eq!(per_caller(&def(), &unlimited).status, Status::Skipped);
}

#[test]
fn the_refusal_status_must_be_the_declared_one() {
    let p = plan(10, 1);
    let mut d = def();
    assert_eq!(refusal_status(&d, &over(&p, 10, 429)).status, Status::Pass);
    let f = refusal_status(&d, &over(&p, 10, 503));
    assert!(f.fix.unwrap().contains("refuses_with = 503"));
    let f = refusal_status(&d, &over(&p, 10, 403));
    assert!(
        f.line.contains("403") && f.fix.unwrap().contains("429"),
        "{}",
        f.line
    );
    d.refuses_with = 503;
    assert_eq!(refusal_status(&d, &over(&p, 10, 503)).status, Status::Pass);
    let f = refusal_status(&d, &over(&p, 10, 429));
    assert!(f.fix.unwrap().contains("remove `refuses_with`"));
}

#[test]
fn a_redis_without_commands_is_not_used() {
    assert_eq!(redis(&def(), Ok(120), 60).status, Status::Pass);
    let f = redis(&def(), Ok(0), 60);
    assert!(f.line.starts_with("not using {redis_url}"), "{}", f.line);
    assert!(f.fix.unwrap().contains("REDIS_URL = \"{redis_url}\""));
    assert_eq!(redis(&def(), Err("no".into()), 60).status, Status::Skipped);
}

#[test]
fn a_port_nobody_listens_on_names_where_the_process_listens() {
    let error = TargetError::NotReady {
        target: "svc".into(),
        index: 0,
        addr: SocketAddr::from(([127, 0, 0, 1], 4242)),
        path: "/healthz".into(),
        timeout: Duration::from_secs(2),
        probe: ReadyProbe::Refused,
        listening: vec![SocketAddr::from(([127, 0, 0, 1], 8080))],
        log: PathBuf::from("svc-0.log"),
        tail: "listening on 8080".into(),
    };
    let f = not_ready(&def(), &error).unwrap();
    assert!(f.line.starts_with("not listening on {port}"), "{}", f.line);
    assert!(f.line.contains("127.0.0.1:8080"), "{}", f.line);
    assert!(
        f.render().contains("  | listening on 8080"),
        "{}",
        f.render()
    );
}

#[test]
fn requests_over_the_limit_left_unanswered_are_never_refused_not_a_limit() {
    let p = plan(10, 1);
    let sent = p.over_per_window() * WINDOWS_MEASURED;
    let hangs = Tally {
        sent,
        admitted: 10 * WINDOWS_MEASURED,
        transport: sent - 10 * WINDOWS_MEASURED,
        ..Tally::default()
    };
    let f = limit(&def(), &p, &hangs);
    assert_eq!(f.status, Status::Fail);
    assert!(f.line.starts_with("never refused"), "{}", f.line);
}

#[test]
fn caller_b_left_unanswered_is_a_failure_but_not_tenants_limited_together() {
    let p = plan(10, 1);
    let m = Measured {
        over: over(&p, 10, 429),
        beside: Tally {
            sent: 5,
            admitted: 2,
            transport: 3,
            ..Tally::default()
        },
        over_beside: 0,
    };
    let f = per_caller(&def(), &m);
    assert_eq!(f.status, Status::Fail);
    assert!(f.line.contains("got no answer to 3 of 5"), "{}", f.line);
    assert!(!f.line.contains("limited together"), "{}", f.line);
}
