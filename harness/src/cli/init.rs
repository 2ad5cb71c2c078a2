//! `failmode init [--name NAME] [--template PEER]`: a small, commented project in a directory
//! of the user's: `failmode/targets/NAME/target.toml` (how failmode starts their service),
//! `failmode/scenarios/NAME.toml` (it beside the reference and fail-open through a slow and a
//! cut Redis, with gates for CI) and `failmode/README.md`. Nothing is overwritten.

use std::path::{Path, PathBuf};

use super::init_text::{manifest_text, readme_text, scenario_text};
use crate::names::is_plain_name;
use crate::project::{FOLDER, Project, builtin_target_names};

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The target's name, as scenarios and `--targets` call it (letters, digits, '-', '_',
    /// '.'). Default: the directory's name.
    #[arg(long)]
    pub name: Option<String>,
    /// Start the manifest from a peer limiter's (express-rate-limit, flask-limiter,
    /// go-redis-rate, …: `failmode list` names them), with the settings failmode runs it with.
    #[arg(long, value_name = "PEER")]
    pub template: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("--name {0:?}: a target's name is made of letters, digits, '-', '_' or '.'")]
    BadName(String),
    #[error(
        "--name {0:?} is a built-in target's name (one of the reference limiter's policies, \
         which the scenario runs beside yours): choose another"
    )]
    Taken(String),
    #[error(
        "refusing to overwrite {0}: `failmode init` writes only new files (remove it, or choose \
         another --name)"
    )]
    Exists(PathBuf),
    #[error("no peer named {name:?} to start from; known: {known}")]
    UnknownTemplate { name: String, known: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Manifest(#[from] crate::targets::ManifestError),
}

/// What `init` wrote, and what it kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub name: String,
    pub manifest: PathBuf,
    pub scenario: PathBuf,
    /// `None`: a README.md was there already and is kept.
    pub readme: Option<PathBuf>,
}

/// Writes the project into `dir`; `project` is where templates are looked up.
pub fn init(dir: &Path, project: &Project, args: &InitArgs) -> Result<Written, InitError> {
    let name = match &args.name {
        Some(name) if is_plain_name(name) => name.clone(),
        Some(name) => return Err(InitError::BadName(name.clone())),
        None => default_name(dir),
    };
    if builtin_target_names().contains(&name) {
        return Err(InitError::Taken(name));
    }
    let template = match &args.template {
        None => None,
        Some(peer) => {
            let all = project.templates()?;
            let found = all.iter().find(|t| &t.def.name == peer).cloned();
            Some(found.ok_or_else(|| {
                InitError::UnknownTemplate {
                    name: peer.clone(),
                    known: all
                        .iter()
                        .map(|t| t.def.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            })?)
        }
    };
    let folder = dir.join(FOLDER);
    let manifest = folder.join("targets").join(&name).join("target.toml");
    let scenario = folder.join("scenarios").join(format!("{name}.toml"));
    let readme = folder.join("README.md");
    for path in [&manifest, &scenario] {
        if path.exists() {
            return Err(InitError::Exists(path.clone()));
        }
    }
    let template = template.map(|t| t.def);
    write(&manifest, &manifest_text(&name, template.as_ref()))?;
    write(&scenario, &scenario_text(&name))?;
    let readme = if readme.exists() {
        None
    } else {
        write(&readme, &readme_text(&name))?;
        Some(readme)
    };
    Ok(Written {
        name,
        manifest,
        scenario,
        readme,
    })
}

/// What `init` prints: the files, then what to do next.
pub fn report(written: &Written, dir: &Path) -> String {
    let show = |p: &Path| p.strip_prefix(dir).unwrap_or(p).display().to_string();
    let mut text = format!(
        "wrote {}\nwrote {}\n",
        show(&written.manifest),
        show(&written.scenario)
    );
    match &written.readme {
        Some(readme) => text += &format!("wrote {}\n", show(readme)),
        None => text += &format!("kept {}/README.md\n", FOLDER),
    }
    let name = &written.name;
    text += &format!(
        "\nnext:\n  \
         1. edit {manifest}: the command that starts your service, and its settings\n  \
         2. failmode check {name}                  (what is wrong with it before any chaos, and the fix)\n  \
         3. failmode run {name} --duration-scale 0.2  (a quick look; `--gate` checks the gates)\n\
         (failmode setup installs redis-server and toxiproxy-server when they are missing)\n",
        manifest = show(&written.manifest),
    );
    text
}

/// The directory's name as a target's name: other characters become '-'.
fn default_name(dir: &Path) -> String {
    let raw = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let name: String = raw
        .chars()
        .map(|c| {
            if is_plain_name(&c.to_string()) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches('-');
    if name.is_empty() {
        "service".to_owned()
    } else {
        name.to_owned()
    }
}

fn write(path: &Path, text: &str) -> Result<(), InitError> {
    let error = |source| InitError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(error)?;
    }
    // create_new: a file that appeared since the check is not overwritten either.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => InitError::Exists(path.to_owned()),
            _ => error(e),
        })?;
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    fn args(name: Option<&str>, template: Option<&str>) -> InitArgs {
        InitArgs {
            name: name.map(str::to_owned),
            template: template.map(str::to_owned),
        }
    }

    #[test]
    fn init_writes_a_project_whose_scenario_and_manifest_load_and_refuses_a_second_time() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::at(dir.path());
        let written = init(dir.path(), &project, &args(Some("mine"), None)).unwrap();
        assert_eq!(written.name, "mine");
        let manifest = std::fs::read_to_string(&written.manifest).unwrap();
        for placeholder in [
            "{port}",
            "{redis_url}",
            "{instance_count}",
            "{limit}",
            "{window_ms}",
        ] {
            assert!(manifest.contains(placeholder), "{placeholder}");
        }
        for key in [
            "[ready]",
            "caller_header",
            "# [metrics]",
            "# [warm_up]",
            "CHANGE ME",
        ] {
            assert!(manifest.contains(key), "{key}");
        }

        let project = Project::find_from(dir.path());
        let scenario = project.find_scenario("mine").unwrap();
        let names: Vec<&str> = scenario.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["mine", "reference", "fail-open"]);
        let gates = crate::gate::parse_gates(&scenario.gates).unwrap();
        assert_eq!(gates.len(), 12);
        assert!(gates.iter().all(|g| g.target == "mine"));
        let defs = project.targets_for(&scenario).unwrap();
        let mine = defs.iter().find(|d| d.name == "mine").unwrap();
        assert_eq!(mine.command, ["node", "server.js"]);
        assert_eq!(mine.env["REDIS_URL"], "{redis_url}");

        let again = init(dir.path(), &project, &args(Some("mine"), None)).unwrap_err();
        assert!(
            matches!(&again, InitError::Exists(p) if p == &written.manifest),
            "{again}"
        );
        // Another target in the same project keeps the README.
        let other = init(dir.path(), &project, &args(Some("other"), None)).unwrap();
        assert_eq!(other.readme, None);
    }

    #[test]
    fn the_name_defaults_to_the_directory_s_and_must_not_be_a_built_in_target_s() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("My Service");
        std::fs::create_dir(&here).unwrap();
        let project = Project::at(&here);
        let written = init(&here, &project, &args(None, None)).unwrap();
        assert_eq!(written.name, "My-Service");
        let err = init(&here, &project, &args(Some("fail-open"), None)).unwrap_err();
        assert!(matches!(err, InitError::Taken(_)), "{err}");
        let err = init(&here, &project, &args(Some("a b"), None)).unwrap_err();
        assert!(matches!(err, InitError::BadName(_)), "{err}");
    }

    /// A project in a fresh folder with target `name` written from peer `template`.
    fn from_template(name: &str, template: &str) -> (tempfile::TempDir, Project, Written) {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::at(dir.path());
        let written = init(dir.path(), &project, &args(Some(name), Some(template))).unwrap();
        (dir, project, written)
    }

    #[test]
    fn a_template_starts_the_manifest_from_a_peer_s_settings() {
        let (dir, project, written) = from_template("api", "express-rate-limit");
        let defs = crate::targets::manifest::read(&written.manifest).unwrap();
        assert_eq!(defs.len(), 1);
        let def = &defs[0];
        assert_eq!(def.name, "api");
        assert_eq!(def.env["IOREDIS_COMMAND_TIMEOUT_MS"], "20");
        assert_eq!(def.env["FAILMODE_REDIS_URL"], "{redis_url}");
        assert_eq!(def.ready_path, "/healthz");
        let text = std::fs::read_to_string(&written.manifest).unwrap();
        assert!(
            text.contains("targets/node/express-rate-limit/target.toml"),
            "{text}"
        );
        let scenario = Scenario::load(&written.scenario).unwrap();
        assert_eq!(scenario.targets[0].name, "api");

        let err = init(dir.path(), &project, &args(Some("x"), Some("nope"))).unwrap_err();
        assert!(err.to_string().contains("flask-limiter"), "{err}");
    }

    #[test]
    fn a_template_keeps_the_peer_s_warm_up_until_settled() {
        let (_dir, project, written) = from_template("gateway", "spring-cloud-gateway");
        let mine = crate::targets::manifest::read(&written.manifest).unwrap();
        let templates = project.templates().unwrap();
        let peer = &templates
            .iter()
            .find(|t| t.def.name == "spring-cloud-gateway")
            .unwrap()
            .def;
        assert!(peer.warm_up.settled_below.is_some(), "{:?}", peer.warm_up);
        assert_eq!(mine[0].warm_up, peer.warm_up);
    }

    #[test]
    fn every_peer_built_in_makes_a_manifest_that_reads() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::at(dir.path());
        for (i, t) in project.templates().unwrap().iter().enumerate() {
            let text = manifest_text(&format!("t{i}"), Some(&t.def));
            let path = dir.path().join(format!("t{i}.toml"));
            std::fs::write(&path, &text).unwrap();
            let read = crate::targets::manifest::read(&path)
                .unwrap_or_else(|e| panic!("{}: {e}\n{text}", t.def.name));
            assert_eq!(read[0].command, t.def.command, "{}", t.def.name);
            assert_eq!(read[0].env, t.def.env, "{}", t.def.name);
            assert_eq!(read[0].refuses_with, t.def.refuses_with, "{}", t.def.name);
        }
    }
}
