//! Manifest parsing, discovery and placeholders: the repository's manifests, and fixtures
//! written to temporary folders.

use super::*;

fn repo_targets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets")
}

#[test]
fn the_reference_manifest_declares_every_policy_as_a_target() {
    let all = discover(&repo_targets()).unwrap();
    let names: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
    for n in [
        "reference",
        "fail-open",
        "fail-closed",
        "retry-then-deny",
        "fail-static",
        "timeout-only",
        "local-only",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let reference = all.iter().find(|d| d.name == "reference").unwrap();
    assert_eq!(reference.env["FAILMODE_POLICY"], "local-share");
    assert_eq!(reference.default_instances, 4);
}

#[test]
fn an_unknown_target_names_the_available_ones() {
    let all = discover(&repo_targets()).unwrap();
    let err = select(&all, &["nope".into()]).unwrap_err().to_string();
    assert!(
        err.contains("\"nope\"") && err.contains("fail-open"),
        "{err}"
    );
}

fn write_manifest(dir: &Path, variant: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("target.toml"),
        format!(
            r#"
default_instances = 1
start = {{ command = ["x"] }}
ready = {{ path = "/healthz", timeout = "1s" }}
request = {{ path = "/", caller_header = "x-caller" }}
[[variants]]
name = "{variant}"
"#
        ),
    )
    .unwrap();
}

#[test]
fn manifests_are_found_by_language_and_library_but_not_inside_installed_dependencies() {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("reference"), "a");
    write_manifest(&dir.path().join("node/express"), "b");
    write_manifest(&dir.path().join("node/node_modules/some-lib"), "c");
    write_manifest(&dir.path().join("python/.venv/lib"), "d");
    write_manifest(&dir.path().join("too/deep/for/discovery"), "e");
    let names: Vec<String> = discover(dir.path())
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, ["b", "a"]);
}

#[test]
fn a_missing_targets_folder_is_named() {
    let err = discover(Path::new("/nonexistent/targets")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/targets"), "{err}");
}

#[test]
fn an_unknown_placeholder_is_refused_naming_the_key_it_is_in() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("target.toml");
    std::fs::write(
        &path,
        r#"
default_instances = 1
start = { command = ["x", "--port", "{prot}"] }
ready = { path = "/healthz", timeout = "1s" }
request = { path = "/", caller_header = "x-caller" }
[[variants]]
name = "x"
"#,
    )
    .unwrap();
    let err = read(&path).unwrap_err().to_string();
    assert!(
        err.contains("start.command: unknown placeholder {prot}"),
        "{err}"
    );
    let in_env = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"{prot}\"]", "\"{port}\"]")
        .replace("name = \"x\"", "name = \"x\"\nenv = { PORT = \"{prot}\" }");
    let err = parse(&in_env, &path).unwrap_err().to_string();
    assert!(
        err.contains("variants.env.PORT: unknown placeholder"),
        "{err}"
    );
}

#[test]
fn a_refusal_status_other_than_429_or_503_is_refused_and_429_is_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("target.toml");
    let manifest = |request: &str| {
        format!(
            "default_instances = 1\nstart = {{ command = [\"x\"] }}\n\
             ready = {{ path = \"/healthz\", timeout = \"1s\" }}\n\
             request = {{ {request} }}\n[[variants]]\nname = \"x\"\n"
        )
    };
    let plain = r#"path = "/", caller_header = "x-caller""#;
    std::fs::write(&path, manifest(plain)).unwrap();
    assert_eq!(read(&path).unwrap()[0].refuses_with, 429);
    std::fs::write(&path, manifest(&format!("{plain}, refuses_with = 503"))).unwrap();
    assert_eq!(read(&path).unwrap()[0].refuses_with, 503);
    std::fs::write(&path, manifest(&format!("{plain}, refuses_with = 403"))).unwrap();
    let err = read(&path).unwrap_err().to_string();
    assert!(err.contains("refuses_with = 403"), "{err}");
}

#[test]
fn an_instance_slot_fills_every_placeholder() {
    let slot = InstanceSlot {
        target: "t",
        index: 2,
        count: 4,
        port: 8080,
        redis_url: "redis://127.0.0.1:1",
        sentinel: None,
        limit: 12.5,
        window: Duration::from_millis(1500),
    };
    let values = slot.values();
    assert_eq!(values.len(), PLACEHOLDERS.len());
    assert!(PLACEHOLDERS.iter().all(|p| values.contains_key(p)));
    assert_eq!(values["instance_id"], "t-2");
    assert_eq!(values["limit"], "12.5");
    assert_eq!(values["window_s"], "1.5");
    assert_eq!(
        InstanceSlot {
            limit: 50.0,
            ..slot
        }
        .values()["limit"],
        "50"
    );
}

#[test]
fn placeholders_expand() {
    let values = BTreeMap::from([("port", "8080".to_owned()), ("limit", "50".to_owned())]);
    assert_eq!(
        expand("--port={port} {limit}/s", &values),
        "--port=8080 50/s"
    );
}

/// A manifest with `request` as its `[request]` table's keys and `extra` appended.
fn manifest_with(request: &str, extra: &str) -> String {
    format!(
        "default_instances = 1\nstart = {{ command = [\"x\"] }}\n\
         ready = {{ path = \"/healthz\", timeout = \"1s\" }}\n\
         request = {{ path = \"/\", {request} }}\n{extra}\n[[variants]]\nname = \"x\"\n"
    )
}

fn parsed(text: &str) -> Result<TargetDef, String> {
    parse(text, Path::new("target.toml"))
        .map(|mut defs| defs.remove(0))
        .map_err(|e| e.to_string())
}

#[test]
fn the_caller_is_a_header_by_default_or_an_address_when_the_manifest_says_so() {
    let header = parsed(&manifest_with(r#"caller_header = "x-api-key""#, "")).unwrap();
    assert_eq!(
        header.caller,
        CallerIdentity::Header {
            header: "x-api-key".into()
        }
    );
    assert_eq!(header.caller_header(), Some("x-api-key"));
    for (mode, identity) in [
        ("source-address", CallerIdentity::SourceAddress),
        ("x-forwarded-for", CallerIdentity::XForwardedFor),
    ] {
        let def = parsed(&manifest_with(&format!("caller = {mode:?}"), "")).unwrap();
        assert_eq!(def.caller, identity);
        assert_eq!(def.caller_header(), None);
    }
}

#[test]
fn a_caller_mode_that_makes_no_sense_is_refused_naming_the_problem() {
    let cases = [
        (
            r#"caller = "ip""#,
            r#"request.caller = "ip" is not a caller identity"#,
        ),
        (r#"caller = "header""#, "request.caller_header is missing"),
        ("", "request.caller_header is missing"),
        (
            r#"caller = "source-address", caller_header = "x-caller""#,
            "caller_header is set but request.caller = \"source-address\"",
        ),
        (
            r#"caller_header = "x caller""#,
            "not a valid HTTP header name",
        ),
    ];
    for (request, expected) in cases {
        let err = parsed(&manifest_with(request, "")).unwrap_err();
        assert!(err.contains(expected), "{request}: {err}");
    }
}

#[test]
fn a_declared_limit_is_the_one_judged_and_the_scenarios_otherwise() {
    let plain = r#"caller_header = "x-caller""#;
    let own = parsed(&manifest_with(
        plain,
        "[limit]\nrequests = 40\nwindow = \"2s\"",
    ))
    .unwrap();
    assert_eq!(
        own.limit,
        Some(OwnLimit {
            requests: 40,
            window: Duration::from_secs(2),
            declared_in: LimitSource::Manifest,
        })
    );
    let judged = own.judged_limit(50.0, Duration::from_secs(1));
    assert_eq!((judged.limit, judged.window_s), (40.0, 2.0));
    assert_eq!(judged.source, LimitSource::Manifest);
    let scenario = parsed(&manifest_with(plain, ""))
        .unwrap()
        .judged_limit(50.0, Duration::from_secs(1));
    assert_eq!(
        scenario,
        TargetLimit::scenario(50.0, Duration::from_secs(1))
    );
}

#[test]
fn a_zero_absurd_or_badly_timed_limit_is_refused_naming_the_key() {
    let plain = r#"caller_header = "x-caller""#;
    let cases = [
        ("requests = 0\nwindow = \"1s\"", "limit.requests = 0"),
        (
            "requests = 5000000000\nwindow = \"1s\"",
            "limit.requests = 5000000000",
        ),
        (
            "requests = 10\nwindow = \"soon\"",
            "limit.window = \"soon\"",
        ),
        ("requests = 10\nwindow = \"0s\"", "longer than zero"),
        ("requests = 10\nwindow = \"30days\"", "at most 24h"),
        ("requests = 10", "missing field `window`"),
        (
            "requests = 10\nwindow = \"1s\"\nburst = 3",
            "unknown field `burst`",
        ),
    ];
    for (limit, expected) in cases {
        let err = parsed(&manifest_with(plain, &format!("[limit]\n{limit}"))).unwrap_err();
        assert!(err.contains(expected), "{limit}: {err}");
    }
}

#[test]
fn in_a_sentinel_topology_an_instance_is_told_the_sentinels_unless_its_variant_pins_one_address() {
    let all = discover(&repo_targets()).unwrap();
    let def = |name: &str| all.iter().find(|d| d.name == name).unwrap();
    let endpoint = SentinelEndpoint {
        sentinels: vec![
            "127.0.0.1:7001".parse().unwrap(),
            "127.0.0.1:7002".parse().unwrap(),
        ],
        master: "failmode".into(),
    };
    let slot = InstanceSlot {
        target: "reference",
        index: 0,
        count: 4,
        port: 8080,
        redis_url: "redis://127.0.0.1:6001",
        sentinel: Some(&endpoint),
        limit: 50.0,
        window: Duration::from_secs(1),
    };
    let told = def("reference").env_for(&slot);
    assert_eq!(
        told["FAILMODE_REDIS_SENTINELS"],
        "127.0.0.1:7001,127.0.0.1:7002"
    );
    assert_eq!(told["FAILMODE_REDIS_SENTINEL_MASTER"], "failmode");
    assert_eq!(told["FAILMODE_REDIS_URL"], "redis://127.0.0.1:6001");
    assert_eq!(
        def("reference-pinned").env_for(&slot)["FAILMODE_REDIS_SENTINELS"],
        ""
    );
    // One Redis: nothing about sentinels is set.
    let single = def("reference").env_for(&InstanceSlot {
        sentinel: None,
        ..slot
    });
    assert!(
        !single.contains_key("FAILMODE_REDIS_SENTINELS"),
        "{single:?}"
    );
}
