use super::*;
use std::num::NonZeroUsize;

use crate::load::{Arrival, Connections, KeepAlive, Spread};

const MINIMAL: &str = r#"
name = "t"
[policy]
limit = 50
window = "1s"
[[tenants]]
name = "acme"
rate = 120
[[targets]]
name = "reference"
[[phases]]
name = "steady"
start = "0s"
end = "10s"
[[phases]]
name = "fault"
start = "10s"
end = "40s"
faults = [{ type = "latency", latency_ms = 40, jitter_ms = 10 }]
"#;

fn err(text: &str) -> String {
    Scenario::parse(text, "test.toml").unwrap_err().to_string()
}

#[test]
fn a_minimal_scenario_gets_the_documented_defaults() {
    let s = Scenario::parse(MINIMAL, "test.toml").unwrap();
    assert_eq!(s.duration, Duration::from_secs(40));
    assert_eq!(s.request_timeout, Duration::from_secs(2));
    assert_eq!(s.tenants[0].caller.to_string(), "acme");
    assert_eq!(s.tenants[0].arrival, Arrival::Uniform);
    assert_eq!(s.tenants[0].spread, Spread::RoundRobin);
    assert_eq!(s.targets[0].instances, None);
    assert_eq!(s.phases[1].faults.len(), 1);
    assert_eq!(s.allowance(s.phases[1].length()), 1500.0);
}

#[test]
fn an_unknown_key_is_refused_naming_it_and_its_line() {
    let e = err(&MINIMAL.replace("rate = 120", "rate = 120\ncolour = \"red\""));
    assert!(e.contains("colour"), "{e}");
    assert!(e.contains("line 9"), "{e}");
}

#[test]
fn a_negative_rate_is_refused_naming_the_line() {
    let e = err(&MINIMAL.replace("rate = 120", "rate = -5"));
    assert!(e.contains("greater than zero"), "{e}");
    assert!(e.contains("line 8"), "{e}");
}

#[test]
fn overlapping_phases_are_refused_naming_the_key_and_line() {
    let e = err(&MINIMAL.replace("start = \"10s\"", "start = \"5s\""));
    assert!(e.contains("phases.start"), "{e}");
    assert!(e.contains("must not overlap"), "{e}");
    assert!(e.contains("line 15"), "{e}");
}

#[test]
fn a_phase_ending_before_it_starts_is_refused() {
    let e = err(&MINIMAL.replace("end = \"40s\"", "end = \"9s\""));
    assert!(
        e.contains("phases.end") && e.contains("after its start"),
        "{e}"
    );
}

#[test]
fn a_bad_duration_names_the_value() {
    let e = err(&MINIMAL.replace("window = \"1s\"", "window = \"soon\""));
    assert!(e.contains("\"soon\" is not a duration"), "{e}");
}

#[test]
fn an_unknown_fault_type_is_refused() {
    let e = err(&MINIMAL.replace("type = \"latency\"", "type = \"gremlins\""));
    assert!(e.contains("line 19"), "{e}");
    assert!(e.contains("gremlins"), "{e}");
}

#[test]
fn duration_scale_shrinks_the_timeline_but_not_the_window() {
    let s = Scenario::parse(MINIMAL, "test.toml").unwrap().scaled(0.1);
    assert_eq!(s.duration, Duration::from_secs(4));
    assert_eq!(s.phases[1].start, Duration::from_secs(1));
    assert_eq!(s.window, Duration::from_secs(1));
}

#[test]
fn every_shipped_scenario_is_valid_and_names_its_phases_steady_fault_recovery() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let names = list(&dir);
    for expected in [
        "baseline",
        "slow-redis",
        "redis-down",
        "hung-redis",
        "flapping",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing: {names:?}"
        );
    }
    for name in names {
        let s = Scenario::find(&name, &dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(s.name, name);
        let phases: Vec<&str> = s.phases.iter().map(|p| p.name.as_str()).collect();
        for p in ["steady", "fault", "recovery"] {
            assert!(phases.contains(&p), "{name}: {phases:?}");
        }
        let tenants: Vec<(&str, f64)> = s
            .tenants
            .iter()
            .map(|t| (t.name.as_str(), t.rate_per_s))
            .collect();
        // Seed 000's population first; a scenario may add a tenant of its own after it
        // (retry-storm's self-throttling hooli).
        assert_eq!(
            tenants[..3],
            [("acme", 120.0), ("globex", 20.0), ("initech", 5.0)],
            "{name}"
        );
        assert_eq!(
            (s.limit, s.window),
            (50.0, Duration::from_secs(1)),
            "{name}"
        );
    }
}

#[test]
fn an_unknown_scenario_lists_the_known_ones() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let e = Scenario::find("nope", &dir).unwrap_err().to_string();
    assert!(e.contains("slow-redis"), "{e}");
}

#[test]
fn a_fractional_limit_two_tenants_with_one_caller_key_and_bad_flaps_are_refused() {
    // Each at the line of its own table: [policy] is line 3, the second [[tenants]] line 9.
    let e = err(&MINIMAL.replace("limit = 50", "limit = 12.5"));
    assert!(
        e.contains("policy.limit") && e.contains("whole number") && e.contains("line 3"),
        "{e}"
    );
    let e = err(&MINIMAL.replace(
        "rate = 120\n",
        "rate = 120\n[[tenants]]\nname = \"acme-2\"\nrate = 1\ncaller = \"acme\"\n",
    ));
    assert!(
        e.contains("tenants.caller") && e.contains("one quota") && e.contains("line 9"),
        "{e}"
    );
    for flap in [
        r#"{ type = "flap", period = "1s", down = "1s" }"#,
        r#"{ type = "flap", period = "1s", down = "0s" }"#,
    ] {
        let e = err(&MINIMAL.replace(
            r#"{ type = "latency", latency_ms = 40, jitter_ms = 10 }"#,
            flap,
        ));
        assert!(e.contains("less than its period"), "{e}");
    }
}

#[test]
fn a_tenants_client_behaviour_is_read_with_its_defaults() {
    let s = Scenario::parse(
        &MINIMAL.replace(
            "rate = 120",
            "rate = 120\nclient = { type = \"retry-backoff\", attempts = 5 }",
        ),
        "test.toml",
    )
    .unwrap();
    assert_eq!(
        s.tenants[0].client,
        crate::load::Client::RetryBackoff {
            attempts: 5,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(2),
        }
    );
    let plain = Scenario::parse(MINIMAL, "test.toml").unwrap();
    assert_eq!(plain.tenants[0].client, crate::load::Client::None);
}

#[test]
fn an_unknown_client_behaviour_is_refused_naming_it_and_its_line() {
    let e = err(&MINIMAL.replace(
        "rate = 120",
        "rate = 120\nclient = { type = \"retry-forever\" }",
    ));
    assert!(e.contains("retry-forever"), "{e}");
    assert!(e.contains("retry-5xx"), "lists what it could be: {e}");
    assert!(e.contains("line 9"), "{e}");
}

#[test]
fn a_fault_missing_a_key_is_refused_naming_its_type_and_line() {
    let e = err(&MINIMAL.replace(
        "faults = [{ type = \"latency\", latency_ms = 40, jitter_ms = 10 }]",
        "faults = [{ type = \"scale\", count = 8 }]",
    ));
    assert!(e.contains("\"scale\"") && e.contains("count"), "{e}");
    assert!(e.contains("line 19"), "{e}");
    assert!(!e.contains("untagged"), "{e}");
}

#[test]
fn a_client_that_cannot_work_is_refused_naming_the_tenant() {
    let e = err(&MINIMAL.replace(
        "rate = 120",
        "rate = 120\nclient = { type = \"retry-5xx\", attempts = 0 }",
    ));
    assert!(e.contains("tenants.client") && e.contains("acme"), "{e}");
    let e = err(&MINIMAL.replace(
        "faults = [{ type = \"latency\", latency_ms = 40, jitter_ms = 10 }]",
        "faults = [{ type = \"scale\", to = 8 }, { type = \"scale\", to = 2 }]",
    ));
    assert!(e.contains("at most one scale"), "{e}");
}

#[test]
fn a_tenant_named_all_is_refused_since_all_means_every_tenant_together() {
    let e = err(&MINIMAL.replace("name = \"acme\"", "name = \"all\""));
    assert!(e.contains("tenants.name") && e.contains("\"all\""), "{e}");
}

#[test]
fn a_target_is_named_or_given_by_manifest_path_never_both_nor_neither() {
    let with = |target: &str| MINIMAL.replace("name = \"reference\"\n", target);
    // Line 9: the [[targets]] entry in MINIMAL.
    let e = err(&with(
        "name = \"reference\"\nmanifest = \"targets/x/target.toml\"\n",
    ));
    assert!(
        e.contains("`targets.manifest`") && e.contains("`name`") && e.contains("line 9"),
        "{e}"
    );
    let e = err(&with("name = \"reference\"\nvariant = \"a\"\n"));
    assert!(
        e.contains("`targets.variant`") && e.contains("line 9"),
        "{e}"
    );
    let e = err(&with("instances = 2\n"));
    assert!(
        e.contains("`targets.name`") && e.contains("manifest"),
        "{e}"
    );
    let e = err(&with("manifest = \" \"\n"));
    assert!(
        e.contains("`targets.manifest`") && e.contains("empty"),
        "{e}"
    );
    let e = err(&with("manifest = \"t.toml\"\nvariant = \"a b\"\n"));
    assert!(e.contains("`targets.variant`"), "{e}");

    // Parsed alone (a results folder's scenario.toml), a manifest is not read: the target is
    // named by its variant, or its path until `Scenario::load` reads it.
    let s = Scenario::parse(
        &with("manifest = \"targets/x/target.toml\"\nvariant = \"x2\"\n"),
        "t",
    )
    .unwrap();
    assert_eq!(s.targets[0].name, "x2");
    let m = s.targets[0].manifest.as_ref().unwrap();
    assert_eq!(
        (m.path.as_path(), m.variant.as_deref(), m.line),
        (Path::new("targets/x/target.toml"), Some("x2"), 9)
    );
    let s = Scenario::parse(&with("manifest = \"targets/x/target.toml\"\n"), "t").unwrap();
    assert_eq!(s.targets[0].name, "targets/x/target.toml");
}

#[test]
fn a_targets_connection_settings_are_read_and_a_zero_cap_or_idle_cap_without_keep_alive_refused() {
    let s = Scenario::parse(MINIMAL, "test.toml").unwrap();
    assert_eq!(s.connections_of("reference"), Connections::default());
    assert!(s.connections_of("reference").keep_alive.is_on());

    let with = |settings: &str| {
        MINIMAL.replace(
            "name = \"reference\"\n",
            &format!("name = \"reference\"\n{settings}"),
        )
    };
    let s = Scenario::parse(&with("max_connections = 8\nkeep_alive = false\n"), "t").unwrap();
    let c = s.connections_of("reference");
    assert_eq!(
        (c.max.map(|m| m.get()), c.keep_alive),
        (Some(8), KeepAlive::Off)
    );
    assert_eq!(
        s.connections_of("not-listed"),
        Connections::default(),
        "a target given by --targets"
    );

    let s = Scenario::parse(&with("max_idle_connections = 4\n"), "t").unwrap();
    let c = s.connections_of("reference");
    assert_eq!(c.keep_alive.max_idle(), NonZeroUsize::new(4));
    let e = err(&with("max_idle_connections = 0\n"));
    assert!(
        e.contains("`targets.max_idle_connections`") && e.contains("at least 1"),
        "{e}"
    );
    let e = err(&with("max_idle_connections = 4\nkeep_alive = false\n"));
    assert!(
        e.contains("`targets.max_idle_connections`") && e.contains("`keep_alive = false`"),
        "{e}"
    );

    let e = err(&with("max_connections = 0\n"));
    assert!(
        e.contains("`targets.max_connections`") && e.contains("at least 1"),
        "{e}"
    );
    let e = err(&with("max_connections = 10001\n"));
    assert!(
        e.contains("`targets.max_connections`")
            && e.contains("\"reference\" allows 10001")
            && e.contains("max_in_flight_per_target (10000)"),
        "{e}"
    );
}

/// MINIMAL with a population of `keys` keys sending 600/s together, `extra` added to it.
fn with_population(keys: u64, extra: &str) -> String {
    MINIMAL.replace(
        "[[targets]]",
        &format!(
            "[[populations]]\nname = \"crowd\"\nkeys = {keys}\nrate = 600\nzipf = 1.0\n{extra}\n\
             [[targets]]"
        ),
    )
}

#[test]
fn a_population_becomes_its_busiest_keys_and_one_tenant_for_the_rest() {
    // Key k sends 600 / (k · H₁₀₀₀) ≈ 80.1 / k a second: keys 1 (80.1) above the limit of 50.
    let s = Scenario::parse(&with_population(1000, ""), "test.toml").unwrap();
    let names: Vec<&str> = s.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "acme",
            "crowd-1",
            "crowd-2",
            "crowd-3",
            "crowd-4",
            "crowd-5",
            "crowd-rest"
        ]
    );
    let h: f64 = (1..=1000).map(|k| 1.0 / f64::from(k)).sum();
    for (k, t) in s.tenants[1..6].iter().enumerate() {
        assert_eq!(t.caller.to_string(), format!("crowd-{}", k + 1));
        assert!((t.rate_per_s - 600.0 / (k as f64 + 1.0) / h).abs() < 1e-9);
        assert_eq!(t.caller.keys(), 1);
    }
    let rest = &s.tenants[6];
    assert_eq!(rest.caller.to_string(), "crowd-6…crowd-1000");
    assert_eq!(rest.caller.keys(), 995);
    let total: f64 = s.tenants[1..].iter().map(|t| t.rate_per_s).sum();
    assert!((total - 600.0).abs() < 1e-9, "{total}");
}

#[test]
fn a_population_stands_alone_without_named_tenants() {
    let text = with_population(10, "top = 10\ncaller_prefix = \"user:\"")
        .replace("[[tenants]]\nname = \"acme\"\nrate = 120\n", "");
    let s = Scenario::parse(&text, "test.toml").unwrap();
    assert_eq!(s.tenants.len(), 10, "every key its own tenant: no rest");
    assert_eq!(s.tenants[9].caller.to_string(), "user:10");
}

#[test]
fn a_population_whose_rest_would_hold_a_key_above_the_limit_is_refused_with_the_top_it_needs() {
    // 600/s over 20 keys (H₂₀ ≈ 3.598): keys 1–3 above 50/s (166.8, 83.4, 55.6).
    let e = err(&with_population(20, "top = 2"));
    assert!(e.contains("populations.top"), "{e}");
    assert!(e.contains("key 3 sends 55.59"), "{e}");
    assert!(e.contains("at least 3"), "{e}");
    assert!(e.contains("line 9"), "{e}");
    let s = Scenario::parse(&with_population(20, ""), "test.toml").unwrap();
    assert_eq!(s.tenants.len(), 1 + 5 + 1, "the default top covers them");
}

#[test]
fn a_population_refuses_no_keys_a_bad_exponent_and_a_key_another_tenant_sends() {
    let e = err(&with_population(0, ""));
    assert!(
        e.contains("populations.keys") && e.contains("from 1"),
        "{e}"
    );
    let e = err(&with_population(10, "").replace("zipf = 1.0", "zipf = -1.0"));
    assert!(e.contains("populations.zipf"), "{e}");
    let e =
        err(&with_population(1000, "").replace("rate = 120", "rate = 120\ncaller = \"crowd-7\""));
    assert!(e.contains("populations.caller"), "{e}");
    assert!(e.contains("\"crowd-7\" is a caller key of both"), "{e}");
    let e = err(&with_population(1000, "top = 101"));
    assert!(e.contains("at most 100"), "{e}");
}

#[test]
fn a_population_refuses_more_top_keys_than_keys_and_a_prefix_a_header_cannot_carry() {
    let e = err(&with_population(10, "top = 11"));
    assert!(
        e.contains("populations.top") && e.contains("more than its 10 keys"),
        "{e}"
    );
    let e = err(&with_population(10, "caller_prefix = \"a\\tb\""));
    assert!(e.contains("populations.caller_prefix"), "{e}");
    let e = err(&with_population(10, "").replace("name = \"acme\"", "name = \"crowd-rest\""));
    assert!(
        e.contains("populations.name") && e.contains("names two tenants"),
        "{e}"
    );
}

#[test]
fn a_rest_of_one_key_is_a_tenant_of_that_key_not_a_draw() {
    let s = Scenario::parse(&with_population(6, ""), "test.toml").unwrap();
    let rest = s.tenants.last().unwrap();
    assert_eq!(rest.name, "crowd-rest");
    assert_eq!(rest.caller, crate::load::Caller::Key("crowd-6".into()));
}
