//! Fuzzed inputs, zero panics: the scenario, gates, target manifest and deployment parsers fed
//! arbitrary text and the shipped files mutated line by line. Each returns a value or an error
//! that names where it went wrong: a line, a backtick-quoted key, or one of the file's keys.
//!
//! `FAILMODE_FUZZ_CASES` sets the cases per property (`just fuzz` raises it); the suite's
//! default keeps this file to a few seconds in debug.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use failmode::deployment::Deployment;
use failmode::gate::gates_from_file;
use failmode::scenario::Scenario;
use failmode::targets::manifest;
use proptest::prelude::*;
use proptest::sample::Index;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Cases per property: `FAILMODE_FUZZ_CASES` or `default`.
fn cases(default: u32) -> u32 {
    std::env::var("FAILMODE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default),
        // Shrinking a mutated file re-parses it thousands of times; the first failure with its
        // mutations is readable enough.
        max_shrink_iters: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The `.toml` files directly in each of `dirs` (relative to the workspace), sorted.
fn files_in(dirs: &[&str]) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for dir in dirs {
        let dir = workspace().join(dir);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") && path.is_file() {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path.display().to_string(), text));
            }
        }
    }
    files.sort();
    assert!(!files.is_empty(), "no .toml files in {dirs:?}");
    files
}

fn scenarios() -> Vec<(String, String)> {
    files_in(&["scenarios", "harness/tests/fixtures"])
        .into_iter()
        // tests/docker.rs fills this placeholder in before parsing; so do these tests.
        .map(|(path, text)| (path, text.replace("LATENCY_MS", "40")))
        .collect()
}

fn manifests() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = files_in(&[
        "harness/tests/fixtures/targets",
        "harness/tests/fixtures/targets/mine",
        "harness/tests/fixtures/check",
    ]);
    // Every shipped target's manifest, at the depths `discover` looks (targets/<x>[/<y>]).
    for language in std::fs::read_dir(workspace().join("targets")).unwrap() {
        let language = language.unwrap().path();
        let mut candidates = vec![language.join("target.toml")];
        if let Ok(libraries) = std::fs::read_dir(&language) {
            candidates.extend(libraries.map(|l| l.unwrap().path().join("target.toml")));
        }
        for path in candidates.into_iter().filter(|p| p.is_file()) {
            let text = std::fs::read_to_string(&path).unwrap();
            files.push((path.display().to_string(), text));
        }
    }
    files.sort();
    files
}

fn deployments() -> Vec<(String, String)> {
    files_in(&["deploy"])
}

/// Gates files as `failmode gate --gates` reads them: each shipped scenario's `[[gates]]`
/// alone in a file.
fn gates_files() -> Vec<(String, String)> {
    let files: Vec<(String, String)> = scenarios()
        .into_iter()
        .filter_map(|(path, text)| {
            let table: toml::Table = toml::from_str(&text).unwrap();
            let gates = table.get("gates")?.clone();
            let mut file = toml::Table::new();
            file.insert("gates".into(), gates);
            Some((path, toml::to_string(&file).unwrap()))
        })
        .collect();
    assert!(!files.is_empty(), "no shipped scenario has [[gates]]");
    files
}

/// Values of every type and edge a key might be given in place of its own.
const VALUES: &[&str] = &[
    "0",
    "-1",
    "1",
    "-9223372036854775808",
    "9223372036854775807",
    "4294967296",
    "65536",
    "0.5",
    "-0.0",
    "1e300",
    "nan",
    "inf",
    "-inf",
    "true",
    "\"\"",
    "\" \"",
    "\"-1s\"",
    "\"0s\"",
    "\"1ns\"",
    "\"18446744073709551615s\"",
    "\"99999999999h\"",
    "\"nan\"",
    "\"all\"",
    "\"{port}\"",
    "\"{nope}\"",
    "\"{\"",
    "\"http://\"",
    "\"http://:\"",
    "\"http://127.0.0.1:0\"",
    "\"redis://127.0.0.1:99999\"",
    "\"x://y\"",
    "\"é\\u0000\\n\"",
    "[]",
    "[1, 2]",
    "[\"\"]",
    "[[]]",
    "{}",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
];

/// Lines that are not in any shipped file: unknown keys, repeated or stray tables, syntax.
const LINES: &[&str] = &[
    "unknown_key = 1",
    "[[tenants]]",
    "[[populations]]",
    "[[targets]]",
    "[[phases]]",
    "[[phases.faults]]",
    "[[gates]]",
    "[[variants]]",
    "[policy]",
    "[load]",
    "[start]",
    "[limit]",
    "[warm_up]",
    "[request]",
    "name = \"x\"",
    "type = \"latency\"",
    "[",
    "]]",
    "=",
    "\"",
    "a.b.c = 1",
    "x = { y = [ { z = 1 } ] }",
    "",
];

#[derive(Debug, Clone)]
enum Mutation {
    Delete(Index),
    Duplicate(Index),
    Swap(Index, Index),
    /// Replaces the value of a `key = value` line.
    Value(Index, Index),
    /// Replaces the value of a `key = value` line with a long string.
    Long(Index, usize),
    /// Replaces the value of a `key = value` line with arbitrary text.
    Text(Index, String),
    /// Renames the key of a `key = value` line.
    Rename(Index, String),
    Insert(Index, Index),
    /// Cuts the file short at a byte (rounded down to a character boundary).
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Delete),
        any::<Index>().prop_map(Mutation::Duplicate),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::Value(a, b)),
        (any::<Index>(), 1_000usize..200_000).prop_map(|(a, n)| Mutation::Long(a, n)),
        (any::<Index>(), ".{0,20}").prop_map(|(a, s)| Mutation::Text(a, s)),
        (any::<Index>(), "[a-z_]{1,12}").prop_map(|(a, s)| Mutation::Rename(a, s)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::Insert(a, b)),
        any::<Index>().prop_map(Mutation::Truncate),
    ]
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for m in mutations {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let n = lines.len();
        let assignment = |i: &Index| {
            // The `i`-th `key = value` line, wrapping: a mutation that aims at values lands on one.
            let with_value: Vec<usize> = (0..n)
                .filter(|&k| {
                    let l = lines[k].trim_start();
                    !l.starts_with('#') && !l.starts_with('[') && l.contains('=')
                })
                .collect();
            (!with_value.is_empty()).then(|| with_value[i.index(with_value.len())])
        };
        let set_value = |lines: &mut Vec<String>, k: usize, value: &str| {
            let key = lines[k].split('=').next().unwrap_or_default().to_owned();
            lines[k] = format!("{key}= {value}");
        };
        match m {
            Mutation::Delete(i) => {
                lines.remove(i.index(n));
            }
            Mutation::Duplicate(i) => {
                let k = i.index(n);
                lines.insert(k, lines[k].clone());
            }
            Mutation::Swap(a, b) => lines.swap(a.index(n), b.index(n)),
            Mutation::Value(i, v) => {
                if let Some(k) = assignment(i) {
                    set_value(&mut lines, k, VALUES[v.index(VALUES.len())]);
                }
            }
            Mutation::Long(i, len) => {
                if let Some(k) = assignment(i) {
                    set_value(&mut lines, k, &format!("\"{}\"", "a".repeat(*len)));
                }
            }
            Mutation::Text(i, s) => {
                if let Some(k) = assignment(i) {
                    set_value(&mut lines, k, s);
                }
            }
            Mutation::Rename(i, key) => {
                if let Some(k) = assignment(i) {
                    let value = lines[k].split_once('=').map(|(_, v)| v).unwrap_or_default();
                    lines[k] = format!("{key} ={value}");
                }
            }
            Mutation::Insert(i, l) => {
                lines.insert(i.index(n + 1), LINES[l.index(LINES.len())].into())
            }
            Mutation::Truncate(i) => {
                let mut text = lines.join("\n");
                let mut at = i.index(text.len() + 1);
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                text.truncate(at);
                lines = text.lines().map(str::to_owned).collect();
            }
        }
    }
    lines.join("\n")
}

/// One of `files`, mutated 1 to 6 times.
fn mutated(files: Vec<(String, String)>) -> impl Strategy<Value = String> {
    (any::<Index>(), prop::collection::vec(mutation(), 1..=6))
        .prop_map(move |(f, ms)| apply(&files[f.index(files.len())].1, &ms))
}

/// Arbitrary text, and text that looks a little like TOML.
fn arbitrary() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "([a-z_.\\[\\]]{0,12} ?= ?[-0-9a-z\"\\[\\]{}.,]{0,12}\n){0,12}",
    ]
}

/// The keys a parser's files may hold, as its errors name them.
const SCENARIO_KEYS: &[&str] = &[
    "name",
    "description",
    "seed",
    "policy",
    "limit",
    "window",
    "load",
    "request_timeout",
    "max_in_flight_per_target",
    "spread",
    "arrival",
    "tenants",
    "rate",
    "caller",
    "client",
    "populations",
    "keys",
    "zipf",
    "top",
    "caller_prefix",
    "targets",
    "manifest",
    "variant",
    "instances",
    "max_connections",
    "keep_alive",
    "max_idle_connections",
    "phases",
    "start",
    "end",
    "faults",
    "gates",
    "claims",
    "abort",
    "for",
];
const GATES_KEYS: &[&str] = &[
    "gates", "target", "phase", "metric", "tenant", "max", "min", "level", "window",
];
const MANIFEST_KEYS: &[&str] = &[
    "description",
    "build",
    "start",
    "command",
    "env",
    "ready",
    "path",
    "timeout",
    "request",
    "caller",
    "caller_header",
    "refuses_with",
    "default_instances",
    "metrics",
    "fallback_counter",
    "limit",
    "requests",
    "window",
    "warm_up",
    "settled_below",
    "variants",
    "name",
];
const DEPLOYMENT_KEYS: &[&str] = &[
    "toxiproxy",
    "targets",
    "name",
    "instances",
    "proxy",
    "redis_admin",
    "limit",
    "requests",
    "window",
    "caller",
    "caller_header",
];

/// Whether `message` says where: `line N`, a backtick-quoted name, or one of `keys` as a whole
/// word outside double quotes (a quoted value is the input echoed back, which could hold any
/// word).
fn names_a_key_or_line(message: &str, keys: &[&str]) -> bool {
    let unquoted: String = message.split('"').step_by(2).collect::<Vec<_>>().join(" ");
    let words: Vec<&str> = unquoted
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let line = words
        .windows(2)
        .any(|w| w[0] == "line" && !w[1].is_empty() && w[1].bytes().all(|b| b.is_ascii_digit()));
    let backticked = unquoted
        .split('`')
        .skip(1)
        .step_by(2)
        .any(|s| !s.is_empty());
    line || backticked || words.iter().any(|w| keys.contains(w))
}

fn check_error(message: &str, keys: &[&str], input: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        names_a_key_or_line(message, keys),
        "the error names no key and no line: {message}\n--- input ---\n{input}"
    );
    Ok(())
}

fn check_scenario(text: &str) -> Result<(), TestCaseError> {
    if let Err(e) = Scenario::parse(text, "fuzzed.toml") {
        check_error(&e.to_string(), SCENARIO_KEYS, text)?;
    }
    Ok(())
}

fn check_manifest(text: &str) -> Result<(), TestCaseError> {
    if let Err(e) = manifest::parse(text, Path::new("fuzzed/target.toml")) {
        check_error(&e.to_string(), MANIFEST_KEYS, text)?;
    }
    Ok(())
}

fn check_deployment(text: &str) -> Result<(), TestCaseError> {
    // Remote addresses allowed, so an address is judged on its form, not refused for its host.
    if let Err(e) = Deployment::parse(text, Path::new("fuzzed.toml"), true) {
        check_error(&e.to_string(), DEPLOYMENT_KEYS, text)?;
    }
    Ok(())
}

fn check_gates(dir: &Path, text: &str) -> Result<(), TestCaseError> {
    let path = dir.join("gates.toml");
    std::fs::write(&path, text).unwrap();
    if let Err(e) = gates_from_file(&path) {
        check_error(&e.to_string(), GATES_KEYS, text)?;
    }
    Ok(())
}

#[test]
fn the_shipped_files_parse_so_their_mutations_start_from_valid_toml() {
    for (path, text) in scenarios() {
        Scenario::parse(&text, &path).unwrap_or_else(|e| panic!("{e}"));
    }
    for (path, text) in manifests() {
        manifest::parse(&text, Path::new(&path)).unwrap_or_else(|e| panic!("{e}"));
    }
    for (path, text) in deployments() {
        Deployment::parse(&text, Path::new(&path), true).unwrap_or_else(|e| panic!("{e}"));
    }
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in gates_files() {
        let file = dir.path().join("gates.toml");
        std::fs::write(&file, text).unwrap();
        gates_from_file(&file).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn a_mutated_scenario_never_panics_and_its_error_says_where(text in mutated(scenarios())) {
        check_scenario(&text)?;
    }

    #[test]
    fn arbitrary_text_as_a_scenario_never_panics_and_its_error_says_where(text in arbitrary()) {
        check_scenario(&text)?;
    }

    #[test]
    fn a_mutated_manifest_never_panics_and_its_error_says_where(text in mutated(manifests())) {
        check_manifest(&text)?;
    }

    #[test]
    fn arbitrary_text_as_a_manifest_never_panics_and_its_error_says_where(text in arbitrary()) {
        check_manifest(&text)?;
    }

    #[test]
    fn a_mutated_deployment_never_panics_and_its_error_says_where(text in mutated(deployments())) {
        check_deployment(&text)?;
    }

    #[test]
    fn arbitrary_text_as_a_deployment_never_panics_and_its_error_says_where(text in arbitrary()) {
        check_deployment(&text)?;
    }

    #[test]
    fn a_mutated_gates_file_never_panics_and_its_error_says_where(text in mutated(gates_files())) {
        let dir = tempfile::tempdir().unwrap();
        check_gates(dir.path(), &text)?;
    }

    #[test]
    fn arbitrary_text_as_a_gates_file_never_panics_and_its_error_says_where(text in arbitrary()) {
        let dir = tempfile::tempdir().unwrap();
        check_gates(dir.path(), &text)?;
    }
}
