//! `failmode check TARGET` against the real binary: the reference passes every check at a
//! limit that is not the default, and each misbehaving target, scripted exactly (manifests in
//! `tests/fixtures/check/`, run from the workspace so their relative commands resolve), gets
//! its own diagnosis and fix. Needs the release builds of the reference and the oracle
//! (`cargo build --release -p failmode-reference -p failmode-oracle`); each check takes a few
//! seconds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{failmode_in, fixture_path, output_text};

/// `failmode check` with `args`, from the workspace; its exit code and what it printed.
fn check(target: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["check", target, "--no-build"];
    all.extend_from_slice(args);
    let output = failmode_in(&support::workspace(), &all);
    let (stdout, stderr) = output_text(&output);
    (output.status.code(), format!("{stdout}{stderr}"))
}

fn fixture(name: &str) -> String {
    fixture_path(&format!("check/{name}.toml"))
        .to_string_lossy()
        .into_owned()
}

/// The one line of the output that starts with `start`, and what is printed under it.
fn finding<'a>(said: &'a str, start: &str) -> &'a str {
    let at = said
        .find(&format!("\n{start}"))
        .unwrap_or_else(|| panic!("no line starting {start:?} in:\n{said}"));
    let rest = &said[at + 1..];
    let end = ["\n✔", "\n✘", "\n–", "\nall ", "\n1 of", "\n2 of"]
        .iter()
        .filter_map(|m| rest.find(m))
        .min()
        .unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn the_reference_passes_every_check_at_a_limit_that_is_not_the_default() {
    let (code, said) = check(
        "reference",
        &["--limit", "13", "--window", "800ms", "--instances", "2"],
    );
    assert_eq!(code, Some(0), "{said}");
    for line in [
        "✔ ready: 2 instances",
        "✔ limits at {limit}: caller A admitted ≈",
        "✔ limits per caller",
        "✔ refuses with 429",
        "✔ uses {redis_url}",
    ] {
        finding(&said, line);
    }
    assert!(said.contains("expected 13"), "{said}");
    assert!(said.contains("all 5 checks pass"), "{said}");
}

#[test]
fn a_command_that_exits_at_once_is_not_ready_and_its_log_tail_is_shown() {
    let (code, said) = check(&fixture("oracle-exits"), &[]);
    assert_eq!(code, Some(1), "{said}");
    let f = finding(&said, "✘ not ready: instance 0 exited (exit status: 64)");
    assert!(f.contains("| error: invalid FAILMODE_ORACLE_SCRIPT"), "{f}");
    assert!(f.contains("fix: "), "{f}");
    finding(
        &said,
        "– limit, per caller, refusal status, Redis: not checked",
    );
}

#[test]
fn a_service_on_a_port_of_its_own_is_not_listening_on_port_and_the_port_it_took_is_named() {
    let (code, said) = check(&fixture("oracle-wrong-port"), &[]);
    assert_eq!(code, Some(1), "{said}");
    let f = finding(
        &said,
        "✘ not listening on {port}: instance 0 was given port ",
    );
    assert!(f.contains("; the process listens on 127.0.0.1:"), "{f}");
    assert!(
        f.contains("fix: make the service listen on the port"),
        "{f}"
    );
    assert!(f.contains("{port}"), "{f}");
}

#[test]
fn a_limit_of_its_own_is_not_the_configured_limit() {
    let (code, said) = check(&fixture("reference-fixed-limit"), &["--limit", "12"]);
    assert_eq!(code, Some(1), "{said}");
    let f = finding(
        &said,
        "✘ not limiting at the configured limit: caller A admitted ≈",
    );
    assert!(f.contains("expected 12"), "{f}");
    assert!(f.contains("fix: start the service with the limit failmode gives it: {limit}"));
    // Everything else about it is right.
    for line in [
        "✔ limits per caller",
        "✔ refuses with 429",
        "✔ uses {redis_url}",
    ] {
        finding(&said, line);
    }
}

#[test]
fn callers_sharing_one_budget_are_tenants_limited_together() {
    let (code, said) = check(&fixture("reference-shared-key"), &["--limit", "9"]);
    assert_eq!(code, Some(1), "{said}");
    let f = finding(
        &said,
        "✘ tenants limited together: caller B, under its limit",
    );
    assert!(
        f.contains("the caller header `x-caller` seems to be ignored"),
        "{f}"
    );
    assert!(f.contains("fix: make the limiter key on the caller"), "{f}");
    finding(&said, "✔ uses {redis_url}");
}

#[test]
fn an_undeclared_503_is_named_with_refuses_with_and_a_target_without_redis_is_not_using_it() {
    let (code, said) = check(&fixture("oracle-refuses-503"), &["--limit", "6"]);
    assert_eq!(code, Some(1), "{said}");
    finding(&said, "✔ limits at {limit}");
    finding(&said, "✔ limits per caller");
    let f = finding(&said, "✘ refuses with 503, which ");
    assert!(
        f.contains("fix: add `refuses_with = 503` under [request]"),
        "{f}"
    );
    let f = finding(&said, "✘ not using {redis_url}: its Redis saw no commands");
    assert!(f.contains("REDIS_URL = \"{redis_url}\""), "{f}");
    assert!(said.contains("2 of 5 checks fail"), "{said}");
}

#[test]
fn an_unknown_target_or_a_bad_limit_is_bad_input() {
    let (code, said) = check("no-such-target", &[]);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("no target named \"no-such-target\""),
        "{said}"
    );
    let (code, said) = check("reference", &["--limit", "0"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("--limit must be at least 1"), "{said}");
    let (code, said) = check("reference", &["--window", "2m"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("at most 1m"), "{said}");
}

/// A manifest of `tests/fixtures/targets/`, shared with `identity.rs`.
fn target_fixture(name: &str) -> String {
    fixture_path(&format!("targets/{name}.toml"))
        .to_string_lossy()
        .into_owned()
}

#[test]
fn callers_told_apart_by_source_address_are_checked_from_addresses_of_their_own() {
    let (code, said) = check(&target_fixture("oracle-by-address"), &["--limit", "7"]);
    // The oracle keeps no counts in Redis: the one failure is that.
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("callers by source-address"), "{said}");
    finding(&said, "✔ limits at {limit}");
    finding(&said, "✔ limits per caller");
    finding(&said, "✘ not using {redis_url}");

    // The same target keyed by address, told callers by header: both callers come from
    // failmode's own address, so they share one budget.
    let (code, said) = check(
        &target_fixture("oracle-by-address-told-by-header"),
        &["--limit", "7"],
    );
    assert_eq!(code, Some(1), "{said}");
    let f = finding(&said, "✘ tenants limited together");
    assert!(f.contains("request.caller"), "{f}");
}

#[test]
fn a_declared_limit_is_the_one_checked_whatever_limit_failmode_would_give() {
    let (code, said) = check(&target_fixture("oracle-own-limit"), &["--limit", "4"]);
    // The oracle keeps no counts in Redis: the one failure is that.
    assert_eq!(code, Some(1), "{said}");
    finding(&said, "✘ not using {redis_url}");
    assert!(said.contains("1 of 5 checks fail"), "{said}");
    assert!(said.contains("its own [limit]"), "{said}");
    let f = finding(&said, "✔ limits at its [limit]");
    assert!(f.contains("expected 15"), "{f}");
}
