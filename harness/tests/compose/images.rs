//! The images: each Dockerfile built by its manifest's build step on pinned base images of the
//! language version the repository asks for, keeping the workspace's layout, running the
//! manifest's start command where the compose services publish and probe, from a build
//! context that leaves dependencies and build output out.

use std::collections::BTreeSet;
use std::path::Path;

use crate::compose_file::{flag_value, scalar, strings};
use crate::deployments::{attached_targets, instance_services, target_def};
use crate::dockerfile::{
    absolute, copies, debian_release, dockerfile_stages, runtime, split_image, tag_version,
    workspace_paths,
};
use crate::dockerignore::{dockerignore, ignored};
use crate::support::workspace;
use crate::{REFERENCE_DOCKERFILE, compose, image, images, read, services, version};

/// The oldest Python Flask-Limiter 4 and limits 5 support (their `requires-python`); the
/// image's virtualenv is made with the requirements' hashes, so an older one fails to build.
const PYTHON_FLOOR: &str = "3.10";

#[test]
fn every_image_runs_its_manifests_start_command_from_the_workspace_layout() {
    let compose = compose();
    for t in attached_targets() {
        let def = target_def(&t.name);
        for (name, s, container) in instance_services(&compose, &t) {
            assert_eq!(
                s["build"]["context"].as_str(),
                Some("."),
                "{name}: build context"
            );
            let dockerfile = s["build"]["dockerfile"].as_str().unwrap();
            let stages = dockerfile_stages(dockerfile);
            let stage = runtime(&stages);
            // Docker's rules: a service's entrypoint replaces the image's and drops its CMD.
            let (entrypoint, cmd) = if s["entrypoint"].is_null() {
                (
                    stage.exec_form("ENTRYPOINT").unwrap_or_default(),
                    stage.exec_form("CMD").unwrap_or_default(),
                )
            } else {
                (strings(&s["entrypoint"]), Vec::new())
            };
            let cmd = if s["command"].is_null() {
                cmd
            } else {
                strings(&s["command"])
            };
            let argv: Vec<String> = entrypoint.into_iter().chain(cmd).collect();
            assert_eq!(argv, def.command, "{name} ({dockerfile})");

            // The command's and the environment's workspace paths are where the image put
            // them: the runtime stage's copies keep the workspace layout under its WORKDIR.
            let workdir = stage.workdir();
            assert!(workdir.starts_with('/'), "{dockerfile}: WORKDIR {workdir}");
            let copies = copies(stage);
            for path in workspace_paths(def.command.iter().chain(def.env.values())) {
                let path = absolute(workdir, &path);
                assert!(
                    copies.iter().any(|c| {
                        let dest = absolute(workdir, &c.destination);
                        let dest = dest.trim_end_matches('/');
                        path == dest || path.starts_with(&format!("{dest}/"))
                    }),
                    "{dockerfile}: nothing is copied to {path}, which {} names",
                    def.name
                );
            }

            // Listening where the service publishes, probed where the manifest says.
            assert_eq!(
                stage.all("EXPOSE"),
                [container.to_string().as_str()],
                "{dockerfile}: EXPOSE"
            );
            let probe = strings(&s["healthcheck"]["test"]).join(" ");
            assert!(
                probe.contains(&format!("/dev/tcp/127.0.0.1/{container}"))
                    && probe.contains(&format!("GET {} ", def.ready_path)),
                "{name}: the healthcheck {probe:?} does not ask {} on {container}",
                def.ready_path
            );
            let start_period = scalar(&s["healthcheck"]["start_period"]);
            assert_eq!(
                humantime::parse_duration(&start_period).ok(),
                Some(def.ready_timeout),
                "{name}: the healthcheck's start_period is the manifest's [ready] timeout"
            );
        }
    }
}

#[test]
fn every_runtime_stage_keeps_the_workspace_layout_it_copies() {
    let compose = compose();
    for dockerfile in images(&compose).keys() {
        let stages = dockerfile_stages(dockerfile);
        let stage = runtime(&stages);
        let workdir = stage.workdir();
        for c in copies(stage) {
            // A source, relative to the workspace (the context) or to its stage's WORKDIR.
            let source_root = match &c.from {
                None => "/".to_owned(),
                Some(from) => {
                    let source = stages
                        .iter()
                        .find(|s| s.name.as_deref() == Some(from.as_str()))
                        .unwrap_or_else(|| panic!("{dockerfile}: no stage {from}"));
                    format!("{}/", source.workdir().trim_end_matches('/'))
                }
            };
            let dest = absolute(workdir, &c.destination);
            for source in &c.sources {
                let relative = absolute("/", source)
                    .strip_prefix(&source_root)
                    .unwrap_or_else(|| panic!("{dockerfile}: COPY {source}: outside {source_root}"))
                    .to_owned();
                let into_folder = format!(
                    "{}/{}",
                    dest.trim_end_matches('/'),
                    Path::new(&relative).file_name().unwrap().to_str().unwrap()
                );
                let same = absolute(workdir, &relative);
                assert!(
                    same.trim_end_matches('/') == dest.trim_end_matches('/')
                        || (dest.ends_with('/') && same == into_folder),
                    "{dockerfile}: COPY {source} {} does not keep the workspace's layout under {workdir}",
                    c.destination
                );
            }
        }
    }
}

#[test]
fn every_image_is_built_by_its_manifests_build_step() {
    let compose = compose();
    for (dockerfile, defs) in images(&compose) {
        let stages = dockerfile_stages(&dockerfile);
        let runs: Vec<&str> = stages.iter().flat_map(|s| s.all("RUN")).collect();
        for def in &defs {
            let Some(build) = &def.build else { continue };
            if build[0] == "cargo" {
                // The reference: built with --locked, see the reference image's own test.
                continue;
            }
            let step = build.join(" ");
            assert!(
                runs.iter()
                    .any(|r| r.split("&&").any(|part| part.trim() == step)),
                "{dockerfile} does not run {}'s build step `{step}`: {runs:?}",
                def.name
            );
        }
        // A class-data-sharing archive is only good for the JVM that made it: the runtime
        // stage makes the one its command names.
        for def in &defs {
            let Some(archive) = def
                .command
                .iter()
                .find_map(|w| w.strip_prefix("-XX:SharedArchiveFile="))
            else {
                continue;
            };
            let stage = runtime(&stages);
            let made = stage.all("RUN").iter().any(|r| {
                let script = r.split_whitespace().next().unwrap();
                std::fs::read_to_string(workspace().join(script)).is_ok_and(|text| {
                    text.contains("-XX:ArchiveClassesAtExit")
                        && text.contains(Path::new(archive).file_name().unwrap().to_str().unwrap())
                })
            });
            assert!(
                made,
                "{dockerfile}'s runtime stage does not make {archive} with its JVM"
            );
        }
    }
}

/// The `>=X.Y` of a version requirement such as package.json's engines (`>=20`).
fn at_least(requirement: &str) -> &str {
    requirement
        .trim()
        .strip_prefix(">=")
        .unwrap_or_else(|| panic!("{requirement:?} is not >=VERSION"))
        .trim()
}

/// `go.mod`'s `go` and `toolchain` versions.
fn go_mod(relative: &str) -> (String, Option<String>) {
    let text = read(relative);
    let line = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().trim_start_matches("go").to_owned())
    };
    (
        line("go ").unwrap_or_else(|| panic!("{relative} has no go line")),
        line("toolchain "),
    )
}

#[test]
fn every_base_image_is_pinned_to_the_version_the_repository_asks_for() {
    let compose = compose();
    for (dockerfile, _) in images(&compose) {
        let stages = dockerfile_stages(&dockerfile);
        let names: Vec<&str> = stages.iter().filter_map(|s| s.name.as_deref()).collect();
        let bases: Vec<&str> = stages
            .iter()
            .map(|s| s.from.as_str())
            .filter(|f| !names.contains(f))
            .collect();
        let mut releases = BTreeSet::new();
        for base in &bases {
            let (name, tag) = split_image(base);
            assert!(
                !tag.contains("latest"),
                "{dockerfile}: {base} is not pinned"
            );
            releases.extend(debian_release(tag));
            let v = tag_version(tag);
            match name {
                "node" => {
                    let package: serde_json::Value =
                        serde_json::from_str(&read("targets/node/package.json")).unwrap();
                    let needed = at_least(package["engines"]["node"].as_str().unwrap());
                    assert_eq!(version(v).len(), 3, "{dockerfile}: {base}: pin X.Y.Z");
                    assert!(
                        version(v) >= version(needed),
                        "{base}: engines ask for {needed}"
                    );
                }
                "python" => {
                    assert_eq!(version(v).len(), 3, "{dockerfile}: {base}: pin X.Y.Z");
                    assert!(version(v) >= version(PYTHON_FLOOR), "{base}");
                }
                "golang" => {
                    let module = Path::new(&dockerfile).parent().unwrap().join("go.mod");
                    let (go, toolchain) = go_mod(module.to_str().unwrap());
                    assert_eq!(version(v).len(), 3, "{dockerfile}: {base}: pin X.Y.Z");
                    assert!(
                        version(v) >= version(&go),
                        "{base}: {} asks for go {go}",
                        module.display()
                    );
                    if let Some(toolchain) = toolchain {
                        assert_eq!(v, toolchain, "{base}: {}'s toolchain", module.display());
                    }
                }
                "rust" => {
                    let root: toml::Table = read("Cargo.toml").parse().unwrap();
                    let needed = root["workspace"]["package"]["rust-version"]
                        .as_str()
                        .unwrap();
                    assert!(
                        version(v) >= version(needed),
                        "{base}: rust-version {needed}"
                    );
                }
                "maven" | "eclipse-temurin" => {
                    // maven:3.9.16-eclipse-temurin-17, eclipse-temurin:17.0.15_6-jre-noble.
                    let java = match name {
                        "maven" => tag.split("eclipse-temurin-").nth(1).map(tag_version),
                        _ => Some(tag_version(tag)),
                    }
                    .unwrap_or_else(|| panic!("{base}: which Java?"));
                    let pom = read(
                        Path::new(&dockerfile)
                            .parent()
                            .unwrap()
                            .join("pom.xml")
                            .to_str()
                            .unwrap(),
                    );
                    let wanted = pom
                        .split("<java.version>")
                        .nth(1)
                        .and_then(|rest| rest.split('<').next())
                        .expect("pom.xml's java.version");
                    assert_eq!(
                        version(java)[0],
                        version(wanted)[0],
                        "{base}: java.version {wanted}"
                    );
                }
                "debian" => assert!(debian_release(tag).is_some(), "{base}: name a release"),
                other => panic!("{dockerfile}: {base}: no rule says which {other} to pin"),
            }
        }
        // A binary built in one stage runs with the glibc of another: one Debian release.
        assert!(
            releases.len() <= 1,
            "{dockerfile}: Debian releases {releases:?}"
        );
        // A virtualenv or node_modules copied between stages wants the same interpreter.
        if bases
            .iter()
            .any(|b| b.starts_with("python:") || b.starts_with("node:"))
        {
            assert!(
                bases.windows(2).all(|w| w[0] == w[1]),
                "{dockerfile}: its stages run different interpreters: {bases:?}"
            );
        }
    }
    // The images compose runs without building them are pinned too.
    for (name, s) in services(&compose) {
        let reference = image(&name, s);
        let (_, tag) = split_image(&reference);
        assert!(!tag.contains("latest"), "{name}: {reference} is not pinned");
        if !s["build"].is_null() {
            assert_eq!(tag, "local", "{name}: a built image is tagged local");
        }
    }
}

#[test]
fn the_build_context_keeps_dependencies_and_output_out_but_lets_in_what_is_copied() {
    let patterns = dockerignore();
    for out in [
        "targets/node/node_modules/express/package.json",
        ".tools/python/bin/gunicorn",
        ".tools/bin/failmode-redis-rate",
        "target/release/failmode-reference",
        "targets/reference/target/debug/x",
        "results/latest/run.json",
        "targets/python/flask-limiter/__pycache__/app.cpython-311.pyc",
        ".git/HEAD",
    ] {
        assert!(ignored(&patterns, out), "{out} is sent to the Docker build");
    }
    let compose = compose();
    for dockerfile in images(&compose).keys() {
        for stage in dockerfile_stages(dockerfile) {
            for c in copies(&stage).into_iter().filter(|c| c.from.is_none()) {
                for source in &c.sources {
                    assert!(
                        workspace().join(source).exists(),
                        "{dockerfile}: COPY {source}: not in the workspace"
                    );
                    assert!(
                        !ignored(&patterns, source),
                        "{dockerfile}: COPY {source}: .dockerignore leaves it out"
                    );
                }
            }
        }
    }
}

#[test]
fn the_reference_image_is_built_by_the_package_of_the_binary_the_manifest_starts() {
    let stages = dockerfile_stages(REFERENCE_DOCKERFILE);
    let def = target_def("reference");
    let binary = Path::new(&def.command[0])
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();

    // Built by the package that declares that binary, with the workspace's Rust or newer.
    let builder = stages
        .iter()
        .find(|s| s.name.as_deref() == Some("builder"))
        .expect("a FROM … AS builder stage");
    let run = builder
        .all("RUN")
        .into_iter()
        .find(|r| r.contains("cargo build"))
        .expect("the Dockerfile runs cargo build");
    let words: Vec<String> = run.split_whitespace().map(str::to_owned).collect();
    assert!(
        words.iter().any(|w| w == "--locked"),
        "{run}: the locked versions"
    );
    let package = flag_value(&words, "-p").expect("cargo build -p PACKAGE");
    let root: toml::Table = read("Cargo.toml").parse().unwrap();
    let members: Vec<&str> = root["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let member = members
        .iter()
        .find(|m| {
            let cargo: toml::Table = read(&format!("{m}/Cargo.toml")).parse().unwrap();
            cargo["package"]["name"].as_str() == Some(package)
        })
        .unwrap_or_else(|| panic!("no workspace member is package {package}"));
    let cargo: toml::Table = read(&format!("{member}/Cargo.toml")).parse().unwrap();
    let bins: Vec<&str> = cargo["bin"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert!(
        bins.contains(&binary),
        "{package} builds {bins:?}, not {binary}"
    );
    // Cargo resolves the whole workspace: every member must be copied in.
    let copied: Vec<String> = copies(builder)
        .into_iter()
        .flat_map(|c| c.sources)
        .collect();
    for m in &members {
        assert!(
            copied.iter().any(|c| c == &format!("{m}/")),
            "the Dockerfile does not copy workspace member {m}/: {copied:?}"
        );
    }
    // The runtime stage holds that binary where the manifest's command finds it.
    let runtime = runtime(&stages);
    let release = format!("{}/target/release/{binary}", builder.workdir());
    assert!(
        copies(runtime)
            .iter()
            .any(|c| c.from.as_deref() == Some("builder")
                && c.sources == [release.clone()]
                && absolute(runtime.workdir(), &c.destination)
                    == absolute(runtime.workdir(), &def.command[0])),
        "the runtime stage does not copy {release} to {}",
        def.command[0]
    );
}
