//! The Docker Compose topology (docker-compose.yml, deploy/toxiproxy.json, deploy/compose.toml,
//! targets/reference/Dockerfile) agrees with the harness: Toxiproxy and Redis at the pinned
//! versions, each reference instance started with the environment failmode itself would give
//! it, Redis reached only through the proxy the deployment file faults, the deployment file
//! attached to the ports the compose file publishes, and the image running the binary the
//! target manifest starts, listening where the ports lead. Read from the files alone: no
//! container is started. Where a Docker daemon answers, an ignored test has Docker Compose
//! check the file too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use failmode::deployment::Deployment;
use failmode::scenario::Scenario;
use failmode::targets::manifest::{self, TargetDef};
use serde_norway::Value;
use support::workspace;

/// The Redis the compose file pins. Not the installed `redis-server --version`: CI installs
/// Debian's package on a fresh machine, whose version follows the Debian release (7.0.15 on
/// Debian 12, 8.0 on Debian 13), so comparing with it would make this test's result depend on
/// the machine rather than on the repository. 7.0.15 is Debian 12's, the redis-server
/// failmode's own runs were measured with; the compose file says so beside its image. Change
/// the two together.
const REDIS_VERSION: &str = "7.0.15";

/// The Dockerfile the reference services are built from, relative to the workspace.
const REFERENCE_DOCKERFILE: &str = "targets/reference/Dockerfile";

/// The port Toxiproxy's API listens on when its command has no `-port`.
const TOXIPROXY_API_PORT: u16 = 8474;

fn read(relative: &str) -> String {
    let path = workspace().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// docker-compose.yml with its `<<` merge keys applied, as Docker Compose reads it.
fn compose() -> Value {
    let mut value: Value =
        serde_norway::from_str(&read("docker-compose.yml")).expect("docker-compose.yml is YAML");
    value
        .apply_merge()
        .expect("docker-compose.yml's merge keys");
    value
}

fn service<'a>(compose: &'a Value, name: &str) -> &'a Value {
    compose["services"]
        .get(name)
        .unwrap_or_else(|| panic!("docker-compose.yml has no service {name:?}"))
}

/// The services built from the reference Dockerfile, in the file's order.
fn reference_services(compose: &Value) -> Vec<(String, &Value)> {
    let services: Vec<(String, &Value)> = compose["services"]
        .as_mapping()
        .expect("docker-compose.yml has services")
        .iter()
        .filter(|(_, s)| s["build"]["dockerfile"].as_str() == Some(REFERENCE_DOCKERFILE))
        .map(|(name, s)| (name.as_str().expect("a service name").to_owned(), s))
        .collect();
    assert!(
        !services.is_empty(),
        "no service of docker-compose.yml is built from {REFERENCE_DOCKERFILE}"
    );
    services
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => panic!("{other:?} is not a scalar"),
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .unwrap_or_else(|| panic!("{value:?} is not a list"))
        .iter()
        .map(scalar)
        .collect()
}

/// A service's `environment`, in either of Compose's forms.
fn environment(service: &Value) -> BTreeMap<String, String> {
    match &service["environment"] {
        Value::Mapping(m) => m.iter().map(|(k, v)| (scalar(k), scalar(v))).collect(),
        Value::Sequence(items) => items
            .iter()
            .map(|item| {
                let item = scalar(item);
                let (k, v) = item.split_once('=').unwrap_or((&item, ""));
                (k.to_owned(), v.to_owned())
            })
            .collect(),
        Value::Null => BTreeMap::new(),
        other => panic!("environment {other:?} is neither a mapping nor a list"),
    }
}

/// A service's published ports as (host port, container port). Each must be published on
/// 127.0.0.1: a deployment file's addresses must be loopback, and this is a test bench.
fn published(name: &str, service: &Value) -> Vec<(u16, u16)> {
    strings(&service["ports"])
        .iter()
        .map(|spec| {
            let parts: Vec<&str> = spec.split(':').collect();
            let [ip, host, container] = parts[..] else {
                panic!("{name}: port {spec:?} is not IP:HOST:CONTAINER");
            };
            assert_eq!(ip, "127.0.0.1", "{name}: port {spec:?} is not on loopback");
            let container = container.strip_suffix("/tcp").unwrap_or(container);
            (
                host.parse()
                    .unwrap_or_else(|e| panic!("{name}: {spec:?}: {e}")),
                container
                    .parse()
                    .unwrap_or_else(|e| panic!("{name}: {spec:?}: {e}")),
            )
        })
        .collect()
}

/// The host port a service publishes its container port `container` on.
fn host_port(name: &str, service: &Value, container: u16) -> u16 {
    let ports = published(name, service);
    ports
        .iter()
        .find(|(_, c)| *c == container)
        .map(|(h, _)| *h)
        .unwrap_or_else(|| panic!("{name} does not publish port {container}: {ports:?}"))
}

fn image(name: &str, service: &Value) -> String {
    service["image"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} has no image"))
        .to_owned()
}

/// The argument after `flag` in a command.
fn flag_value<'a>(command: &'a [String], flag: &str) -> Option<&'a str> {
    command
        .iter()
        .position(|a| a == flag)
        .and_then(|i| command.get(i + 1))
        .map(String::as_str)
}

fn deployment_path() -> PathBuf {
    workspace().join("deploy/compose.toml")
}

fn deployment() -> Deployment {
    Deployment::read(&deployment_path(), false)
        .unwrap_or_else(|e| panic!("deploy/compose.toml: {e}"))
}

/// The reference target as targets/reference/target.toml declares it.
fn reference_def(name: &str) -> TargetDef {
    manifest::read(&workspace().join("targets/reference/target.toml"))
        .unwrap()
        .into_iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("targets/reference/target.toml has no variant {name:?}"))
}

/// The proxy of deploy/toxiproxy.json the deployment file faults: (listen, upstream).
fn faulted_proxy() -> (String, String) {
    let d = deployment();
    let [target] = &d.targets[..] else {
        panic!(
            "deploy/compose.toml should attach one target, not {:?}",
            d.targets
        );
    };
    let proxies: Vec<serde_json::Value> =
        serde_json::from_str(&read("deploy/toxiproxy.json")).expect("deploy/toxiproxy.json");
    let proxy = proxies
        .iter()
        .find(|p| p["name"] == target.proxy.as_str())
        .unwrap_or_else(|| {
            panic!(
                "deploy/compose.toml faults proxy {:?}, which deploy/toxiproxy.json does not create",
                target.proxy
            )
        });
    assert_eq!(
        proxy["enabled"], true,
        "{}: a disabled proxy is refused by an attached run",
        target.proxy
    );
    let text = |key: &str| {
        proxy[key]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no {key}", target.proxy))
            .to_owned()
    };
    (text("listen"), text("upstream"))
}

fn port_of(address: &str) -> u16 {
    address
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("{address:?} is not HOST:PORT"))
}

/// The Dockerfile's instructions, continuation lines joined and comments left out.
fn dockerfile() -> Vec<(String, String)> {
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in read(REFERENCE_DOCKERFILE).lines() {
        let line = line.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                let (keyword, rest) = current.split_once(' ').unwrap_or((&current, ""));
                instructions.push((keyword.to_ascii_uppercase(), rest.trim().to_owned()));
                current.clear();
            }
        }
    }
    instructions
}

fn instruction(instructions: &[(String, String)], keyword: &str) -> Vec<String> {
    instructions
        .iter()
        .filter(|(k, _)| k == keyword)
        .map(|(_, rest)| rest.clone())
        .collect()
}

/// The image's `ENV` settings.
fn dockerfile_env(instructions: &[(String, String)]) -> BTreeMap<String, String> {
    instruction(instructions, "ENV")
        .iter()
        .flat_map(|rest| {
            rest.split_whitespace()
                .map(|kv| {
                    let (k, v) = kv
                        .split_once('=')
                        .unwrap_or_else(|| panic!("ENV {rest}: write KEY=VALUE"));
                    (k.to_owned(), v.trim_matches('"').to_owned())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The port the image's binary listens on (its `FAILMODE_PORT`).
fn image_port() -> u16 {
    let env = dockerfile_env(&dockerfile());
    env.get("FAILMODE_PORT")
        .unwrap_or_else(|| panic!("{REFERENCE_DOCKERFILE} sets no FAILMODE_PORT"))
        .parse()
        .unwrap()
}

fn version(text: &str) -> Vec<u32> {
    text.split('.')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|e| panic!("version {text:?}: {e}"))
        })
        .collect()
}

/// As the harness writes a limit into a placeholder.
fn number(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

#[test]
fn the_toxiproxy_image_is_the_version_setup_pins() {
    let setup = read("scripts/setup.sh");
    let pinned = setup
        .lines()
        .find_map(|l| l.trim().strip_prefix("TOXIPROXY_VERSION="))
        .expect("scripts/setup.sh pins TOXIPROXY_VERSION");
    let compose = compose();
    assert_eq!(
        image("toxiproxy", service(&compose, "toxiproxy")),
        format!("ghcr.io/shopify/toxiproxy:{pinned}")
    );
}

#[test]
fn the_redis_image_is_the_documented_version_and_keeps_nothing_on_disk() {
    let compose = compose();
    let redis = service(&compose, "redis");
    assert_eq!(image("redis", redis), format!("redis:{REDIS_VERSION}"));
    let command = strings(&redis["command"]);
    assert_eq!(flag_value(&command, "--save"), Some(""), "{command:?}");
    assert_eq!(
        flag_value(&command, "--appendonly"),
        Some("no"),
        "{command:?}"
    );
}

#[test]
fn every_reference_instance_counts_all_the_reference_services() {
    let compose = compose();
    let services = reference_services(&compose);
    let mut ids = BTreeSet::new();
    for (name, s) in &services {
        let env = environment(s);
        assert_eq!(
            env.get("FAILMODE_INSTANCE_COUNT"),
            Some(&services.len().to_string()),
            "{name}: there are {} reference services",
            services.len()
        );
        let id = env
            .get("FAILMODE_INSTANCE_ID")
            .unwrap_or_else(|| panic!("{name} has no FAILMODE_INSTANCE_ID"));
        assert!(ids.insert(id.clone()), "{name}: instance id {id} twice");
    }
}

#[test]
fn the_reference_services_run_the_reference_variant_as_failmode_would_start_it() {
    let d = deployment();
    let def = reference_def(&d.targets[0].name);
    // Attached, the instances' limit cannot follow the scenario: every scenario must be
    // written for the one they run with.
    let mut limits = BTreeSet::new();
    for entry in std::fs::read_dir(workspace().join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let s = Scenario::load(&path).unwrap();
            limits.insert((number(s.limit), s.window.as_millis()));
        }
    }
    let [(limit, window_ms)] = &limits.into_iter().collect::<Vec<_>>()[..] else {
        panic!("the scenarios use several limits or windows; the compose instances run one");
    };
    let compose = compose();
    let services = reference_services(&compose);
    assert_eq!(
        services.len(),
        def.default_instances as usize,
        "failmode starts {} instances of {}",
        def.default_instances,
        def.name
    );
    // Redis is the proxy's address in the compose network; bind and port come from the image.
    let (listen, _) = faulted_proxy();
    let redis_url = format!("redis://toxiproxy:{}", port_of(&listen));
    for (index, (name, s)) in services.iter().enumerate() {
        let values: BTreeMap<&str, String> = BTreeMap::from([
            ("redis_url", redis_url.clone()),
            ("instance_id", format!("{}-{index}", def.name)),
            ("instance_index", index.to_string()),
            ("instance_count", services.len().to_string()),
            ("limit", limit.clone()),
            ("window_ms", window_ms.to_string()),
        ]);
        let expected: BTreeMap<String, String> = def
            .env
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "FAILMODE_BIND" | "FAILMODE_PORT"))
            .map(|(k, v)| (k.clone(), manifest::expand(v, &values)))
            .collect();
        assert_eq!(environment(s), expected, "{name}");
    }
}

#[test]
fn the_faulted_proxy_is_the_one_toxiproxy_loads_and_leads_to_the_redis_service() {
    let (_, upstream) = faulted_proxy();
    let compose = compose();
    let redis = service(&compose, "redis");
    // The redis service's own port: the one it publishes for redis_admin.
    let redis_port = published("redis", redis)[0].1;
    assert_eq!(upstream, format!("redis:{redis_port}"));
    // And deploy/toxiproxy.json is the file Toxiproxy is started with.
    let toxiproxy = service(&compose, "toxiproxy");
    let command = strings(&toxiproxy["command"]);
    assert_eq!(
        flag_value(&command, "-host"),
        Some("0.0.0.0"),
        "{command:?}"
    );
    let config = flag_value(&command, "-config").expect("toxiproxy's command has -config");
    let volumes = strings(&toxiproxy["volumes"]);
    assert!(
        volumes
            .iter()
            .any(|v| v == &format!("./deploy/toxiproxy.json:{config}:ro")),
        "toxiproxy mounts no ./deploy/toxiproxy.json at {config}: {volumes:?}"
    );
}

#[test]
fn the_deployment_file_attaches_to_the_ports_compose_publishes() {
    let d = deployment();
    let compose = compose();
    let port = image_port();
    let mut published_instances: Vec<u16> = reference_services(&compose)
        .iter()
        .map(|(name, s)| host_port(name, s, port))
        .collect();
    let mut attached: Vec<u16> = d.targets[0].instances.iter().map(|a| a.port()).collect();
    published_instances.sort_unstable();
    attached.sort_unstable();
    assert_eq!(attached, published_instances, "instance ports");

    let toxiproxy = service(&compose, "toxiproxy");
    let api = flag_value(&strings(&toxiproxy["command"]), "-port")
        .map_or(TOXIPROXY_API_PORT, |p| p.parse().unwrap());
    assert_eq!(
        d.toxiproxy.port(),
        host_port("toxiproxy", toxiproxy, api),
        "Toxiproxy API port"
    );

    let redis = service(&compose, "redis");
    let admin = d.targets[0]
        .redis_admin
        .expect("deploy/compose.toml names a redis_admin");
    assert_eq!(admin.port(), host_port("redis", redis, 6379), "redis_admin");
}

#[test]
fn the_image_runs_the_binary_the_manifest_starts_where_compose_publishes() {
    let instructions = dockerfile();
    let def = reference_def("reference");
    let binary = Path::new(&def.command[0])
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();

    // Built by the package that declares that binary, with the workspace's Rust or newer.
    let run = instruction(&instructions, "RUN")
        .into_iter()
        .find(|r| r.contains("cargo build"))
        .expect("the Dockerfile runs cargo build");
    let words: Vec<String> = run.split_whitespace().map(str::to_owned).collect();
    let package = flag_value(&words, "-p").expect("cargo build -p PACKAGE");
    let root: toml::Table = read("Cargo.toml").parse().unwrap();
    let members: Vec<&str> = root["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let member = members
        .iter()
        .find(|m| {
            let cargo: toml::Table = read(&format!("{m}/Cargo.toml")).parse().unwrap();
            cargo["package"]["name"].as_str() == Some(package)
        })
        .unwrap_or_else(|| panic!("no workspace member is package {package}"));
    let cargo: toml::Table = read(&format!("{member}/Cargo.toml")).parse().unwrap();
    let bins: Vec<&str> = cargo["bin"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert!(
        bins.contains(&binary),
        "{package} builds {bins:?}, not {binary}"
    );
    let builder = instruction(&instructions, "FROM")
        .into_iter()
        .find(|f| f.ends_with(" AS builder"))
        .expect("a FROM … AS builder stage");
    let rust = builder
        .strip_prefix("rust:")
        .and_then(|f| f.split_once('-'))
        .map(|(v, _)| v)
        .unwrap_or_else(|| panic!("builder {builder:?} is not rust:VERSION-…"));
    let needed = root["workspace"]["package"]["rust-version"]
        .as_str()
        .unwrap();
    assert!(
        version(rust) >= version(needed),
        "rust {rust} is older than the workspace's rust-version {needed}"
    );
    // Cargo resolves the whole workspace: every member must be copied in.
    let copies = instruction(&instructions, "COPY");
    for m in &members {
        assert!(
            copies.iter().any(|c| c.starts_with(&format!("{m}/ "))),
            "the Dockerfile does not copy workspace member {m}/: {copies:?}"
        );
    }

    // The runtime stage holds that binary and starts it.
    let installed = format!("/usr/local/bin/{binary}");
    assert!(
        copies.contains(&format!(
            "--from=builder /src/target/release/{binary} {installed}"
        )),
        "{copies:?}"
    );
    let entrypoint: Vec<String> =
        serde_json::from_str(&instruction(&instructions, "ENTRYPOINT")[0]).unwrap();
    assert_eq!(entrypoint, [installed]);

    // Listening on every interface, on the port the services publish and probe.
    let env = dockerfile_env(&instructions);
    assert_eq!(env["FAILMODE_BIND"], "0.0.0.0");
    let port = image_port();
    assert_eq!(instruction(&instructions, "EXPOSE"), [port.to_string()]);
    let compose = compose();
    for (name, s) in reference_services(&compose) {
        let ports = published(&name, s);
        assert!(
            !ports.is_empty() && ports.iter().all(|(_, c)| *c == port),
            "{name} publishes {ports:?}; the image listens on {port}"
        );
        let probe = strings(&s["healthcheck"]["test"]).join(" ");
        assert!(
            probe.contains(&format!("/dev/tcp/127.0.0.1/{port}"))
                && probe.contains(&format!("GET {} ", def.ready_path)),
            "{name}: the healthcheck {probe:?} does not ask {} on {port}",
            def.ready_path
        );
    }
}

#[test]
#[ignore = "needs a Docker daemon: run with `cargo test -- --ignored` where one answers"]
fn docker_compose_accepts_the_topology_where_a_docker_daemon_answers() {
    let info = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run `docker info` ({e}): this test needs Docker"));
    assert!(
        info.status.success(),
        "no Docker daemon answers `docker info` ({}): {}",
        info.status,
        String::from_utf8_lossy(&info.stderr).trim()
    );
    let config = Command::new("docker")
        .args([
            "compose",
            "--file",
            "docker-compose.yml",
            "config",
            "--quiet",
        ])
        .current_dir(workspace())
        .output()
        .unwrap();
    assert!(
        config.status.success(),
        "`docker compose config --quiet` refuses docker-compose.yml ({}): {}",
        config.status,
        String::from_utf8_lossy(&config.stderr).trim()
    );
}
