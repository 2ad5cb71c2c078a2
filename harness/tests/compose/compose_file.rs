//! docker-compose.yml as Docker Compose reads it, and what its services say.

use std::collections::BTreeMap;

use serde_norway::Value;

use crate::{REFERENCE_DOCKERFILE, read};

/// docker-compose.yml with its `<<` merge keys applied, as Docker Compose reads it. A merged
/// mapping may hold merge keys of its own (an anchor built on another): serde_norway's
/// `apply_merge` leaves those in place for the next pass, so it runs until none is left.
pub(crate) fn compose() -> Value {
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

pub(crate) fn has_merge_key(value: &Value) -> bool {
    match value {
        Value::Mapping(m) => m.contains_key("<<") || m.values().any(has_merge_key),
        Value::Sequence(s) => s.iter().any(has_merge_key),
        _ => false,
    }
}

pub(crate) fn service<'a>(compose: &'a Value, name: &str) -> &'a Value {
    compose["services"]
        .get(name)
        .unwrap_or_else(|| panic!("docker-compose.yml has no service {name:?}"))
}

/// Every service, in the file's order.
pub(crate) fn services(compose: &Value) -> Vec<(String, &Value)> {
    compose["services"]
        .as_mapping()
        .expect("docker-compose.yml has services")
        .iter()
        .map(|(name, s)| (name.as_str().expect("a service name").to_owned(), s))
        .collect()
}

/// The services built from the reference Dockerfile, in the file's order.
pub(crate) fn reference_services(compose: &Value) -> Vec<(String, &Value)> {
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

pub(crate) fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => panic!("{other:?} is not a scalar"),
    }
}

pub(crate) fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .unwrap_or_else(|| panic!("{value:?} is not a list"))
        .iter()
        .map(scalar)
        .collect()
}

/// A service's `environment`, in either of Compose's forms.
pub(crate) fn environment(service: &Value) -> BTreeMap<String, String> {
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
pub(crate) fn published(name: &str, service: &Value) -> Vec<(u16, u16)> {
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
pub(crate) fn host_port(name: &str, service: &Value, container: u16) -> u16 {
    let ports = published(name, service);
    ports
        .iter()
        .find(|(_, c)| *c == container)
        .map(|(h, _)| *h)
        .unwrap_or_else(|| panic!("{name} does not publish port {container}: {ports:?}"))
}

/// The service that publishes host port `port`, with the container port it leads to.
pub(crate) fn publisher(compose: &Value, port: u16) -> (String, &Value, u16) {
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

pub(crate) fn image(name: &str, service: &Value) -> String {
    service["image"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} has no image"))
        .to_owned()
}

pub(crate) fn profiles(service: &Value) -> Vec<String> {
    if service["profiles"].is_null() {
        Vec::new()
    } else {
        strings(&service["profiles"])
    }
}

pub(crate) fn depends_on(service: &Value) -> Vec<String> {
    match &service["depends_on"] {
        Value::Null => Vec::new(),
        Value::Sequence(_) => strings(&service["depends_on"]),
        Value::Mapping(m) => m.keys().map(scalar).collect(),
        other => panic!("depends_on {other:?}"),
    }
}

/// The argument after `flag` in a command.
pub(crate) fn flag_value<'a>(command: &'a [String], flag: &str) -> Option<&'a str> {
    command
        .iter()
        .position(|a| a == flag)
        .and_then(|i| command.get(i + 1))
        .map(String::as_str)
}

pub(crate) fn port_of(address: &str) -> u16 {
    address
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("{address:?} is not HOST:PORT"))
}
