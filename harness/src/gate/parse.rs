//! Gates as written: `[[gates]]` tables in a scenario or a gates file, validated into
//! [`Gate`]s. Every mistake is refused here, naming the gate and the key, before any run is
//! judged.

use std::path::Path;

use serde::Deserialize;

use super::metric::{METRICS, Scope};
use super::{Bound, Gate, GateError, Level};
use crate::names::known;
use crate::scenario::Scenario;
use crate::thresholds::{naming_the_key, whole_seconds};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGate {
    #[serde(default = "crate::thresholds::every_target")]
    target: String,
    phase: Option<String>,
    metric: String,
    tenant: Option<String>,
    max: Option<f64>,
    min: Option<f64>,
    level: Option<String>,
    window: Option<String>,
}

/// Validates gates as written (`[[gates]]` tables).
pub fn parse_gates(tables: &[toml::Table]) -> Result<Vec<Gate>, GateError> {
    tables
        .iter()
        .enumerate()
        .map(|(i, table)| {
            let index = i + 1;
            let invalid = |message: String| GateError::Invalid { index, message };
            let raw: RawGate = table.clone().try_into().map_err(|e: toml::de::Error| {
                invalid(naming_the_key(table, &["max", "min"], e.message()))
            })?;
            let metric = known(&METRICS, "metric", &raw.metric).map_err(invalid)?;
            let bound = match (raw.max, raw.min) {
                (Some(max), None) => Bound::Max(max),
                (None, Some(min)) => Bound::Min(min),
                _ => return Err(invalid("needs exactly one of max or min".into())),
            };
            // No value passes a NaN bound and every value passes an infinite one: a typo
            // that would fail or pass every run.
            let (key, v) = match bound {
                Bound::Max(v) => ("max", v),
                Bound::Min(v) => ("min", v),
            };
            if !v.is_finite() {
                return Err(invalid(format!("`{key}` = {v}: must be a finite number")));
            }
            let name = metric.name();
            let scope = metric.scope();
            if raw.tenant.is_some() && scope != Scope::Cell {
                return Err(invalid(format!("{name} is per target, not per tenant")));
            }
            match (&raw.phase, scope) {
                (Some(_), Scope::Run) => {
                    return Err(invalid(format!(
                        "{name} is measured over the whole run, not per phase: leave out `phase`"
                    )));
                }
                (None, Scope::Cell | Scope::Phase) => {
                    return Err(invalid("missing field `phase`".into()));
                }
                _ => {}
            }
            let window = raw.window.as_deref().map(|w| whole_seconds("window", w));
            let window = window.transpose().map_err(invalid)?;
            let level = match raw.level.as_deref() {
                None | Some("fail") => Level::Fail,
                Some("warn") => Level::Warn,
                Some(other) => {
                    return Err(invalid(format!(
                        "`level` = {other:?}: must be \"fail\" (the default) or \"warn\""
                    )));
                }
            };
            if window.is_some() && !metric.windowed() {
                return Err(invalid(format!(
                    "{name} cannot be judged over a `window`: only counts, shares, \
                     over-admission, wrongful denial and client amplification add up over a \
                     window's seconds (a percentile of seconds is not the window's percentile)"
                )));
            }
            Ok(Gate {
                target: raw.target,
                phase: raw.phase,
                metric,
                tenant: raw.tenant,
                bound,
                level,
                window,
            })
        })
        .collect()
}

/// Gates from a file of `[[gates]]` tables.
pub fn gates_from_file(path: &Path) -> Result<Vec<Gate>, GateError> {
    let file_error = |message: String| GateError::File {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        gates: Vec<toml::Table>,
    }
    let file: File = toml::from_str(&text).map_err(|e| file_error(e.to_string()))?;
    parse_gates(&file.gates)
}

/// The gates of the scenario a results folder was run with (its `scenario.toml`).
pub fn gates_of_run(folder: &Path) -> Result<Vec<Gate>, GateError> {
    let path = folder.join("scenario.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| GateError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let scenario =
        Scenario::parse(&text, &path.display().to_string()).map_err(|e| GateError::File {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    parse_gates(&scenario.gates)
}
