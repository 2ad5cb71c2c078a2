//! Where a command's scenarios, targets and results come from, resolved once:
//!
//! - the **project**: `--project DIR`; else the nearest directory, from the current one
//!   upward, that holds a `failmode/` folder (one that is not itself a checkout of failmode);
//!   else failmode's checkout when the current directory is inside it; else the current
//!   directory. Its files are `failmode/scenarios/*.toml` and `failmode/targets/**/target.toml`
//!   (what `failmode init` writes); its results go to `<project>/results`.
//! - failmode's **checkout**, when the project is inside one (a `[workspace]` Cargo.toml whose
//!   members include `harness`): its `scenarios/` and `targets/`. The peer limiters are found
//!   only there: their servers, lockfiles and build scripts live in it.
//! - what is **built in** ([`builtin`]): every shipped scenario and the reference limiter's
//!   policies, whose binary is looked for beside the running `failmode`.
//!
//! A name is looked up in that order and the first found wins. Nothing is found through a path
//! compiled into the binary.

mod builtin;

use std::path::{Path, PathBuf};

use crate::infra::{checkout_above, is_checkout, is_executable, locate};
use crate::scenario::{self, Scenario, ScenarioError};
use crate::targets::manifest::{self, ManifestError, TargetDef};

/// The folder that marks a project and holds its files.
pub const FOLDER: &str = "failmode";

/// The reference limiter's binary, as the built-in targets start it.
pub const REFERENCE_PROGRAM: &str = "failmode-reference";

/// Where a scenario or a target was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The project's `failmode/` folder.
    Project,
    /// failmode's checkout around the project.
    Checkout,
    /// Embedded in the binary.
    BuiltIn,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Project => "project",
            Self::Checkout => "checkout",
            Self::BuiltIn => "built-in",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error("--project {0}: no such directory")]
    NoSuchDirectory(PathBuf),
    #[error("cannot read the current directory: {0}")]
    CurrentDirectory(std::io::Error),
    #[error(
        "name a scenario: {0} (a scenario can be left out only in a project with exactly one \
         of its own, as `failmode init` writes; `failmode list` shows them all)"
    )]
    WhichScenario(String),
}

/// The directories a command finds things in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    root: PathBuf,
    checkout: Option<PathBuf>,
}

/// Whether `dir` is a project's root: it holds a `failmode/` folder that is not a checkout of
/// failmode (a clone named `failmode` beside the user's files is not a project).
pub fn is_project(dir: &Path) -> bool {
    let folder = dir.join(FOLDER);
    folder.is_dir() && !is_checkout(&folder)
}

/// A scenario by name and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioEntry {
    pub name: String,
    pub source: Source,
    /// Its file; `None` for a built-in one.
    pub path: Option<PathBuf>,
}

impl ScenarioEntry {
    /// The scenario's TOML, as written.
    pub fn text(&self) -> Result<String, ScenarioError> {
        match &self.path {
            Some(path) => std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
                path: path.clone(),
                source,
            }),
            None => builtin::scenario(&self.name)
                .map(str::to_owned)
                .ok_or_else(|| ScenarioError::Unknown {
                    name: self.name.clone(),
                    available: builtin_scenario_names(),
                }),
        }
    }

    /// The scenario, validated (a file's manifests named by path read relative to it).
    pub fn load(&self) -> Result<Scenario, ScenarioError> {
        match &self.path {
            Some(path) => Scenario::load(path),
            None => Scenario::parse(&self.text()?, &format!("built-in {}", self.name)),
        }
    }
}

fn builtin_scenario_names() -> String {
    builtin::SCENARIOS.map(|(n, _)| n).join(", ")
}

/// A target and where it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetEntry {
    pub def: TargetDef,
    pub source: Source,
}

impl Project {
    /// The project of a command: `explicit` (`--project DIR`), else found from the current
    /// directory.
    pub fn resolve(explicit: Option<&Path>) -> Result<Self, ProjectError> {
        match explicit {
            Some(dir) if dir.is_dir() => Ok(Self::at(dir)),
            Some(dir) => Err(ProjectError::NoSuchDirectory(dir.to_owned())),
            None => std::env::current_dir()
                .map(|cwd| Self::find_from(&cwd))
                .map_err(ProjectError::CurrentDirectory),
        }
    }

    /// The nearest project at or above `start`, else the checkout around it, else `start`.
    pub fn find_from(start: &Path) -> Self {
        if let Some(root) = start.ancestors().find(|d| is_project(d)) {
            return Self::at(root);
        }
        Self::at(&checkout_above(start).unwrap_or_else(|| start.to_owned()))
    }

    /// The project rooted at `root` (whether or not it has a `failmode/` folder yet), and the
    /// checkout around it.
    pub fn at(root: &Path) -> Self {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_owned());
        let checkout = checkout_above(&root);
        Self { root, checkout }
    }

    /// The project's directory: its `failmode/` folder's parent, or the checkout, or where
    /// the command ran.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// failmode's checkout around the project, if any.
    pub fn checkout(&self) -> Option<&Path> {
        self.checkout.as_deref()
    }

    /// `<root>/failmode`, when it exists.
    pub fn folder(&self) -> Option<PathBuf> {
        is_project(&self.root).then(|| self.root.join(FOLDER))
    }

    /// Where runs write their results folders: `<root>/results`.
    pub fn results_dir(&self) -> PathBuf {
        self.root.join("results")
    }

    fn scenario_dirs(&self) -> Vec<(Source, PathBuf)> {
        let project = self
            .folder()
            .map(|f| (Source::Project, f.join("scenarios")));
        let checkout = self
            .checkout
            .as_ref()
            .map(|c| (Source::Checkout, c.join("scenarios")));
        project.into_iter().chain(checkout).collect()
    }

    /// Every scenario by name, sorted; where a name is in several places, the first of the
    /// project, the checkout and the built-ins.
    pub fn scenarios(&self) -> Vec<ScenarioEntry> {
        let mut all: Vec<ScenarioEntry> = Vec::new();
        for (source, dir) in self.scenario_dirs() {
            for name in scenario::list(&dir) {
                if !all.iter().any(|e| e.name == name) {
                    let path = Some(dir.join(format!("{name}.toml")));
                    all.push(ScenarioEntry { name, source, path });
                }
            }
        }
        for (name, _) in builtin::SCENARIOS {
            if !all.iter().any(|e| e.name == name) {
                all.push(ScenarioEntry {
                    name: name.to_owned(),
                    source: Source::BuiltIn,
                    path: None,
                });
            }
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// The scenario `name` as the lookup order finds it.
    pub fn scenario(&self, name: &str) -> Option<ScenarioEntry> {
        for (source, dir) in self.scenario_dirs() {
            let path = dir.join(format!("{name}.toml"));
            if path.is_file() {
                return Some(ScenarioEntry {
                    name: name.to_owned(),
                    source,
                    path: Some(path),
                });
            }
        }
        builtin::scenario(name).map(|_| ScenarioEntry {
            name: name.to_owned(),
            source: Source::BuiltIn,
            path: None,
        })
    }

    /// The name of the project's one scenario of its own, for a command that names none.
    pub fn only_scenario(&self) -> Result<String, ProjectError> {
        let own: Vec<String> = self
            .scenarios()
            .into_iter()
            .filter(|e| e.source == Source::Project)
            .map(|e| e.name)
            .collect();
        match own.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(ProjectError::WhichScenario(
                "this project has no scenario of its own".into(),
            )),
            many => Err(ProjectError::WhichScenario(format!(
                "this project has {}: {}",
                many.len(),
                many.join(", ")
            ))),
        }
    }

    /// A scenario by path (`x.toml`, `dir/x`) or by name.
    pub fn find_scenario(&self, name_or_path: &str) -> Result<Scenario, ScenarioError> {
        if is_path(name_or_path) {
            return Scenario::load(Path::new(name_or_path));
        }
        self.scenario_entry(name_or_path)?.load()
    }

    /// A scenario's TOML as written, by path or by name.
    pub fn scenario_text(&self, name_or_path: &str) -> Result<String, ScenarioError> {
        if is_path(name_or_path) {
            let path = Path::new(name_or_path);
            return std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
                path: path.to_owned(),
                source,
            });
        }
        self.scenario_entry(name_or_path)?.text()
    }

    fn scenario_entry(&self, name: &str) -> Result<ScenarioEntry, ScenarioError> {
        self.scenario(name).ok_or_else(|| ScenarioError::Unknown {
            name: name.to_owned(),
            available: self
                .scenarios()
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Every target by name: the project's `failmode/targets/**/target.toml`, the checkout's
    /// `targets/`, the built-in reference's policies; a name found earlier hides a later one.
    /// Each runs its commands from the root it was found in.
    pub fn targets(&self) -> Result<Vec<TargetEntry>, ManifestError> {
        let mut all = Vec::new();
        if let Some(folder) = self.folder() {
            let dir = folder.join("targets");
            if dir.is_dir() {
                add(
                    &mut all,
                    manifest::discover(&dir)?,
                    Source::Project,
                    &self.root,
                );
            }
        }
        if let Some(checkout) = &self.checkout {
            let dir = checkout.join("targets");
            if dir.is_dir() {
                add(
                    &mut all,
                    manifest::discover(&dir)?,
                    Source::Checkout,
                    checkout,
                );
            }
        }
        add(
            &mut all,
            self.builtin_targets()?,
            Source::BuiltIn,
            &self.root,
        );
        Ok(all)
    }

    /// The targets a run of `scenario` chooses from: those it names by manifest path, then
    /// [`targets`](Self::targets).
    pub fn targets_for(&self, scenario: &Scenario) -> Result<Vec<TargetDef>, ManifestError> {
        let mut defs: Vec<TargetDef> = Vec::new();
        for t in &scenario.targets {
            let Some(m) = &t.manifest else { continue };
            let mut def = manifest::read(&m.path)?
                .into_iter()
                .find(|d| d.name == t.name)
                .ok_or_else(|| ManifestError::Invalid {
                    path: m.path.clone(),
                    message: format!(
                        "declares no variant {:?}, which the scenario's [[targets]] at line {} \
                         names",
                        t.name, m.line
                    ),
                })?;
            def.dir = Some(self.root_of(&m.path));
            defs.push(def);
        }
        for entry in self.targets()? {
            if !defs.iter().any(|d| d.name == entry.def.name) {
                defs.push(entry.def);
            }
        }
        Ok(defs)
    }

    /// One target by name (as [`targets`](Self::targets) finds it) or by the path of a
    /// manifest (`.toml`, or a folder in it) that declares a single variant.
    pub fn find_target(&self, name_or_path: &str) -> Result<TargetDef, ManifestError> {
        if !is_path(name_or_path) {
            let all: Vec<TargetDef> = self.targets()?.into_iter().map(|e| e.def).collect();
            return manifest::select(&all, &[name_or_path.to_owned()])
                .map(|mut defs| defs.remove(0));
        }
        let path = Path::new(name_or_path);
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let mut defs = manifest::read(&path)?;
        if defs.len() != 1 {
            return Err(ManifestError::Invalid {
                path,
                message: format!(
                    "declares {} variants ({}): name one of them instead of the file, from the \
                     project that holds it",
                    defs.len(),
                    defs.iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        let mut def = defs.remove(0);
        def.dir = Some(self.root_of(&path));
        Ok(def)
    }

    /// The manifests `failmode init --template NAME` starts from: every target found, then
    /// the peers built in.
    pub fn templates(&self) -> Result<Vec<TargetEntry>, ManifestError> {
        let mut all = self.targets()?;
        for (path, text) in builtin::TEMPLATES {
            let defs = manifest::parse(text, Path::new(path))?;
            add(&mut all, defs, Source::BuiltIn, &self.root);
        }
        Ok(all)
    }

    /// The reference's policies, started from its binary wherever [`reference_program`] finds
    /// it; nothing to build.
    fn builtin_targets(&self) -> Result<Vec<TargetDef>, ManifestError> {
        let path = Path::new("(built in)").join(builtin::REFERENCE_MANIFEST_PATH);
        let program = reference_program(self.checkout.as_deref());
        let mut defs = manifest::parse(builtin::REFERENCE_MANIFEST, &path)?;
        for def in &mut defs {
            def.build = None;
            if let Some(first) = def.command.first_mut() {
                *first = program.to_string_lossy().into_owned();
            }
        }
        Ok(defs)
    }

    /// Where a manifest named by path runs its commands: the deepest of the project and the
    /// checkout that holds it, else its own folder.
    fn root_of(&self, manifest: &Path) -> PathBuf {
        let manifest = manifest
            .canonicalize()
            .unwrap_or_else(|_| manifest.to_owned());
        std::iter::once(&self.root)
            .chain(&self.checkout)
            .filter(|root| manifest.starts_with(root))
            .max_by_key(|root| root.components().count())
            .cloned()
            .unwrap_or_else(|| {
                manifest
                    .parent()
                    .map_or_else(|| self.root.clone(), Path::to_owned)
            })
    }
}

/// The built-in targets' names: the reference limiter's policies.
pub fn builtin_target_names() -> Vec<String> {
    let path = Path::new(builtin::REFERENCE_MANIFEST_PATH);
    manifest::parse(builtin::REFERENCE_MANIFEST, path)
        .map(|defs| defs.into_iter().map(|d| d.name).collect())
        .unwrap_or_default()
}

/// Adds the targets of one source whose names are not taken yet, running from `dir`.
fn add(all: &mut Vec<TargetEntry>, defs: Vec<TargetDef>, source: Source, dir: &Path) {
    for mut def in defs {
        if all.iter().any(|e| e.def.name == def.name) {
            continue;
        }
        def.dir = Some(dir.to_owned());
        all.push(TargetEntry { def, source });
    }
}

/// A scenario argument that is a file, not a name: it ends in `.toml` or has a folder in it.
fn is_path(name_or_path: &str) -> bool {
    let path = Path::new(name_or_path);
    path.extension().is_some_and(|e| e == "toml") || path.components().count() > 1
}

/// The reference limiter's binary: beside the running `failmode` (where `cargo install` and
/// `cargo build --release` put both), then on `PATH` (or in failmode's tools folders), then
/// in the checkout's `target/release/`. The bare name when it is nowhere, so that starting it
/// fails with how to get it.
pub fn reference_program(checkout: Option<&Path>) -> PathBuf {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(REFERENCE_PROGRAM)));
    beside
        .filter(|p| is_executable(p))
        .or_else(|| locate(REFERENCE_PROGRAM))
        .or_else(|| {
            checkout
                .map(|c| c.join("target/release").join(REFERENCE_PROGRAM))
                .filter(|p| is_executable(p))
        })
        .unwrap_or_else(|| PathBuf::from(REFERENCE_PROGRAM))
}

#[cfg(test)]
mod tests;
