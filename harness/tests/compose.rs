//! The Docker Compose topology (docker-compose.yml, deploy/toxiproxy.json, the deployment files
//! deploy/compose*.toml and the Dockerfiles under targets/) agrees with the harness: Toxiproxy
//! and Redis at the pinned versions, per target its own Redis reached only through its own
//! proxy, which its deployment file faults, every instance started with the environment
//! failmode itself would give it, the deployment files attached to the ports the compose file
//! publishes and brought up together by one profile, the peers profile being the peers
//! scenario, and each image built by its manifest's build step on the language version the
//! repository asks for, running the manifest's start command where the ports lead. Read from
//! the files alone: no image is built and no container started. Where a Docker daemon answers,
//! an ignored test has Docker Compose check the file too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use failmode::deployment::{AttachedTarget, Deployment};
use failmode::scenario::Scenario;
use failmode::targets::manifest::{self, InstanceSlot, TargetDef};
use serde_norway::Value;
use support::workspace;

/// The Redis the compose file pins. Not the installed `redis-server --version`: CI installs
/// Debian's package on a fresh machine, whose version follows the Debian release (7.0.15 on
/// Debian 12, 8.0 on Debian 13), so comparing with it would make this test's result depend on
/// the machine rather than on the repository. 7.0.15 is Debian 12's, the redis-server
/// failmode's own runs were measured with; the compose file says so beside its image. Change
/// the two together.
const REDIS_VERSION: &str = "7.0.15";

/// The port redis-server listens on in its container.
const REDIS_PORT: u16 = 6379;

/// The port Toxiproxy's API listens on when its command has no `-port`.
const TOXIPROXY_API_PORT: u16 = 8474;

/// The Dockerfile the reference services are built from, relative to the workspace.
const REFERENCE_DOCKERFILE: &str = "targets/reference/Dockerfile";

/// The deployment file of the services that run without a profile; each profile P has
/// deploy/compose-P.toml.
const DEFAULT_DEPLOYMENT: &str = "deploy/compose.toml";

/// The profile that brings up every target of the peers scenario.
const PEERS_PROFILE: &str = "peers";

/// The oldest Python Flask-Limiter 4 and limits 5 support (their `requires-python`); the
/// image's virtualenv is made with the requirements' hashes, so an older one fails to build.
const PYTHON_FLOOR: &str = "3.10";

/// Variables the image sets instead of the service: where the instance listens inside it.
const IMAGE_VARIABLES: [&str; 2] = ["FAILMODE_BIND", "FAILMODE_PORT"];

fn read(relative: &str) -> String {
    let path = workspace().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// docker-compose.yml with its `<<` merge keys applied, as Docker Compose reads it. A merged
/// mapping may hold merge keys of its own (an anchor built on another): serde_norway's
/// `apply_merge` leaves those in place for the next pass, so it runs until none is left.
fn compose() -> Value {
    let mut value: Value =
        serde_norway::from_str(&read("docker-compose.yml")).expect("docker-compose.yml is YAML");
    for _ in 0..8 {
        value
            .apply_merge()
            .expect("docker-compose.yml's merge keys");
        if !has_merge_key(&value) {
            return value;
        }
    }
    panic!("docker-compose.yml's merge keys nest more than 8 deep");
}

fn has_merge_key(value: &Value) -> bool {
    match value {
        Value::Mapping(m) => m.contains_key("<<") || m.values().any(has_merge_key),
        Value::Sequence(s) => s.iter().any(has_merge_key),
        _ => false,
    }
}

fn service<'a>(compose: &'a Value, name: &str) -> &'a Value {
    compose["services"]
        .get(name)
        .unwrap_or_else(|| panic!("docker-compose.yml has no service {name:?}"))
}

/// Every service, in the file's order.
fn services(compose: &Value) -> Vec<(String, &Value)> {
    compose["services"]
        .as_mapping()
        .expect("docker-compose.yml has services")
        .iter()
        .map(|(name, s)| (name.as_str().expect("a service name").to_owned(), s))
        .collect()
}

/// The services built from the reference Dockerfile, in the file's order.
fn reference_services(compose: &Value) -> Vec<(String, &Value)> {
    let services: Vec<(String, &Value)> = services(compose)
        .into_iter()
        .filter(|(_, s)| s["build"]["dockerfile"].as_str() == Some(REFERENCE_DOCKERFILE))
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
    if service["ports"].is_null() {
        return Vec::new();
    }
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

/// The service that publishes host port `port`, with the container port it leads to.
fn publisher(compose: &Value, port: u16) -> (String, &Value, u16) {
    let found: Vec<(String, &Value, u16)> = services(compose)
        .into_iter()
        .filter_map(|(name, s)| {
            published(&name, s)
                .into_iter()
                .find(|(h, _)| *h == port)
                .map(|(_, c)| (name, s, c))
        })
        .collect();
    match found.len() {
        1 => found.into_iter().next().unwrap(),
        0 => panic!("no service of docker-compose.yml publishes 127.0.0.1:{port}"),
        _ => panic!("several services publish 127.0.0.1:{port}"),
    }
}

fn image(name: &str, service: &Value) -> String {
    service["image"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} has no image"))
        .to_owned()
}

fn profiles(service: &Value) -> Vec<String> {
    if service["profiles"].is_null() {
        Vec::new()
    } else {
        strings(&service["profiles"])
    }
}

fn depends_on(service: &Value) -> Vec<String> {
    match &service["depends_on"] {
        Value::Null => Vec::new(),
        Value::Sequence(_) => strings(&service["depends_on"]),
        Value::Mapping(m) => m.keys().map(scalar).collect(),
        other => panic!("depends_on {other:?}"),
    }
}

/// The argument after `flag` in a command.
fn flag_value<'a>(command: &'a [String], flag: &str) -> Option<&'a str> {
    command
        .iter()
        .position(|a| a == flag)
        .and_then(|i| command.get(i + 1))
        .map(String::as_str)
}

fn port_of(address: &str) -> u16 {
    address
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("{address:?} is not HOST:PORT"))
}

fn version(text: &str) -> Vec<u32> {
    text.split('.')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|e| panic!("version {text:?}: {e}"))
        })
        .collect()
}

/// One deployment file: its path, the profile it comes up with (None: no profile), what it
/// attaches to.
struct DeploymentFile {
    path: String,
    profile: Option<String>,
    deployment: Deployment,
}

/// deploy/compose.toml and every deploy/compose-PROFILE.toml.
fn deployment_files() -> Vec<DeploymentFile> {
    let mut files: Vec<(String, Option<String>)> = vec![(DEFAULT_DEPLOYMENT.to_owned(), None)];
    let mut profiled: Vec<(String, Option<String>)> = std::fs::read_dir(workspace().join("deploy"))
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let profile = name.strip_prefix("compose-")?.strip_suffix(".toml")?;
            Some((format!("deploy/{name}"), Some(profile.to_owned())))
        })
        .collect();
    profiled.sort();
    files.extend(profiled);
    files
        .into_iter()
        .map(|(path, profile)| DeploymentFile {
            deployment: Deployment::read(&workspace().join(&path), false)
                .unwrap_or_else(|e| panic!("{path}: {e}")),
            path,
            profile,
        })
        .collect()
}

/// Every target of every deployment file, once each; the same target must be attached alike
/// wherever it is named.
fn attached_targets() -> Vec<AttachedTarget> {
    let mut targets: Vec<(String, AttachedTarget)> = Vec::new();
    for file in deployment_files() {
        for t in file.deployment.targets {
            match targets.iter().find(|(_, o)| o.name == t.name) {
                Some((first, o)) => assert_eq!(
                    o, &t,
                    "{} attaches {} otherwise than {first}",
                    file.path, t.name
                ),
                None => targets.push((file.path.clone(), t)),
            }
        }
    }
    targets.into_iter().map(|(_, t)| t).collect()
}

/// Every target the manifests under targets/ declare.
fn target_defs() -> Vec<TargetDef> {
    manifest::discover(&workspace().join("targets")).unwrap()
}

fn target_def(name: &str) -> TargetDef {
    target_defs()
        .into_iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no target manifest declares {name:?}"))
}

/// A proxy of deploy/toxiproxy.json.
#[derive(Debug)]
struct Proxy {
    name: String,
    listen: String,
    upstream: String,
    enabled: bool,
}

fn proxies() -> Vec<Proxy> {
    let proxies: Vec<serde_json::Value> =
        serde_json::from_str(&read("deploy/toxiproxy.json")).expect("deploy/toxiproxy.json");
    proxies
        .iter()
        .map(|p| {
            let text = |key: &str| {
                p[key]
                    .as_str()
                    .unwrap_or_else(|| panic!("deploy/toxiproxy.json: {p}: no {key}"))
                    .to_owned()
            };
            Proxy {
                name: text("name"),
                listen: text("listen"),
                upstream: text("upstream"),
                enabled: p["enabled"] == true,
            }
        })
        .collect()
}

/// The proxy of deploy/toxiproxy.json a deployment target is faulted through.
fn proxy_of(target: &AttachedTarget) -> Proxy {
    proxies()
        .into_iter()
        .find(|p| p.name == target.proxy)
        .unwrap_or_else(|| {
            panic!(
                "{} is faulted through proxy {:?}, which deploy/toxiproxy.json does not create",
                target.name, target.proxy
            )
        })
}

/// A deployment target's instance services, in its instance order, each with the container
/// port its instance address leads to.
fn instance_services<'a>(
    compose: &'a Value,
    target: &AttachedTarget,
) -> Vec<(String, &'a Value, u16)> {
    target
        .instances
        .iter()
        .enumerate()
        .map(|(index, addr)| {
            let (name, s, container) = publisher(compose, addr.port());
            assert_eq!(
                name,
                format!("{}-{index}", target.name),
                "{}'s instance {index} at {addr} is published by service {name}",
                target.name
            );
            (name, s, container)
        })
        .collect()
}

/// The Redis service a deployment target's redis_admin address leads to.
fn redis_service_of<'a>(compose: &'a Value, target: &AttachedTarget) -> (String, &'a Value) {
    let admin = target
        .redis_admin
        .unwrap_or_else(|| panic!("{} names no redis_admin", target.name));
    let (name, s, container) = publisher(compose, admin.port());
    assert_eq!(
        container, REDIS_PORT,
        "{}'s redis_admin {admin} leads to {name}:{container}, not to redis-server's port",
        target.name
    );
    (name, s)
}

/// One stage of a Dockerfile: its base image, its name, its instructions (keyword, rest).
struct Stage {
    from: String,
    name: Option<String>,
    instructions: Vec<(String, String)>,
}

impl Stage {
    fn all(&self, keyword: &str) -> Vec<&str> {
        self.instructions
            .iter()
            .filter(|(k, _)| k == keyword)
            .map(|(_, rest)| rest.as_str())
            .collect()
    }

    /// The stage's working directory (the last WORKDIR).
    fn workdir(&self) -> &str {
        self.all("WORKDIR").last().copied().unwrap_or("/")
    }

    /// The exec form of its last `keyword` (ENTRYPOINT or CMD), if it has one.
    fn exec_form(&self, keyword: &str) -> Option<Vec<String>> {
        self.all(keyword).last().map(|rest| {
            serde_json::from_str(rest).unwrap_or_else(|e| {
                panic!("{keyword} {rest}: write the exec form (a JSON list): {e}")
            })
        })
    }

    /// Its `ENV` settings.
    fn env(&self) -> BTreeMap<String, String> {
        self.all("ENV")
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
}

/// A Dockerfile's stages, continuation lines joined and comments left out.
fn dockerfile_stages(relative: &str) -> Vec<Stage> {
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in read(relative).lines() {
        let line = line.trim();
        if line.starts_with('#') || (current.is_empty() && line.is_empty()) {
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
    let mut stages: Vec<Stage> = Vec::new();
    for (keyword, rest) in instructions {
        if keyword == "FROM" {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let (from, name) = match words[..] {
                [from] => (from, None),
                [from, as_, name] if as_.eq_ignore_ascii_case("as") => {
                    (from, Some(name.to_owned()))
                }
                _ => panic!("{relative}: FROM {rest}"),
            };
            stages.push(Stage {
                from: from.to_owned(),
                name,
                instructions: Vec::new(),
            });
        } else {
            stages
                .last_mut()
                .unwrap_or_else(|| panic!("{relative}: {keyword} before any FROM"))
                .instructions
                .push((keyword, rest));
        }
    }
    assert!(!stages.is_empty(), "{relative} has no FROM");
    stages
}

/// The stage an image ends with, the one a container runs.
fn runtime(stages: &[Stage]) -> &Stage {
    stages.last().unwrap()
}

/// A `COPY`'s options, sources and destination.
struct Copy {
    from: Option<String>,
    sources: Vec<String>,
    destination: String,
}

fn copies(stage: &Stage) -> Vec<Copy> {
    stage
        .all("COPY")
        .iter()
        .map(|rest| {
            let mut from = None;
            let mut paths = Vec::new();
            for word in rest.split_whitespace() {
                if let Some(stage) = word.strip_prefix("--from=") {
                    from = Some(stage.to_owned());
                } else if word.starts_with("--") {
                    // --chown, --chmod, --link: the paths are what matter here.
                } else {
                    paths.push(word.to_owned());
                }
            }
            let destination = paths.pop().unwrap_or_else(|| panic!("COPY {rest}"));
            assert!(!paths.is_empty(), "COPY {rest} has no source");
            Copy {
                from,
                sources: paths,
                destination,
            }
        })
        .collect()
}

/// `path` as seen from `workdir`: absolute paths stay, relative ones are joined.
fn absolute(workdir: &str, path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{}/{path}", workdir.trim_end_matches('/'))
    }
}

/// The workspace paths a command or environment names (a word or a `-X...=` value starting
/// with targets/, target/ or .tools/).
fn workspace_paths<'a>(words: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    words
        .into_iter()
        .map(|w| w.rsplit('=').next().unwrap_or(w))
        .filter(|w| {
            ["targets/", "target/", ".tools/"]
                .iter()
                .any(|p| w.starts_with(p))
        })
        .map(str::to_owned)
        .collect()
}

/// A base image's name and tag.
fn split_image(reference: &str) -> (&str, &str) {
    reference
        .rsplit_once(':')
        .filter(|(_, tag)| !tag.contains('/'))
        .unwrap_or_else(|| panic!("image {reference:?} has no tag: pin one"))
}

/// The leading `X.Y[.Z]` of an image tag (`1.26.7-bookworm` → 1.26.7).
fn tag_version(tag: &str) -> &str {
    let end = tag
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(tag.len());
    tag[..end].trim_end_matches('.')
}

/// The Debian release a tag names (`golang:1.26.7-bookworm`, `debian:bookworm-slim`).
fn debian_release(tag: &str) -> Option<&'static str> {
    ["bullseye", "bookworm", "trixie"]
        .into_iter()
        .find(|r| tag.split('-').any(|part| part == *r))
}

/// Every Dockerfile docker-compose.yml builds, with the targets its services run.
fn images(compose: &Value) -> BTreeMap<String, Vec<TargetDef>> {
    let mut images: BTreeMap<String, Vec<TargetDef>> = BTreeMap::new();
    for t in attached_targets() {
        let (name, s, _) = instance_services(compose, &t).remove(0);
        let dockerfile = s["build"]["dockerfile"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} is not built from a Dockerfile"))
            .to_owned();
        let defs = images.entry(dockerfile).or_default();
        if !defs.iter().any(|d| d.name == t.name) {
            defs.push(target_def(&t.name));
        }
    }
    images
}

/// The limit and window every scenario runs with: attached, the instances' limit cannot follow
/// the scenario, so every scenario must be written for the one they run with.
fn scenarios_limit() -> (f64, std::time::Duration) {
    let mut limits = BTreeSet::new();
    for entry in std::fs::read_dir(workspace().join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let s = Scenario::load(&path).unwrap();
            limits.insert((s.limit.to_bits(), s.window));
        }
    }
    let [(limit, window)] = limits.into_iter().collect::<Vec<_>>()[..] else {
        panic!("the scenarios use several limits or windows; the compose instances run one");
    };
    (f64::from_bits(limit), window)
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
fn every_redis_is_the_documented_version_and_keeps_nothing_on_disk() {
    let compose = compose();
    let redis: Vec<(String, &Value)> = services(&compose)
        .into_iter()
        .filter(|(_, s)| s["image"].as_str().is_some_and(|i| i.starts_with("redis:")))
        .collect();
    assert!(
        redis.len() >= attached_targets().len(),
        "{} Redis",
        redis.len()
    );
    for (name, s) in redis {
        assert_eq!(image(&name, s), format!("redis:{REDIS_VERSION}"), "{name}");
        let command = strings(&s["command"]);
        assert_eq!(
            flag_value(&command, "--save"),
            Some(""),
            "{name}: {command:?}"
        );
        assert_eq!(
            flag_value(&command, "--appendonly"),
            Some("no"),
            "{name}: {command:?}"
        );
    }
}

#[test]
fn every_service_is_toxiproxy_or_a_deployment_targets_redis_or_instance() {
    let compose = compose();
    let mut accounted: BTreeSet<String> = BTreeSet::from(["toxiproxy".to_owned()]);
    for t in attached_targets() {
        let (redis, _) = redis_service_of(&compose, &t);
        assert!(
            accounted.insert(redis.clone()),
            "{redis} is the Redis of two targets"
        );
        for (name, _, _) in instance_services(&compose, &t) {
            assert!(accounted.insert(name.clone()), "{name} is counted twice");
        }
    }
    let all: BTreeSet<String> = services(&compose).into_iter().map(|(n, _)| n).collect();
    let unattached: Vec<&String> = all.difference(&accounted).collect();
    assert!(
        unattached.is_empty(),
        "no deployment file attaches to {unattached:?}"
    );
}

#[test]
fn every_instance_runs_its_variant_as_failmode_would_start_it() {
    let (limit, window) = scenarios_limit();
    let compose = compose();
    for t in attached_targets() {
        let def = target_def(&t.name);
        let instances = instance_services(&compose, &t);
        assert_eq!(
            instances.len(),
            def.default_instances as usize,
            "failmode starts {} instances of {}",
            def.default_instances,
            def.name
        );
        // Redis is the proxy's address in the compose network.
        let redis_url = format!("redis://toxiproxy:{}", port_of(&proxy_of(&t).listen));
        for (index, (name, s, container)) in instances.iter().enumerate() {
            let slot = InstanceSlot {
                target: &def.name,
                index,
                count: def.default_instances,
                port: *container,
                redis_url: &redis_url,
                limit,
                window,
            };
            let mut expected = def.env_for(&slot);
            // Where to listen is the image's: every interface, on the port published.
            let dockerfile = s["build"]["dockerfile"].as_str().unwrap();
            let image_env = runtime(&dockerfile_stages(dockerfile)).env();
            assert_eq!(
                image_env.get("FAILMODE_BIND").map(String::as_str),
                Some("0.0.0.0"),
                "{dockerfile}: FAILMODE_BIND"
            );
            assert_eq!(
                image_env.get("FAILMODE_PORT"),
                expected.get("FAILMODE_PORT"),
                "{dockerfile}: FAILMODE_PORT, the port {name} publishes"
            );
            expected.retain(|k, _| !IMAGE_VARIABLES.contains(&k.as_str()));
            assert_eq!(environment(s), expected, "{name}");
        }
    }
}

#[test]
fn every_target_has_its_own_redis_behind_its_own_proxy_which_toxiproxy_loads() {
    let compose = compose();
    let targets = attached_targets();
    let mut listens = BTreeSet::new();
    for t in &targets {
        let proxy = proxy_of(t);
        assert_eq!(
            proxy.name,
            format!("{}-redis", t.name),
            "{}'s proxy",
            t.name
        );
        assert!(
            proxy.enabled,
            "{}: a disabled proxy is refused by an attached run",
            proxy.name
        );
        assert!(
            listens.insert(port_of(&proxy.listen)),
            "{}: listen port {} twice",
            proxy.name,
            proxy.listen
        );
        let (redis, _) = redis_service_of(&compose, t);
        assert_eq!(
            proxy.upstream,
            format!("{redis}:{REDIS_PORT}"),
            "{}",
            proxy.name
        );
    }
    // No proxy that no deployment faults.
    let named: BTreeSet<&str> = targets.iter().map(|t| t.proxy.as_str()).collect();
    for p in proxies() {
        assert!(
            named.contains(p.name.as_str()),
            "no deployment file faults {p:?}"
        );
    }
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
fn the_deployment_files_attach_to_the_ports_compose_publishes() {
    let compose = compose();
    let toxiproxy = service(&compose, "toxiproxy");
    let api = flag_value(&strings(&toxiproxy["command"]), "-port")
        .map_or(TOXIPROXY_API_PORT, |p| p.parse().unwrap());
    let api = host_port("toxiproxy", toxiproxy, api);
    for file in deployment_files() {
        assert_eq!(
            file.deployment.toxiproxy.port(),
            api,
            "{}: Toxiproxy API port",
            file.path
        );
        for t in &file.deployment.targets {
            // Each instance address is a service's published port, in order (checked by the
            // lookup), and each leads to the port its image listens on.
            for (name, s, container) in instance_services(&compose, t) {
                let dockerfile = s["build"]["dockerfile"].as_str().unwrap();
                let listen = runtime(&dockerfile_stages(dockerfile)).env()["FAILMODE_PORT"].clone();
                assert_eq!(container.to_string(), listen, "{}: {name}", file.path);
            }
            redis_service_of(&compose, t);
        }
    }
}

#[test]
fn each_deployment_file_comes_up_with_its_profile() {
    let compose = compose();
    let files = deployment_files();
    for file in &files {
        let enabled = |name: &str| {
            let p = profiles(service(&compose, name));
            p.is_empty() || file.profile.as_ref().is_some_and(|f| p.contains(f))
        };
        // What the file attaches to and everything that waits for.
        let mut needed: Vec<String> = vec!["toxiproxy".to_owned()];
        for t in &file.deployment.targets {
            needed.push(redis_service_of(&compose, t).0);
            needed.extend(
                instance_services(&compose, t)
                    .into_iter()
                    .map(|(n, _, _)| n),
            );
        }
        let mut seen = BTreeSet::new();
        while let Some(name) = needed.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            let what = match &file.profile {
                Some(p) => format!("`docker compose --profile {p} up`"),
                None => "`docker compose up`".to_owned(),
            };
            assert!(
                enabled(&name),
                "{}: {what} does not start {name} (profiles {:?})",
                file.path,
                profiles(service(&compose, &name))
            );
            needed.extend(depends_on(service(&compose, &name)));
        }
    }
    // Every profile has its deployment file, and the peers profile starts every service.
    let with_file: BTreeSet<String> = files.iter().filter_map(|f| f.profile.clone()).collect();
    for (name, s) in services(&compose) {
        let p = profiles(s);
        for profile in &p {
            assert!(
                with_file.contains(profile),
                "{name}: profile {profile} has no deploy/compose-{profile}.toml"
            );
        }
        assert!(
            p.is_empty() || p.iter().any(|x| x == PEERS_PROFILE),
            "{name}: `--profile {PEERS_PROFILE}` does not start it ({p:?})"
        );
    }
}

#[test]
fn the_peers_profile_attaches_the_peers_scenario_and_the_others_split_it() {
    let scenario = Scenario::load(&workspace().join("scenarios/peers.toml")).unwrap();
    let files = deployment_files();
    let peers = files
        .iter()
        .find(|f| f.profile.as_deref() == Some(PEERS_PROFILE))
        .expect("a deploy/compose-peers.toml");
    let attached: Vec<(&str, usize)> = peers
        .deployment
        .targets
        .iter()
        .map(|t| (t.name.as_str(), t.instances.len()))
        .collect();
    let wanted: Vec<(&str, usize)> = scenario
        .targets
        .iter()
        .map(|t| {
            let count = t
                .instances
                .unwrap_or_else(|| target_def(&t.name).default_instances);
            (t.name.as_str(), count as usize)
        })
        .collect();
    assert_eq!(
        attached, wanted,
        "{} against scenarios/peers.toml",
        peers.path
    );
    // The default file and the other profiles' files cover it, each target once.
    let mut split: Vec<String> = files
        .iter()
        .filter(|f| f.profile.as_deref() != Some(PEERS_PROFILE))
        .flat_map(|f| f.deployment.targets.iter().map(|t| t.name.clone()))
        .collect();
    split.sort();
    let mut all: Vec<String> = wanted.iter().map(|(n, _)| (*n).to_owned()).collect();
    all.sort();
    assert_eq!(split, all, "the deployment files other than {}", peers.path);
}

#[test]
fn every_image_runs_its_manifests_start_command_from_the_workspace_layout() {
    let compose = compose();
    for t in attached_targets() {
        let def = target_def(&t.name);
        for (name, s, container) in instance_services(&compose, &t) {
            assert_eq!(
                s["build"]["context"].as_str(),
                Some("."),
                "{name}: build context"
            );
            let dockerfile = s["build"]["dockerfile"].as_str().unwrap();
            let stages = dockerfile_stages(dockerfile);
            let stage = runtime(&stages);
            // Docker's rules: a service's entrypoint replaces the image's and drops its CMD.
            let (entrypoint, cmd) = if s["entrypoint"].is_null() {
                (
                    stage.exec_form("ENTRYPOINT").unwrap_or_default(),
                    stage.exec_form("CMD").unwrap_or_default(),
                )
            } else {
                (strings(&s["entrypoint"]), Vec::new())
            };
            let cmd = if s["command"].is_null() {
                cmd
            } else {
                strings(&s["command"])
            };
            let argv: Vec<String> = entrypoint.into_iter().chain(cmd).collect();
            assert_eq!(argv, def.command, "{name} ({dockerfile})");

            // The command's and the environment's workspace paths are where the image put
            // them: the runtime stage's copies keep the workspace layout under its WORKDIR.
            let workdir = stage.workdir();
            assert!(workdir.starts_with('/'), "{dockerfile}: WORKDIR {workdir}");
            let copies = copies(stage);
            for path in workspace_paths(def.command.iter().chain(def.env.values())) {
                let path = absolute(workdir, &path);
                assert!(
                    copies.iter().any(|c| {
                        let dest = absolute(workdir, &c.destination);
                        let dest = dest.trim_end_matches('/');
                        path == dest || path.starts_with(&format!("{dest}/"))
                    }),
                    "{dockerfile}: nothing is copied to {path}, which {} names",
                    def.name
                );
            }

            // Listening where the service publishes, probed where the manifest says.
            assert_eq!(
                stage.all("EXPOSE"),
                [container.to_string().as_str()],
                "{dockerfile}: EXPOSE"
            );
            let probe = strings(&s["healthcheck"]["test"]).join(" ");
            assert!(
                probe.contains(&format!("/dev/tcp/127.0.0.1/{container}"))
                    && probe.contains(&format!("GET {} ", def.ready_path)),
                "{name}: the healthcheck {probe:?} does not ask {} on {container}",
                def.ready_path
            );
            let start_period = scalar(&s["healthcheck"]["start_period"]);
            assert_eq!(
                humantime::parse_duration(&start_period).ok(),
                Some(def.ready_timeout),
                "{name}: the healthcheck's start_period is the manifest's [ready] timeout"
            );
        }
    }
}

#[test]
fn every_runtime_stage_keeps_the_workspace_layout_it_copies() {
    let compose = compose();
    for dockerfile in images(&compose).keys() {
        let stages = dockerfile_stages(dockerfile);
        let stage = runtime(&stages);
        let workdir = stage.workdir();
        for c in copies(stage) {
            // A source, relative to the workspace (the context) or to its stage's WORKDIR.
            let source_root = match &c.from {
                None => "/".to_owned(),
                Some(from) => {
                    let source = stages
                        .iter()
                        .find(|s| s.name.as_deref() == Some(from.as_str()))
                        .unwrap_or_else(|| panic!("{dockerfile}: no stage {from}"));
                    format!("{}/", source.workdir().trim_end_matches('/'))
                }
            };
            let dest = absolute(workdir, &c.destination);
            for source in &c.sources {
                let relative = absolute("/", source)
                    .strip_prefix(&source_root)
                    .unwrap_or_else(|| panic!("{dockerfile}: COPY {source}: outside {source_root}"))
                    .to_owned();
                let into_folder = format!(
                    "{}/{}",
                    dest.trim_end_matches('/'),
                    Path::new(&relative).file_name().unwrap().to_str().unwrap()
                );
                let same = absolute(workdir, &relative);
                assert!(
                    same.trim_end_matches('/') == dest.trim_end_matches('/')
                        || (dest.ends_with('/') && same == into_folder),
                    "{dockerfile}: COPY {source} {} does not keep the workspace's layout under {workdir}",
                    c.destination
                );
            }
        }
    }
}

#[test]
fn every_image_is_built_by_its_manifests_build_step() {
    let compose = compose();
    for (dockerfile, defs) in images(&compose) {
        let stages = dockerfile_stages(&dockerfile);
        let runs: Vec<&str> = stages.iter().flat_map(|s| s.all("RUN")).collect();
        for def in &defs {
            let Some(build) = &def.build else { continue };
            if build[0] == "cargo" {
                // The reference: built with --locked, see the reference image's own test.
                continue;
            }
            let step = build.join(" ");
            assert!(
                runs.iter()
                    .any(|r| r.split("&&").any(|part| part.trim() == step)),
                "{dockerfile} does not run {}'s build step `{step}`: {runs:?}",
                def.name
            );
        }
        // A class-data-sharing archive is only good for the JVM that made it: the runtime
        // stage makes the one its command names.
        for def in &defs {
            let Some(archive) = def
                .command
                .iter()
                .find_map(|w| w.strip_prefix("-XX:SharedArchiveFile="))
            else {
                continue;
            };
            let stage = runtime(&stages);
            let made = stage.all("RUN").iter().any(|r| {
                let script = r.split_whitespace().next().unwrap();
                std::fs::read_to_string(workspace().join(script)).is_ok_and(|text| {
                    text.contains("-XX:ArchiveClassesAtExit")
                        && text.contains(Path::new(archive).file_name().unwrap().to_str().unwrap())
                })
            });
            assert!(
                made,
                "{dockerfile}'s runtime stage does not make {archive} with its JVM"
            );
        }
    }
}

/// The `>=X.Y` of a version requirement such as package.json's engines (`>=20`).
fn at_least(requirement: &str) -> &str {
    requirement
        .trim()
        .strip_prefix(">=")
        .unwrap_or_else(|| panic!("{requirement:?} is not >=VERSION"))
        .trim()
}

/// `go.mod`'s `go` and `toolchain` versions.
fn go_mod(relative: &str) -> (String, Option<String>) {
    let text = read(relative);
    let line = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().trim_start_matches("go").to_owned())
    };
    (
        line("go ").unwrap_or_else(|| panic!("{relative} has no go line")),
        line("toolchain "),
    )
}

#[test]
fn every_base_image_is_pinned_to_the_version_the_repository_asks_for() {
    let compose = compose();
    for (dockerfile, _) in images(&compose) {
        let stages = dockerfile_stages(&dockerfile);
        let names: Vec<&str> = stages.iter().filter_map(|s| s.name.as_deref()).collect();
        let bases: Vec<&str> = stages
            .iter()
            .map(|s| s.from.as_str())
            .filter(|f| !names.contains(f))
            .collect();
        let mut releases = BTreeSet::new();
        for base in &bases {
            let (name, tag) = split_image(base);
            assert!(
                !tag.contains("latest"),
                "{dockerfile}: {base} is not pinned"
            );
            releases.extend(debian_release(tag));
            let v = tag_version(tag);
            match name {
                "node" => {
                    let package: serde_json::Value =
                        serde_json::from_str(&read("targets/node/package.json")).unwrap();
                    let needed = at_least(package["engines"]["node"].as_str().unwrap());
                    assert_eq!(version(v).len(), 3, "{dockerfile}: {base}: pin X.Y.Z");
                    assert!(
                        version(v) >= version(needed),
                        "{base}: engines ask for {needed}"
                    );
                }
                "python" => {
                    assert_eq!(version(v).len(), 3, "{dockerfile}: {base}: pin X.Y.Z");
                    assert!(version(v) >= version(PYTHON_FLOOR), "{base}");
                }
                "golang" => {
                    let module = Path::new(&dockerfile).parent().unwrap().join("go.mod");
                    let (go, toolchain) = go_mod(module.to_str().unwrap());
                    assert_eq!(version(v).len(), 3, "{dockerfile}: {base}: pin X.Y.Z");
                    assert!(
                        version(v) >= version(&go),
                        "{base}: {} asks for go {go}",
                        module.display()
                    );
                    if let Some(toolchain) = toolchain {
                        assert_eq!(v, toolchain, "{base}: {}'s toolchain", module.display());
                    }
                }
                "rust" => {
                    let root: toml::Table = read("Cargo.toml").parse().unwrap();
                    let needed = root["workspace"]["package"]["rust-version"]
                        .as_str()
                        .unwrap();
                    assert!(
                        version(v) >= version(needed),
                        "{base}: rust-version {needed}"
                    );
                }
                "maven" | "eclipse-temurin" => {
                    // maven:3.9.16-eclipse-temurin-17, eclipse-temurin:17.0.15_6-jre-noble.
                    let java = match name {
                        "maven" => tag.split("eclipse-temurin-").nth(1).map(tag_version),
                        _ => Some(tag_version(tag)),
                    }
                    .unwrap_or_else(|| panic!("{base}: which Java?"));
                    let pom = read(
                        Path::new(&dockerfile)
                            .parent()
                            .unwrap()
                            .join("pom.xml")
                            .to_str()
                            .unwrap(),
                    );
                    let wanted = pom
                        .split("<java.version>")
                        .nth(1)
                        .and_then(|rest| rest.split('<').next())
                        .expect("pom.xml's java.version");
                    assert_eq!(
                        version(java)[0],
                        version(wanted)[0],
                        "{base}: java.version {wanted}"
                    );
                }
                "debian" => assert!(debian_release(tag).is_some(), "{base}: name a release"),
                other => panic!("{dockerfile}: {base}: no rule says which {other} to pin"),
            }
        }
        // A binary built in one stage runs with the glibc of another: one Debian release.
        assert!(
            releases.len() <= 1,
            "{dockerfile}: Debian releases {releases:?}"
        );
        // A virtualenv or node_modules copied between stages wants the same interpreter.
        if bases
            .iter()
            .any(|b| b.starts_with("python:") || b.starts_with("node:"))
        {
            assert!(
                bases.windows(2).all(|w| w[0] == w[1]),
                "{dockerfile}: its stages run different interpreters: {bases:?}"
            );
        }
    }
    // The images compose runs without building them are pinned too.
    for (name, s) in services(&compose) {
        let reference = image(&name, s);
        let (_, tag) = split_image(&reference);
        assert!(!tag.contains("latest"), "{name}: {reference} is not pinned");
        if !s["build"].is_null() {
            assert_eq!(tag, "local", "{name}: a built image is tagged local");
        }
    }
}

/// .dockerignore's patterns, in order: (re-included with `!`, the path's segments).
fn dockerignore() -> Vec<(bool, Vec<String>)> {
    read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (negated, pattern) = l.strip_prefix('!').map_or((false, l), |p| (true, p));
            let segments = pattern
                .trim_matches('/')
                .split('/')
                .map(str::to_owned)
                .collect();
            (negated, segments)
        })
        .collect()
}

/// A path segment against a pattern segment with `*` and `?`.
fn segment_matches(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            segment_matches(&pattern[1..], text)
                || (!text.is_empty() && segment_matches(pattern, &text[1..]))
        }
        (Some(b'?'), Some(_)) => segment_matches(&pattern[1..], &text[1..]),
        (Some(p), Some(t)) if p == t => segment_matches(&pattern[1..], &text[1..]),
        _ => false,
    }
}

/// A path against a pattern whose `**` spans any number of segments.
fn path_matches(pattern: &[String], path: &[&str]) -> bool {
    match pattern.first() {
        None => path.is_empty(),
        Some(p) if p == "**" => (0..=path.len()).any(|n| path_matches(&pattern[1..], &path[n..])),
        Some(p) => {
            !path.is_empty()
                && segment_matches(p.as_bytes(), path[0].as_bytes())
                && path_matches(&pattern[1..], &path[1..])
        }
    }
}

/// Whether Docker leaves `path` out of the build context: the last pattern that matches it or
/// one of its folders decides.
fn ignored(patterns: &[(bool, Vec<String>)], path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut out = false;
    for (negated, pattern) in patterns {
        if (1..=segments.len()).any(|n| path_matches(pattern, &segments[..n])) {
            out = !negated;
        }
    }
    out
}

#[test]
fn the_build_context_keeps_dependencies_and_output_out_but_lets_in_what_is_copied() {
    let patterns = dockerignore();
    for out in [
        "targets/node/node_modules/express/package.json",
        ".tools/python/bin/gunicorn",
        ".tools/bin/failmode-redis-rate",
        "target/release/failmode-reference",
        "targets/reference/target/debug/x",
        "results/latest/run.json",
        "targets/python/flask-limiter/__pycache__/app.cpython-311.pyc",
        ".git/HEAD",
    ] {
        assert!(ignored(&patterns, out), "{out} is sent to the Docker build");
    }
    let compose = compose();
    for dockerfile in images(&compose).keys() {
        for stage in dockerfile_stages(dockerfile) {
            for c in copies(&stage).into_iter().filter(|c| c.from.is_none()) {
                for source in &c.sources {
                    assert!(
                        workspace().join(source).exists(),
                        "{dockerfile}: COPY {source}: not in the workspace"
                    );
                    assert!(
                        !ignored(&patterns, source),
                        "{dockerfile}: COPY {source}: .dockerignore leaves it out"
                    );
                }
            }
        }
    }
}

#[test]
fn the_reference_image_is_built_by_the_package_of_the_binary_the_manifest_starts() {
    let stages = dockerfile_stages(REFERENCE_DOCKERFILE);
    let def = target_def("reference");
    let binary = Path::new(&def.command[0])
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();

    // Built by the package that declares that binary, with the workspace's Rust or newer.
    let builder = stages
        .iter()
        .find(|s| s.name.as_deref() == Some("builder"))
        .expect("a FROM … AS builder stage");
    let run = builder
        .all("RUN")
        .into_iter()
        .find(|r| r.contains("cargo build"))
        .expect("the Dockerfile runs cargo build");
    let words: Vec<String> = run.split_whitespace().map(str::to_owned).collect();
    assert!(
        words.iter().any(|w| w == "--locked"),
        "{run}: the locked versions"
    );
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
    // Cargo resolves the whole workspace: every member must be copied in.
    let copied: Vec<String> = copies(builder)
        .into_iter()
        .flat_map(|c| c.sources)
        .collect();
    for m in &members {
        assert!(
            copied.iter().any(|c| c == &format!("{m}/")),
            "the Dockerfile does not copy workspace member {m}/: {copied:?}"
        );
    }
    // The runtime stage holds that binary where the manifest's command finds it.
    let runtime = runtime(&stages);
    let release = format!("{}/target/release/{binary}", builder.workdir());
    assert!(
        copies(runtime)
            .iter()
            .any(|c| c.from.as_deref() == Some("builder")
                && c.sources == [release.clone()]
                && absolute(runtime.workdir(), &c.destination)
                    == absolute(runtime.workdir(), &def.command[0])),
        "the runtime stage does not copy {release} to {}",
        def.command[0]
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
    // Every profile, so that the peers' services are read too.
    let config = Command::new("docker")
        .args([
            "compose",
            "--file",
            "docker-compose.yml",
            "--profile",
            "*",
            "config",
            "--quiet",
        ])
        .current_dir(workspace())
        .output()
        .unwrap();
    assert!(
        config.status.success(),
        "`docker compose --profile '*' config --quiet` refuses docker-compose.yml ({}): {}",
        config.status,
        String::from_utf8_lossy(&config.stderr).trim()
    );
}
