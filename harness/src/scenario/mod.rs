//! Scenarios: a TOML file in `scenarios/` → a validated [`Scenario`] that cannot hold a bad
//! value (positive rates, a known population, phases sorted and disjoint inside the run).

mod invalid;
mod manifest_refs;
mod population;
mod raw;
mod redis;
mod validate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::faults::Fault;
use crate::load::Connections;
use invalid::Invalid;
use raw::RawScenario;
pub use redis::RedisTopology;

/// A scenario that failed to load, with where in the file.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// TOML syntax, an unknown key, or a bad value: toml's message names the key and line.
    #[error("invalid scenario {origin}: {message}")]
    Toml { origin: String, message: String },
    #[error("invalid scenario {origin}, line {line}: `{key}` {message}")]
    Invalid {
        origin: String,
        key: String,
        line: usize,
        message: String,
    },
    #[error("no scenario named {name:?}; available: {available}")]
    Unknown { name: String, available: String },
}

/// One tenant: a caller with a fixed arrival rate, exactly as the load engine takes it.
pub use crate::load::TenantPlan as Tenant;

/// A target the scenario runs: by name, or a manifest file named by path.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetRef {
    /// The target's name. For a manifest named by path, its variant's: as written (`variant`,
    /// else the path) until [`Scenario::load`] reads the manifest, then the variant's own.
    pub name: String,
    /// `None`: the manifest's default.
    pub instances: Option<u32>,
    /// `manifest = "…"`: the manifest this target is read from, not one found by name.
    pub manifest: Option<ManifestRef>,
    /// `max_connections`, `keep_alive`, `max_idle_connections`.
    pub connections: Connections,
}

/// `[[targets]] manifest = "targets/mine/target.toml"`, optionally with `variant`.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestRef {
    /// As written (relative to the scenario file) until [`Scenario::load`] resolves it; then
    /// absolute.
    pub path: PathBuf,
    pub variant: Option<String>,
    /// The line of its `[[targets]]` entry, for errors found when the manifest is read.
    pub line: usize,
}

/// A named slice of the run and the faults active during it.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub name: String,
    pub start: Duration,
    pub end: Duration,
    pub faults: Vec<Fault>,
}

impl Phase {
    pub fn length(&self) -> Duration {
        self.end - self.start
    }
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub seed: u64,
    /// Requests per window per caller, as every target is configured.
    pub limit: f64,
    pub window: Duration,
    pub tenants: Vec<Tenant>,
    pub targets: Vec<TargetRef>,
    /// Sorted by start, disjoint.
    pub phases: Vec<Phase>,
    /// The end of the last phase.
    pub duration: Duration,
    /// What each target's Redis is (`[redis]`).
    pub redis: RedisTopology,
    pub request_timeout: Duration,
    pub max_in_flight_per_target: usize,
    /// Thresholds as written; `failmode gate` enforces them.
    pub gates: Vec<toml::Table>,
    /// Claims as written (`[[claims]]`); `failmode outcomes` confirms or refutes them.
    pub claims: Vec<toml::Table>,
    /// Safety limits (`[[abort]]`): the run stops early when one is crossed.
    pub abort: Vec<crate::abort::AbortRule>,
    /// The file's text, kept for the results folder.
    pub source: String,
}

const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
const DEFAULT_MAX_IN_FLIGHT: usize = 10_000;

/// serde's message for a fault that matches no form ("did not match any variant of untagged
/// enum Fault") names neither the type nor the key: replaced by what is wrong with the first
/// fault that does not parse.
fn explain_faults(text: &str, message: &str) -> String {
    if !message.contains("untagged enum Fault") {
        return message.to_owned();
    }
    let Ok(table) = toml::from_str::<toml::Table>(text) else {
        return message.to_owned();
    };
    let faults = table
        .get("phases")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("faults").and_then(toml::Value::as_array))
        .flatten();
    for fault in faults {
        if <Fault as serde::Deserialize>::deserialize(fault.clone()).is_err() {
            return message.replace(
                "data did not match any variant of untagged enum Fault",
                &crate::faults::explain(fault),
            );
        }
    }
    message.to_owned()
}

impl Scenario {
    /// Parses and validates scenario text; `origin` names it in errors (a path or a name).
    pub fn parse(text: &str, origin: &str) -> Result<Self, ScenarioError> {
        let raw: RawScenario = toml::from_str(text).map_err(|e| ScenarioError::Toml {
            origin: origin.to_owned(),
            message: explain_faults(text, e.to_string().trim_end()),
        })?;
        let invalid = Invalid { origin, text };
        let window = raw.policy.get_ref().window.0;
        validate::policy(&raw.policy, &invalid)?;
        let limit_per_s = raw.policy.get_ref().limit.0 / window.as_secs_f64();
        let tenants = validate::tenants(
            raw.tenants,
            raw.populations,
            &raw.load,
            limit_per_s,
            &invalid,
        )?;
        let targets = validate::targets(raw.targets, &invalid)?;
        let redis = redis::topology(raw.redis.as_ref(), &raw.phases, &invalid)?;
        let phases = validate::phases(raw.phases, &invalid)?;
        let duration = phases.iter().map(|p| p.end).max().unwrap_or_default();

        let max_in_flight = raw
            .load
            .max_in_flight_per_target
            .unwrap_or(DEFAULT_MAX_IN_FLIGHT);
        if max_in_flight == 0 {
            return Err(invalid.at(
                "load.max_in_flight_per_target",
                0..0,
                "must be at least 1".into(),
            ));
        }
        // A cap above the in-flight bound would never bind: said, not ignored.
        if let Some((name, max)) = targets.iter().find_map(|t| {
            Some((&t.name, t.connections.max?)).filter(|(_, m)| m.get() > max_in_flight)
        }) {
            return Err(invalid.at(
                "targets.max_connections",
                0..0,
                format!(
                    "{name:?} allows {max} connections, more than load.max_in_flight_per_target \
                     ({max_in_flight}) lets it use: lower it, or raise the bound"
                ),
            ));
        }
        Ok(Self {
            name: raw.name.unwrap_or_else(|| origin.to_owned()),
            description: raw.description,
            seed: raw.seed,
            limit: raw.policy.get_ref().limit.0,
            window,
            tenants,
            targets,
            phases,
            duration,
            redis,
            request_timeout: raw
                .load
                .request_timeout
                .map_or(DEFAULT_REQUEST_TIMEOUT, |d| d.0),
            max_in_flight_per_target: max_in_flight,
            gates: raw.gates,
            claims: raw.claims,
            abort: crate::abort::parse_rules(&raw.abort).map_err(|message| {
                ScenarioError::Toml {
                    origin: origin.to_owned(),
                    message,
                }
            })?,
            source: text.to_owned(),
        })
    }

    /// Reads and validates a scenario file, and the manifests it names by path (relative to
    /// the file).
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_owned(),
            source,
        })?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        let mut scenario = Self::parse(&text, &path.display().to_string())?;
        if let Some(stem) = stem.filter(|_| scenario.name == path.display().to_string()) {
            scenario.name = stem;
        }
        scenario.resolve_manifests(path)?;
        Ok(scenario)
    }

    /// Finds a scenario by name in `dir` (`slow-redis` → `dir/slow-redis.toml`) or as a path.
    pub fn find(name_or_path: &str, dir: &Path) -> Result<Self, ScenarioError> {
        let as_path = Path::new(name_or_path);
        if as_path.extension().is_some_and(|e| e == "toml") || as_path.components().count() > 1 {
            return Self::load(as_path);
        }
        let path = dir.join(format!("{name_or_path}.toml"));
        if path.exists() {
            return Self::load(&path);
        }
        Err(ScenarioError::Unknown {
            name: name_or_path.to_owned(),
            available: list(dir).join(", "),
        })
    }

    /// The shape of the measurements of a run of this scenario over `targets` targets: its
    /// tenants, phases and duration, and the longest a request can stay unanswered (every
    /// attempt and wait of the longest client's chain).
    pub fn measurement_shape(&self, targets: usize) -> crate::metrics::Shape {
        crate::metrics::Shape {
            targets,
            tenants: self.tenants.len(),
            phases: self.phases.iter().map(|p| (p.start, p.end)).collect(),
            duration: self.duration,
            longest_request: self
                .tenants
                .iter()
                .map(|t| t.client.longest(self.request_timeout))
                .max()
                .unwrap_or(self.request_timeout),
            request_timeout: self.request_timeout,
        }
    }

    /// The allowance of one caller over `length` by the scenario's limit: limit ÷ window ×
    /// length (a target whose manifest declares its own: [`crate::limits::TargetLimit`]).
    pub fn allowance(&self, length: Duration) -> f64 {
        self.limit / self.window.as_secs_f64() * length.as_secs_f64()
    }

    /// The same scenario with every time on the timeline multiplied by `factor` (the window
    /// and the rates stay: only the run gets shorter or longer).
    pub fn scaled(&self, factor: f64) -> Self {
        let scale = |d: Duration| d.mul_f64(factor);
        let mut s = self.clone();
        for p in &mut s.phases {
            p.start = scale(p.start);
            p.end = scale(p.end);
            for f in &mut p.faults {
                f.scale(factor);
            }
        }
        s.duration = scale(s.duration);
        s
    }

    /// How the run's requests to target `name` use connections: its `[[targets]]` entry's
    /// settings, the defaults for a target the scenario does not list (`--targets`).
    pub fn connections_of(&self, name: &str) -> Connections {
        self.targets
            .iter()
            .find(|t| t.name == name)
            .map_or_else(Connections::default, |t| t.connections)
    }

    /// The phase a moment of the run belongs to, if any.
    pub fn phase_at(&self, at: Duration) -> Option<usize> {
        self.phases.iter().position(|p| p.start <= at && at < p.end)
    }
}

/// The scenario names in `dir`, sorted.
pub fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            (path.extension()? == "toml").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests;
