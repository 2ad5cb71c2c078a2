//! docs/distributed.md's Kubernetes manifests agree with the failmode command line: the
//! Indexed Job's pods become workers 1 … N of N (N its completions, all at once, never
//! retried), each with the shared start time, the deployment file where the ConfigMap mounts
//! it, and flags `failmode run` accepts; the merge Job reads the folders the workers write.
//! No cluster is here: the pods' shell lines are run with a stand-in `failmode` that prints
//! its arguments.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::process::Command;

use serde::Deserialize;
use serde_norway::Value;
use support::workspace;

fn documents(relative: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(workspace().join(relative)).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn container(job: &Value) -> &Value {
    &job["spec"]["template"]["spec"]["containers"][0]
}

fn env(container: &Value) -> BTreeMap<String, String> {
    container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The pod's command line as its shell expands it, with `failmode` printing its arguments one
/// per line instead of running.
fn expand(container: &Value, extra: &[(&str, &str)]) -> Vec<String> {
    let line = container["args"][0].as_str().unwrap();
    let command: Vec<&str> = container["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(command, ["/bin/sh", "-c"]);
    let script = format!(
        "failmode() {{ printf '%s\\n' \"$@\"; }}\n{}",
        line.replace("exec ", "")
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .env_clear()
        .envs(env(container))
        .envs(extra.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn flag<'a>(args: &'a [String], name: &str) -> &'a str {
    let at = args
        .iter()
        .position(|a| a == name)
        .unwrap_or_else(|| panic!("no {name} in {args:?}"));
    &args[at + 1]
}

#[test]
fn the_indexed_job_runs_workers_one_to_n_of_n_from_one_start_on_the_mounted_deployment() {
    let docs = documents("deploy/kubernetes/workers.yaml");
    let job = kind(&docs, "Job");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let n = spec["completions"].as_u64().unwrap();
    assert_eq!(spec["parallelism"].as_u64(), Some(n), "all workers at once");
    assert_eq!(
        spec["backoffLimit"].as_u64(),
        Some(0),
        "a retried pod starts late"
    );
    assert_eq!(
        spec["template"]["spec"]["restartPolicy"].as_str(),
        Some("Never")
    );
    let c = container(job);
    let vars = env(c);
    assert_eq!(vars["WORKERS"], n.to_string());

    let mut outs = Vec::new();
    for index in 0..n {
        let args = expand(c, &[("JOB_COMPLETION_INDEX", &index.to_string())]);
        assert_eq!(args[0], "run");
        assert_eq!(args[1], vars["SCENARIO"]);
        assert!(
            workspace()
                .join("scenarios")
                .join(format!("{}.toml", args[1]))
                .is_file(),
            "{} is a shipped scenario",
            args[1]
        );
        assert_eq!(flag(&args, "--worker"), format!("{}/{n}", index + 1));
        assert_eq!(flag(&args, "--start-at"), vars["START_AT"]);
        assert!(args.contains(&"--allow-remote".to_owned()));
        outs.push(flag(&args, "--out").to_owned());

        // The deployment file is the ConfigMap's key where its volume is mounted.
        let attach = flag(&args, "--attach");
        let pod = &job["spec"]["template"]["spec"];
        let (dir, file) = attach.rsplit_once('/').unwrap();
        let mount = c["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"].as_str() == Some(dir))
            .unwrap_or_else(|| panic!("nothing mounted at {dir}"));
        let volume = pod["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap();
        let map = kind(&docs, "ConfigMap");
        assert_eq!(volume["configMap"]["name"], map["metadata"]["name"]);
        let deployment: toml::Table = toml::from_str(map["data"][file].as_str().unwrap()).unwrap();
        let all = failmode::targets::manifest::discover(&workspace().join("targets")).unwrap();
        for t in deployment["targets"].as_array().unwrap() {
            let name = t["name"].as_str().unwrap();
            assert!(
                all.iter().any(|d| d.name == name),
                "{name} is a target manifest"
            );
        }
    }
    outs.sort();
    outs.dedup();
    assert_eq!(outs.len() as u64, n, "each worker its own folder: {outs:?}");

    // Every flag the workers pass is one `failmode run` has.
    let help = Command::new(env!("CARGO_BIN_EXE_failmode"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let args = expand(c, &[("JOB_COMPLETION_INDEX", "0")]);
    let known: Vec<&str> = help
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.starts_with("--"))
        .collect();
    for a in args.iter().filter(|a| a.starts_with("--")) {
        assert!(
            known.contains(&a.as_str()),
            "failmode run has no {a}: {known:?}"
        );
    }

    // The merge reads the workers' folders: same run name, same volume, their parent.
    let merge = documents("deploy/kubernetes/merge.yaml");
    let m = container(kind(&merge, "Job"));
    assert_eq!(env(m)["RUN"], vars["RUN"]);
    let margs = expand(m, &[]);
    assert_eq!(margs[0], "merge");
    let pattern = &margs[1];
    assert!(
        pattern.ends_with("/worker-*") && outs[0].starts_with(pattern.trim_end_matches('*')),
        "{pattern} vs {outs:?}"
    );
    let claim = |c: &Value, pod: &Value| -> String {
        let mount = c["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["mountPath"].as_str() == Some("/results"))
            .unwrap();
        pod["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap()["persistentVolumeClaim"]["claimName"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        claim(c, &job["spec"]["template"]["spec"]),
        claim(m, &kind(&merge, "Job")["spec"]["template"]["spec"])
    );
}
