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

#[path = "../support/mod.rs"]
mod support;

mod compose_file;
mod deployments;
mod dockerfile;
mod dockerignore;
mod images;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use failmode::scenario::Scenario;
use failmode::targets::manifest::{InstanceSlot, TargetDef};
use serde_norway::Value;
use support::workspace;

use compose_file::{
    compose, depends_on, environment, flag_value, host_port, image, port_of, profiles,
    reference_services, service, services, strings,
};
use deployments::{
    attached_targets, deployment_files, instance_services, proxies, proxy_of, redis_service_of,
    target_def,
};
use dockerfile::{dockerfile_stages, runtime};

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

/// Variables the image sets instead of the service: where the instance listens inside it.
const IMAGE_VARIABLES: [&str; 2] = ["FAILMODE_BIND", "FAILMODE_PORT"];

fn read(relative: &str) -> String {
    let path = workspace().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn version(text: &str) -> Vec<u32> {
    text.split('.')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|e| panic!("version {text:?}: {e}"))
        })
        .collect()
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
        // As many as the peers scenario starts (the_peers_profile_… checks that), each told so.
        let instances = instance_services(&compose, &t);
        let count = u32::try_from(instances.len()).unwrap();
        // Redis is the proxy's address in the compose network.
        let redis_url = format!("redis://toxiproxy:{}", port_of(&proxy_of(&t).listen));
        for (index, (name, s, container)) in instances.iter().enumerate() {
            let slot = InstanceSlot {
                target: &def.name,
                index,
                count,
                port: *container,
                redis_url: &redis_url,
                sentinel: None,
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
        // Reached from the instances' containers: on every interface of Toxiproxy's.
        assert!(
            proxy.listen.starts_with("0.0.0.0:"),
            "{}: listens on {}",
            proxy.name,
            proxy.listen
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
