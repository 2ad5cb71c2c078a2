//! Targets a scenario names by the path of their manifest (`[[targets]] manifest = …`),
//! resolved once the scenario is read from a file: the path made absolute, the variant chosen.

use std::path::Path;

use super::{Scenario, ScenarioError};

impl Scenario {
    /// Reads each manifest named by path, relative to the scenario `file`: its path becomes
    /// absolute and the target takes its variant's name (the one asked, or the only one).
    pub(super) fn resolve_manifests(&mut self, file: &Path) -> Result<(), ScenarioError> {
        let origin = file.display().to_string();
        let invalid = |key: &str, line: usize, message: String| ScenarioError::Invalid {
            origin: origin.clone(),
            key: key.to_owned(),
            line,
            message,
        };
        let dir = file.parent().unwrap_or(Path::new(""));
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
        for i in 0..self.targets.len() {
            let Some(m) = &self.targets[i].manifest else {
                continue;
            };
            let line = m.line;
            let path = dir.join(&m.path);
            let defs = crate::targets::manifest::read(&path)
                .map_err(|e| invalid("targets.manifest", line, e.to_string()))?;
            let names = || {
                defs.iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let name = match &m.variant {
                Some(v) if defs.iter().any(|d| &d.name == v) => v.clone(),
                Some(v) => {
                    return Err(invalid(
                        "targets.variant",
                        line,
                        format!(
                            "{v:?} is not a variant of {}; it declares: {}",
                            path.display(),
                            names()
                        ),
                    ));
                }
                None if defs.len() == 1 => defs[0].name.clone(),
                None => {
                    return Err(invalid(
                        "targets.manifest",
                        line,
                        format!(
                            "{} declares {} variants ({}): pick one with `variant`",
                            path.display(),
                            defs.len(),
                            names()
                        ),
                    ));
                }
            };
            // Those before are resolved; of those after, only the ones found by name are.
            let taken = self
                .targets
                .iter()
                .enumerate()
                .any(|(j, o)| j != i && (j < i || o.manifest.is_none()) && o.name == name);
            if taken {
                return Err(invalid(
                    "targets.manifest",
                    line,
                    format!("{name:?} is listed twice"),
                ));
            }
            let target = &mut self.targets[i];
            target.name = name;
            if let Some(m) = &mut target.manifest {
                m.path = path;
            }
        }
        Ok(())
    }
}
