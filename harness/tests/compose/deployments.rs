//! The deployment files under deploy/, the Toxiproxy proxies they fault, the target manifests
//! they name, and the compose services each of their targets is made of.

use failmode::deployment::{AttachedTarget, Deployment};
use failmode::targets::manifest::{self, TargetDef};
use serde_norway::Value;

use crate::compose_file::publisher;
use crate::support::workspace;
use crate::{DEFAULT_DEPLOYMENT, REDIS_PORT, read};

/// One deployment file: its path, the profile it comes up with (None: no profile), what it
/// attaches to.
pub(crate) struct DeploymentFile {
    pub(crate) path: String,
    pub(crate) profile: Option<String>,
    pub(crate) deployment: Deployment,
}

/// deploy/compose.toml and every deploy/compose-PROFILE.toml.
pub(crate) fn deployment_files() -> Vec<DeploymentFile> {
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
pub(crate) fn attached_targets() -> Vec<AttachedTarget> {
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
pub(crate) fn target_defs() -> Vec<TargetDef> {
    manifest::discover(&workspace().join("targets")).unwrap()
}

pub(crate) fn target_def(name: &str) -> TargetDef {
    target_defs()
        .into_iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no target manifest declares {name:?}"))
}

/// A proxy of deploy/toxiproxy.json.
#[derive(Debug)]
pub(crate) struct Proxy {
    pub(crate) name: String,
    pub(crate) listen: String,
    pub(crate) upstream: String,
    pub(crate) enabled: bool,
}

pub(crate) fn proxies() -> Vec<Proxy> {
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
pub(crate) fn proxy_of(target: &AttachedTarget) -> Proxy {
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
pub(crate) fn instance_services<'a>(
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
pub(crate) fn redis_service_of<'a>(
    compose: &'a Value,
    target: &AttachedTarget,
) -> (String, &'a Value) {
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
