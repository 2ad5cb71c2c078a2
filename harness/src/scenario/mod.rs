//! Scenarios: a TOML file in `scenarios/` → a validated [`Scenario`] that cannot hold a bad
//! value (positive rates, a known population, phases sorted and disjoint inside the run).

mod manifest_refs;
mod raw;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::faults::Fault;
use crate::load::{Arrival, Spread};
use crate::names::is_plain_name;
// Re-exported: `cli/init.rs` reads it from here (it can import `crate::names` once the CLI's
// move to `cli/` has landed).
use raw::RawScenario;

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
    pub request_timeout: Duration,
    pub max_in_flight_per_target: usize,
    /// Thresholds as written; `failmode gate` enforces them.
    pub gates: Vec<toml::Table>,
    /// Claims as written (`[[claims]]`); `failmode outcomes` confirms or refutes them.
    pub claims: Vec<toml::Table>,
    /// The file's text, kept for the results folder.
    pub source: String,
}

const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
const DEFAULT_MAX_IN_FLIGHT: usize = 10_000;

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// What makes a client behaviour unusable, if anything.
fn client_problem(client: &crate::load::Client) -> Option<String> {
    use crate::load::Client;
    match *client {
        Client::Retry5xx { attempts }
        | Client::RetryBackoff { attempts, .. }
        | Client::HonourRetryAfter { attempts, .. }
            if attempts == 0 =>
        {
            Some("attempts must be at least 1 (the first one)".into())
        }
        Client::RetryBackoff { base, cap, .. } if base.is_zero() || cap < base => Some(format!(
            "a backoff's base ({base:?}) must be more than zero and its cap ({cap:?}) no less"
        )),
        Client::AdaptiveThrottling { k, window }
            if !(k > 0.0 && k.is_finite()) || window.is_zero() =>
        {
            Some(format!(
                "adaptive throttling needs k > 0 ({k}) and a window ({window:?})"
            ))
        }
        _ => None,
    }
}

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
        let invalid =
            |key: &str, span: std::ops::Range<usize>, message: String| ScenarioError::Invalid {
                origin: origin.to_owned(),
                key: key.to_owned(),
                line: line_of(text, span.start),
                message,
            };
        let whole = 0..0;

        let window = raw.policy.window.0;
        if raw.policy.limit.0.fract() != 0.0 {
            return Err(invalid(
                "policy.limit",
                whole.clone(),
                format!("{} must be a whole number of requests", raw.policy.limit.0),
            ));
        }
        if window.is_zero() {
            return Err(invalid(
                "policy.window",
                whole,
                "must be greater than zero".into(),
            ));
        }
        let default_arrival = raw.load.arrival.unwrap_or(Arrival::Uniform);
        let default_spread = raw.load.spread.unwrap_or(Spread::RoundRobin);
        if raw.tenants.is_empty() {
            return Err(invalid(
                "tenants",
                whole,
                "needs at least one [[tenants]] entry".into(),
            ));
        }
        let mut tenants: Vec<Tenant> = Vec::new();
        for t in raw.tenants {
            // "all" names every tenant together in run.json, series.csv and the logs.
            if !is_plain_name(&t.name)
                || t.name == "all"
                || tenants.iter().any(|o| o.name == t.name)
            {
                return Err(invalid(
                    "tenants.name",
                    whole.clone(),
                    format!(
                        "{:?} must be unique, not \"all\" (every tenant together), and made of \
                         letters, digits, '-', '_' or '.'",
                        t.name
                    ),
                ));
            }
            let caller = t.caller.clone().unwrap_or_else(|| t.name.clone());
            if let Some(other) = tenants.iter().find(|o| o.caller == caller) {
                return Err(invalid(
                    "tenants.caller",
                    whole.clone(),
                    format!(
                        "{caller:?} is also {:?}'s caller key: two tenants sharing a key share one quota",
                        other.name
                    ),
                ));
            }
            if let Some(problem) = client_problem(&t.client) {
                return Err(invalid(
                    "tenants.client",
                    whole.clone(),
                    format!("of tenant {:?}: {problem}", t.name),
                ));
            }
            tenants.push(Tenant {
                caller,
                name: t.name,
                rate_per_s: t.rate.0,
                arrival: t.arrival.unwrap_or(default_arrival),
                spread: t.spread.unwrap_or(default_spread),
                client: t.client,
            });
        }

        if raw.targets.is_empty() {
            return Err(invalid(
                "targets",
                whole,
                "needs at least one [[targets]] entry".into(),
            ));
        }
        let mut targets: Vec<TargetRef> = Vec::new();
        for spanned in raw.targets {
            let span = spanned.span();
            let t = spanned.into_inner();
            let (name, manifest) = match (t.name, t.manifest, t.variant) {
                (Some(name), None, None) => (name, None),
                (Some(_), None, Some(_)) => {
                    return Err(invalid(
                        "targets.variant",
                        span,
                        "only goes with `manifest`: a target found by `name` is one variant \
                         already"
                            .into(),
                    ));
                }
                (None, Some(path), variant) => {
                    if path.trim().is_empty() {
                        return Err(invalid(
                            "targets.manifest",
                            span,
                            "is empty: give a target.toml, relative to this scenario file".into(),
                        ));
                    }
                    if let Some(v) = variant.as_ref().filter(|v| !is_plain_name(v)) {
                        return Err(invalid(
                            "targets.variant",
                            span,
                            format!("{v:?} must be made of letters, digits, '-', '_' or '.'"),
                        ));
                    }
                    let name = variant.clone().unwrap_or_else(|| path.clone());
                    let line = line_of(text, span.start);
                    let path = PathBuf::from(path);
                    (
                        name,
                        Some(ManifestRef {
                            path,
                            variant,
                            line,
                        }),
                    )
                }
                (Some(_), Some(_), _) => {
                    return Err(invalid(
                        "targets.manifest",
                        span,
                        "and `name` cannot both be given: `name` picks a target found in the \
                         project, failmode's checkout or the built-ins, `manifest` reads one \
                         file (and `variant` picks among its variants)"
                            .into(),
                    ));
                }
                (None, None, _) => {
                    return Err(invalid(
                        "targets.name",
                        span,
                        "is missing: give `name` (a target `failmode list` shows) or `manifest` \
                         (a target.toml, relative to this scenario file)"
                            .into(),
                    ));
                }
            };
            if targets.iter().any(|o| o.name == name) {
                return Err(invalid(
                    if manifest.is_some() {
                        "targets.manifest"
                    } else {
                        "targets.name"
                    },
                    span,
                    format!("{name:?} is listed twice"),
                ));
            }
            if t.instances == Some(0) {
                return Err(invalid(
                    "targets.instances",
                    span,
                    "must be at least 1".into(),
                ));
            }
            targets.push(TargetRef {
                name,
                instances: t.instances,
                manifest,
            });
        }

        if raw.phases.is_empty() {
            return Err(invalid(
                "phases",
                whole,
                "needs at least one [[phases]] entry".into(),
            ));
        }
        let mut phases: Vec<(std::ops::Range<usize>, Phase)> = Vec::new();
        for spanned in raw.phases {
            let span = spanned.span();
            let p = spanned.into_inner();
            if p.end.0 <= p.start.0 {
                return Err(invalid(
                    "phases.end",
                    span,
                    format!("of phase {:?} must be after its start", p.name),
                ));
            }
            let flaps: Vec<(Duration, Duration)> = p
                .faults
                .iter()
                .filter_map(|f| match f {
                    Fault::Flap { period, down } => Some((*period, *down)),
                    _ => None,
                })
                .collect();
            if flaps.len() > 1 {
                return Err(invalid(
                    "phases.faults",
                    span,
                    "at most one flap per phase".into(),
                ));
            }
            if let Some(&(period, down)) = flaps.first()
                && (down.is_zero() || down >= period)
            {
                return Err(invalid(
                    "phases.faults",
                    span,
                    format!(
                        "a flap's down ({down:?}) must be more than zero and less than its period ({period:?})"
                    ),
                ));
            }
            let scales: Vec<u32> = p
                .faults
                .iter()
                .filter_map(|f| match f {
                    Fault::Scale { to, .. } => Some(*to),
                    _ => None,
                })
                .collect();
            if scales.len() > 1 || scales.contains(&0) {
                return Err(invalid(
                    "phases.faults",
                    span,
                    "at most one scale per phase, to at least 1 instance".into(),
                ));
            }
            if !is_plain_name(&p.name) {
                return Err(invalid(
                    "phases.name",
                    span,
                    format!(
                        "{:?} must be made of letters, digits, '-', '_' or '.'",
                        p.name
                    ),
                ));
            }
            if phases.iter().any(|(_, o)| o.name == p.name) {
                return Err(invalid(
                    "phases.name",
                    span,
                    format!("{:?} is used twice", p.name),
                ));
            }
            phases.push((
                span,
                Phase {
                    name: p.name,
                    start: p.start.0,
                    end: p.end.0,
                    faults: p.faults,
                },
            ));
        }
        phases.sort_by_key(|(_, p)| p.start);
        for pair in phases.windows(2) {
            let ((_, a), (span, b)) = (&pair[0], &pair[1]);
            if b.start < a.end {
                return Err(invalid(
                    "phases.start",
                    span.clone(),
                    format!(
                        "phase {:?} starts at {:?}, before phase {:?} ends at {:?}: phases must not overlap",
                        b.name, b.start, a.name, a.end
                    ),
                ));
            }
        }
        let phases: Vec<Phase> = phases.into_iter().map(|(_, p)| p).collect();
        let duration = phases.iter().map(|p| p.end).max().unwrap_or_default();

        let max_in_flight = raw
            .load
            .max_in_flight_per_target
            .unwrap_or(DEFAULT_MAX_IN_FLIGHT);
        if max_in_flight == 0 {
            return Err(invalid(
                "load.max_in_flight_per_target",
                whole,
                "must be at least 1".into(),
            ));
        }
        Ok(Self {
            name: raw.name.unwrap_or_else(|| origin.to_owned()),
            description: raw.description,
            seed: raw.seed,
            limit: raw.policy.limit.0,
            window,
            tenants,
            targets,
            phases,
            duration,
            request_timeout: raw
                .load
                .request_timeout
                .map_or(DEFAULT_REQUEST_TIMEOUT, |d| d.0),
            max_in_flight_per_target: max_in_flight,
            gates: raw.gates,
            claims: raw.claims,
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
