//! Target manifests (`targets/<dir>/target.toml`): how to build and start one instance of a
//! limiter, how to tell it is ready, and what request to send it. One manifest may declare
//! several targets (`[[variants]]`) that share a binary and differ in their environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::warm_up::{Aim, WarmUp};
use crate::identity::CallerIdentity;
use crate::limits::{LimitSource, TargetLimit};

/// Placeholders a manifest may use in its command and environment.
pub const PLACEHOLDERS: [&str; 10] = [
    "port",
    "redis_url",
    "sentinel_addrs",
    "sentinel_master",
    "instance_id",
    "instance_index",
    "instance_count",
    "limit",
    "window_ms",
    "window_s",
];

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read target manifest {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid target manifest {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "no target named {name:?}; available: {available} (targets come from the project's \
         failmode/targets/, failmode's checkout's targets/ when run inside it, where the peers \
         are, and the built-in reference; `failmode list` shows which)"
    )]
    Unknown { name: String, available: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    #[serde(default)]
    description: String,
    /// Run once before any instance starts, from the workspace root.
    build: Option<Vec<String>>,
    start: RawStart,
    ready: RawReady,
    request: RawRequest,
    default_instances: u32,
    metrics: Option<RawMetrics>,
    /// The limit the service enforces from its own configuration, if it does.
    limit: Option<RawLimit>,
    warm_up: Option<super::warm_up::RawWarmUp>,
    variants: Vec<RawVariant>,
}

/// `[limit]`: also a deployment file's per-target `limit` (`crate::deployment`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimit {
    requests: u64,
    window: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStart {
    command: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Set on top of `env` when the run's Redis is a Sentinel topology: how the service is
    /// told to ask the sentinels for its primary. A target without it keeps `{redis_url}`,
    /// the first primary's one address, through a failover.
    #[serde(default)]
    sentinel_env: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReady {
    path: String,
    timeout: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    path: String,
    /// `header` (the default), `source-address` or `x-forwarded-for`.
    caller: Option<String>,
    /// Required, and only allowed, with `caller = "header"`.
    caller_header: Option<String>,
    /// The status it answers when over the limit: 429, or 503 for a limiter that keeps its
    /// default (NGINX's `limit_req_status`).
    #[serde(default = "too_many_requests")]
    refuses_with: u16,
}

/// What a limiter answers over the limit unless its manifest says otherwise.
pub(crate) fn too_many_requests() -> u16 {
    429
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    path: String,
    fallback_counter: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVariant {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

/// A limit a manifest declares its service enforces: whole requests per caller per window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnLimit {
    pub requests: u64,
    pub window: Duration,
    /// Which file declared it: the manifest, or a deployment file over it.
    pub declared_in: LimitSource,
}

/// Above this a declared limit is a typo, not a rule any limiter enforces per caller.
const MAX_OWN_LIMIT: u64 = 1_000_000_000;
/// Above this a declared window is a typo: a run lasts minutes, and its allowance would be 0.
const MAX_OWN_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

impl OwnLimit {
    /// The limit its figures are judged against.
    pub fn judged(&self) -> TargetLimit {
        TargetLimit {
            limit: self.requests as f64,
            window_s: self.window.as_secs_f64(),
            source: self.declared_in,
        }
    }
}

/// Checks a declared limit: errors name the key and say what is wanted.
pub(crate) fn own_limit(raw: &RawLimit, declared_in: LimitSource) -> Result<OwnLimit, String> {
    if raw.requests == 0 || raw.requests > MAX_OWN_LIMIT {
        return Err(format!(
            "limit.requests = {}: between 1 and {MAX_OWN_LIMIT} requests per caller per window",
            raw.requests
        ));
    }
    let window = humantime::parse_duration(raw.window.trim()).map_err(|e| {
        format!(
            "limit.window = {:?}: {e} (e.g. \"1s\", \"500ms\")",
            raw.window
        )
    })?;
    if window.is_zero() || window > MAX_OWN_WINDOW {
        return Err(format!(
            "limit.window = {:?}: longer than zero and at most 24h",
            raw.window
        ));
    }
    Ok(OwnLimit {
        requests: raw.requests,
        window,
        declared_in,
    })
}

/// Checks `caller` (default `header`) and `caller_header` together: a header identity needs
/// a valid header name, the others take none.
pub(crate) fn caller_identity(
    caller: Option<&str>,
    caller_header: Option<&str>,
) -> Result<CallerIdentity, String> {
    let mode = caller.unwrap_or("header");
    let identity = match mode {
        "header" => {
            let Some(header) = caller_header.map(str::trim) else {
                return Err(
                    "request.caller_header is missing: with caller = \"header\" (the default) \
                     it names the header carrying the caller key, e.g. \"x-caller\""
                        .into(),
                );
            };
            if hyper::header::HeaderName::try_from(header).is_err() {
                return Err(format!(
                    "request.caller_header = {header:?} is not a valid HTTP header name"
                ));
            }
            return Ok(CallerIdentity::Header {
                header: header.to_owned(),
            });
        }
        "source-address" => CallerIdentity::SourceAddress,
        "x-forwarded-for" => CallerIdentity::XForwardedFor,
        other => {
            return Err(format!(
                "request.caller = {other:?} is not a caller identity; expected \"header\", \
                 \"source-address\" or \"x-forwarded-for\""
            ));
        }
    };
    if caller_header.is_some() {
        return Err(format!(
            "request.caller_header is set but request.caller = {mode:?} does not send it; \
             remove one of them"
        ));
    }
    Ok(identity)
}

/// One runnable target: a manifest's variant, fully resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetDef {
    pub name: String,
    pub description: String,
    pub manifest: PathBuf,
    /// Where its build and start commands run, and relative program paths are resolved
    /// from: the root of the project or checkout it was found in. `None`: the run's root.
    pub dir: Option<PathBuf>,
    pub build: Option<Vec<String>>,
    pub command: Vec<String>,
    /// The manifest's environment with the variant's on top; placeholders unexpanded.
    pub env: BTreeMap<String, String>,
    /// What goes on top of `env` when Redis is a Sentinel topology (`start.sentinel_env`,
    /// with the variant's values of the same keys); empty: the service takes one address.
    pub sentinel_env: BTreeMap<String, String>,
    pub ready_path: String,
    pub ready_timeout: Duration,
    pub request_path: String,
    /// How it tells the tenants apart: a header, their source address, `X-Forwarded-For`.
    pub caller: CallerIdentity,
    /// The limit the service enforces from its own configuration (`[limit]`); `None`: the
    /// scenario's, which failmode passes it through `{limit}` and `{window_ms}`.
    pub limit: Option<OwnLimit>,
    /// The status it refuses with over the limit: 429 or 503. Either way the outcome is counted
    /// under its own status; a declared 503 is only not taken for a broken target.
    pub refuses_with: u16,
    pub default_instances: u32,
    /// What each instance answers, unmeasured, before the load starts (`[warm_up]`).
    pub warm_up: WarmUp,
    pub metrics_path: Option<String>,
    pub fallback_counter: Option<String>,
}

/// `key` is where `text` is written (`start.command`, `start.env.PORT`), for the error.
fn check_placeholders(path: &Path, key: &str, text: &str) -> Result<(), ManifestError> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let name = &after[..close];
        if !PLACEHOLDERS.contains(&name) {
            return Err(ManifestError::Invalid {
                path: path.to_owned(),
                message: format!(
                    "{key}: unknown placeholder {{{name}}} in {text:?}; known: {}",
                    PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(" ")
                ),
            });
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

/// Reads one manifest into its targets.
pub fn read(path: &Path) -> Result<Vec<TargetDef>, ManifestError> {
    let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text, path)
}

/// Parses a manifest's text into its targets; `path` names it in errors and in each target.
pub fn parse(text: &str, path: &Path) -> Result<Vec<TargetDef>, ManifestError> {
    let invalid = |message: String| ManifestError::Invalid {
        path: path.to_owned(),
        message,
    };
    let raw: RawManifest = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    if raw.start.command.is_empty() {
        return Err(invalid("start.command is empty".into()));
    }
    if raw.default_instances == 0 {
        return Err(invalid("default_instances must be at least 1".into()));
    }
    let ready_timeout = humantime::parse_duration(&raw.ready.timeout)
        .map_err(|e| invalid(format!("ready.timeout: {e}")))?;
    if ![429, 503].contains(&raw.request.refuses_with) {
        return Err(invalid(format!(
            "request.refuses_with = {}: 429 or 503, the refusals failmode counts under their own status",
            raw.request.refuses_with
        )));
    }
    for s in &raw.start.command {
        check_placeholders(path, "start.command", s)?;
    }
    for (name, s) in &raw.start.env {
        check_placeholders(path, &format!("start.env.{name}"), s)?;
    }
    for (name, s) in &raw.start.sentinel_env {
        check_placeholders(path, &format!("start.sentinel_env.{name}"), s)?;
    }
    let caller = caller_identity(
        raw.request.caller.as_deref(),
        raw.request.caller_header.as_deref(),
    )
    .map_err(invalid)?;
    let limit = raw
        .limit
        .as_ref()
        .map(|raw| own_limit(raw, LimitSource::Manifest))
        .transpose()
        .map_err(invalid)?;
    let warm_up = super::warm_up::parse(raw.warm_up.as_ref()).map_err(invalid)?;
    let mut defs = Vec::new();
    for v in raw.variants {
        if !crate::names::is_plain_name(&v.name) {
            return Err(invalid(format!(
                "variant name {:?} must be made of letters, digits, '-', '_' or '.'",
                v.name
            )));
        }
        for (name, s) in &v.env {
            check_placeholders(path, &format!("variants.env.{name}"), s)?;
        }
        let mut sentinel_env = raw.start.sentinel_env.clone();
        for (k, value) in &v.env {
            if let Some(slot) = sentinel_env.get_mut(k) {
                value.clone_into(slot);
            }
        }
        let mut env = raw.start.env.clone();
        env.extend(v.env);
        defs.push(TargetDef {
            name: v.name,
            description: if v.description.is_empty() {
                raw.description.clone()
            } else {
                v.description
            },
            manifest: path.to_owned(),
            dir: None,
            build: raw.build.clone(),
            command: raw.start.command.clone(),
            env,
            sentinel_env,
            ready_path: raw.ready.path.clone(),
            ready_timeout,
            request_path: raw.request.path.clone(),
            caller: caller.clone(),
            limit,
            refuses_with: raw.request.refuses_with,
            default_instances: raw.default_instances,
            warm_up,
            metrics_path: raw.metrics.as_ref().map(|m| m.path.clone()),
            fallback_counter: raw
                .metrics
                .as_ref()
                .and_then(|m| m.fallback_counter.clone()),
        });
    }
    if defs.is_empty() {
        return Err(invalid("declares no [[variants]]".into()));
    }
    Ok(defs)
}

/// How deep under `targets/` a manifest may sit: `targets/<language>/<library>/target.toml`.
const MANIFEST_DEPTH: usize = 3;

/// Folders that hold installed dependencies or caches, never a target's own manifest.
fn is_dependency_folder(name: &str) -> bool {
    name.starts_with('.') || matches!(name, "node_modules" | "__pycache__" | "target")
}

/// Every target under `targets_dir/**/target.toml` (at most [`MANIFEST_DEPTH`] deep, skipping
/// installed dependencies), sorted by manifest path then declaration.
pub fn discover(targets_dir: &Path) -> Result<Vec<TargetDef>, ManifestError> {
    if !targets_dir.is_dir() {
        return Err(ManifestError::Read {
            path: targets_dir.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        });
    }
    let mut manifests: Vec<PathBuf> = walkdir::WalkDir::new(targets_dir)
        .min_depth(1)
        .max_depth(MANIFEST_DEPTH)
        .into_iter()
        .filter_entry(|e| {
            !(e.file_type().is_dir() && is_dependency_folder(&e.file_name().to_string_lossy()))
        })
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.file_name() == "target.toml")
        .map(walkdir::DirEntry::into_path)
        .collect();
    manifests.sort();
    let mut all: Vec<TargetDef> = Vec::new();
    for m in manifests {
        for def in read(&m)? {
            if let Some(other) = all.iter().find(|d| d.name == def.name) {
                return Err(ManifestError::Invalid {
                    path: m,
                    message: format!(
                        "target {:?} is also declared in {}",
                        def.name,
                        other.manifest.display()
                    ),
                });
            }
            all.push(def);
        }
    }
    Ok(all)
}

/// Picks targets by name, in the order asked.
pub fn select(all: &[TargetDef], names: &[String]) -> Result<Vec<TargetDef>, ManifestError> {
    names
        .iter()
        .map(|n| {
            all.iter()
                .find(|d| &d.name == n)
                .cloned()
                .ok_or_else(|| ManifestError::Unknown {
                    name: n.clone(),
                    available: all
                        .iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        })
        .collect()
}

/// Where a service asks for its Redis primary in a Sentinel topology: `{sentinel_addrs}`
/// and `{sentinel_master}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelEndpoint {
    pub sentinels: Vec<std::net::SocketAddr>,
    /// The name the sentinels monitor the primary under.
    pub master: String,
}

impl SentinelEndpoint {
    /// `host:port,host:port,…`, the form every client library here takes.
    pub fn addrs(&self) -> String {
        self.sentinels
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// One instance as failmode starts it: what its manifest's placeholders are filled with.
#[derive(Debug, Clone, Copy)]
pub struct InstanceSlot<'a> {
    /// The target's name (a manifest's variant).
    pub target: &'a str,
    pub index: usize,
    /// How many instances of the target start together.
    pub count: u32,
    pub port: u16,
    pub redis_url: &'a str,
    /// The sentinels to ask for the primary, when Redis is a Sentinel topology.
    pub sentinel: Option<&'a SentinelEndpoint>,
    /// The scenario's limit per window and caller: `{limit}` and `{window_ms}` are the
    /// scenario's even for a target whose manifest declares a limit of its own.
    pub limit: f64,
    pub window: Duration,
}

impl InstanceSlot<'_> {
    /// Every placeholder of [`PLACEHOLDERS`] with its value for this instance.
    pub fn values(&self) -> BTreeMap<&'static str, String> {
        BTreeMap::from([
            ("port", self.port.to_string()),
            ("redis_url", self.redis_url.to_owned()),
            (
                "sentinel_addrs",
                self.sentinel
                    .map(SentinelEndpoint::addrs)
                    .unwrap_or_default(),
            ),
            (
                "sentinel_master",
                self.sentinel.map(|s| s.master.clone()).unwrap_or_default(),
            ),
            ("instance_id", format!("{}-{}", self.target, self.index)),
            ("instance_index", self.index.to_string()),
            ("instance_count", self.count.to_string()),
            ("limit", number(self.limit)),
            ("window_ms", self.window.as_millis().to_string()),
            ("window_s", number(self.window.as_secs_f64())),
        ])
    }
}

/// A number as a placeholder holds it: no decimals when it is whole.
fn number(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

impl TargetDef {
    /// Where its warm-up requests go.
    pub fn warm_up_aim(&self) -> Aim<'_> {
        Aim {
            path: &self.request_path,
            caller: &self.caller,
        }
    }

    /// The header naming the caller, for a target that tells callers by header.
    pub fn caller_header(&self) -> Option<&str> {
        match &self.caller {
            CallerIdentity::Header { header } => Some(header),
            CallerIdentity::SourceAddress | CallerIdentity::XForwardedFor => None,
        }
    }

    /// The limit its figures are judged against: its manifest's own, else the scenario's.
    pub fn judged_limit(&self, scenario_limit: f64, scenario_window: Duration) -> TargetLimit {
        self.limit.map_or_else(
            || TargetLimit::scenario(scenario_limit, scenario_window),
            |own| own.judged(),
        )
    }

    /// The environment as run, placeholders unexpanded: the manifest's, with its
    /// `sentinel_env` on top when Redis is a Sentinel topology (what run.json records, so a
    /// reader sees which targets were told the sentinels).
    pub fn env_as_run(&self, sentinel: bool) -> BTreeMap<String, String> {
        let mut env = self.env.clone();
        if sentinel {
            env.extend(self.sentinel_env.clone());
        }
        env
    }

    /// The environment failmode starts an instance with: [`Self::env_as_run`], placeholders
    /// filled.
    pub fn env_for(&self, slot: &InstanceSlot<'_>) -> BTreeMap<String, String> {
        let values = slot.values();
        self.env_as_run(slot.sentinel.is_some())
            .into_iter()
            .map(|(k, v)| (k, expand(&v, &values)))
            .collect()
    }
}

/// Replaces `{name}` placeholders with their values.
pub fn expand(text: &str, values: &BTreeMap<&str, String>) -> String {
    let mut out = text.to_owned();
    for (k, v) in values {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out
}

#[cfg(test)]
mod tests;
