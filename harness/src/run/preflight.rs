//! Before anything starts: which targets run (the scenario's, `--targets`, or an attached
//! deployment's, whose settings win), and every refusal that can be made without starting
//! anything — a late worker, a fault an attached deployment or containers cannot take, a
//! program that is not installed, results that could not be written — so a refused run
//! leaves nothing behind, not even a folder.

use crate::deployment::Deployment;
use crate::faults::Fault;
use crate::infra::{Infra, InfraError, install_hint, locate};
use crate::results::folder;
use crate::scenario::{RedisTopology, Scenario};
use crate::targets::{TargetDef, manifest};

use super::progress::Say;
use super::start::{start_passed, until_start};
use super::{RunError, RunOptions, Topology};

/// The targets this run drives, in order: an attached deployment's, `--targets`, or the
/// scenario's; an attached deployment's word on a target (its limit, its caller identity) wins.
pub(super) fn resolve(opts: &RunOptions) -> Result<Vec<TargetDef>, RunError> {
    let all = crate::project::Project::at(&opts.root).targets_for(&opts.scenario)?;
    let attached = opts.topology.attached();
    let names: Vec<String> = match attached {
        Some(deployment) => deployment.targets.iter().map(|t| t.name.clone()).collect(),
        None => opts.targets.clone().unwrap_or_else(|| {
            opts.scenario
                .targets
                .iter()
                .map(|t| t.name.clone())
                .collect()
        }),
    };
    let mut defs = manifest::select(&all, &names)?;
    if let Some(deployment) = attached {
        // What the deployment file says of a target (its limit, its caller identity) wins.
        for (def, attached) in defs.iter_mut().zip(&deployment.targets) {
            *def = attached.over(def);
        }
    }
    refuse_drawn_by_address(&opts.scenario, &defs)?;
    Ok(defs)
}

/// A population's rest sends thousands of keys in a header; a target that tells callers by
/// address would need an address per key. Refused here, before anything starts, as the load
/// generator would refuse it at the start of the load.
fn refuse_drawn_by_address(
    scenario: &crate::scenario::Scenario,
    defs: &[TargetDef],
) -> Result<(), RunError> {
    let drawn = scenario
        .tenants
        .iter()
        .find(|t| matches!(t.caller, crate::load::Caller::Drawn(_)));
    match (drawn, defs.iter().find(|d| d.caller.by_address())) {
        (Some(tenant), Some(target)) => Err(RunError::Unsendable(
            crate::load::LoadError::DrawnKeysByAddress {
                target: target.name.clone(),
                tenant: tenant.name.clone(),
            },
        )),
        _ => Ok(()),
    }
}

/// Refuses what cannot run, before anything is started or written.
pub(super) fn refuse(opts: &RunOptions, say: &Say) -> Result<(), RunError> {
    if let Some(w) = &opts.worker {
        // Before attaching too: a late worker must not touch the deployment at all.
        until_start(w).map_err(|late| start_passed(w, late))?;
    }
    refuse_unwritable(opts)?;
    if opts.scenario.redis != RedisTopology::Single && !matches!(opts.topology, Topology::Local) {
        return Err(RunError::SentinelNotLocal);
    }
    refuse_short_failover(&opts.scenario, opts.duration_scale)?;
    match &opts.topology {
        Topology::Attached(deployment) => refuse_attached(opts, deployment, say),
        Topology::Local => {
            required("redis-server", &install_hint("redis-server"))?;
            required("toxiproxy-server", &install_hint("toxiproxy-server"))?;
            Ok(())
        }
        Topology::Docker => docker_refusal(&opts.scenario).map_or(Ok(()), Err),
    }
}

/// Refuses a failover phase, as this run would play it, too short for the sentinels to promote
/// the replica.
fn refuse_short_failover(scenario: &Scenario, scale: f64) -> Result<(), RunError> {
    let min = crate::infra::sentinel::MIN_FAILOVER_PHASE;
    let short = scenario
        .phases
        .iter()
        .find(|p| p.length() < min && p.faults.iter().any(|f| matches!(f, Fault::Failover { .. })));
    let Some(phase) = short else { return Ok(()) };
    Err(RunError::FailoverTooShort {
        phase: phase.name.clone(),
        length_s: phase.length().as_secs_f64(),
        min_s: min.as_secs(),
        scale: (scale != 1.0).then_some(scale),
    })
}

/// Refuses results that could not be written, naming the folder as given: `--out`, or the
/// scenario's folder under the results root.
fn refuse_unwritable(opts: &RunOptions) -> Result<(), RunError> {
    let path = opts
        .out
        .clone()
        .unwrap_or_else(|| opts.results_root.join(&opts.scenario.name));
    folder::check_writable(&path).map_err(|source| RunError::Results { path, source })
}

/// Attached: refuses the faults the deployment cannot take, then says what the run will
/// touch and how to undo it.
fn refuse_attached(opts: &RunOptions, deployment: &Deployment, say: &Say) -> Result<(), RunError> {
    // Refused before anything is sent: a fault the deployment cannot take.
    if let Some((phase, fault)) = first_refused(&opts.scenario, Fault::attachable) {
        return Err(RunError::NotAttachable { phase, fault });
    }
    say.line("attached: failmode starts nothing; it will touch only this:");
    for line in deployment.describe() {
        say.line(&format!("  {line}"));
    }
    if opts.plays_faults() {
        say.line(&format!(
            "if this run dies before it ends, remove what it left with: failmode faults \
             reset --attach {}",
            deployment.path.display()
        ));
    } else {
        say.line(
            "this worker plays no faults: it leaves the proxies as the process playing them \
             has them, whenever it stops",
        );
    }
    Ok(())
}

fn required(program: &str, hint: &str) -> Result<(), InfraError> {
    match locate(program) {
        Some(_) => Ok(()),
        None => Err(InfraError::MissingBinary {
            program: program.to_owned(),
            hint: hint.to_owned(),
        }),
    }
}

/// The first fault of the scenario `allowed` refuses, as (phase, fault).
fn first_refused(
    scenario: &Scenario,
    allowed: impl Fn(&Fault) -> bool,
) -> Option<(String, String)> {
    scenario.phases.iter().find_map(|phase| {
        phase
            .faults
            .iter()
            .find(|f| !allowed(f))
            .map(|f| (phase.name.clone(), f.to_string()))
    })
}

/// Why containers refuse this run, checked before anything starts: a binary built without
/// them, or a fault that needs failmode's own redis-server process.
fn docker_refusal(scenario: &Scenario) -> Option<RunError> {
    if let Err(e) = Infra::Docker.check_built() {
        return Some(e.into());
    }
    first_refused(scenario, |f| !f.needs_redis_process())
        .map(|(phase, fault)| RunError::NotInContainers { phase, fault })
}

#[cfg(test)]
mod tests {
    use tokio_util::sync::CancellationToken;

    use super::*;

    #[test]
    fn a_missing_program_is_named_with_how_to_get_it() {
        let e = required("failmode-no-such-program", "run `just setup`").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("failmode-no-such-program") && text.contains("just setup"),
            "{text}"
        );
        assert!(required("sh", "").is_ok());
    }

    #[test]
    fn a_failover_phase_scaled_below_what_a_promotion_takes_is_refused_naming_the_scale() {
        let shipped = Scenario::load(
            &crate::infra::workspace_root().join("scenarios/sentinel-failover.toml"),
        )
        .unwrap();
        // Its failover phase lasts 20 s: 4 s at a fifth, the shortest accepted.
        for scale in [1.0, 0.5, 0.2] {
            assert!(
                refuse_short_failover(&shipped.scaled(scale), scale).is_ok(),
                "{scale}"
            );
        }
        let refused = refuse_short_failover(&shipped.scaled(0.1), 0.1).unwrap_err();
        assert!(
            matches!(&refused, RunError::FailoverTooShort { phase, min_s: 4, .. } if phase == "fault"),
            "{refused:?}"
        );
        let text = refused.to_string();
        assert!(
            text.contains("in 2.0 s at --duration-scale 0.1")
                && text.contains("a larger --duration-scale"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_sentinel_topology_is_refused_in_containers_and_attached_before_anything_is_written()
    {
        let shipped = Scenario::load(
            &crate::infra::workspace_root().join("scenarios/sentinel-failover.toml"),
        )
        .unwrap();
        let deployment = crate::deployment::Deployment::parse(
            r#"
toxiproxy = "http://127.0.0.1:8474"
[[targets]]
name = "reference"
instances = ["http://127.0.0.1:8081"]
proxy = "reference-redis"
"#,
            std::path::Path::new("deployment.toml"),
            false,
        )
        .unwrap();
        for topology in [Topology::Docker, Topology::Attached(deployment)] {
            let out = tempfile::tempdir().unwrap();
            let opts = RunOptions {
                root: crate::infra::workspace_root(),
                results_root: out.path().to_owned(),
                scenario: shipped.clone(),
                duration_scale: 1.0,
                targets: None,
                out: None,
                build: false,
                topology,
                worker: None,
                live_metrics: None,
            };
            let error = super::super::run(opts, CancellationToken::new(), &Say::default())
                .await
                .unwrap_err();
            assert!(matches!(error, RunError::SentinelNotLocal), "{error:?}");
            assert!(error.to_string().contains("not attached"), "{error}");
            assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
        }
    }

    fn scenario(faults: &str) -> Scenario {
        let text = format!(
            r#"
name = "infra-check"
[policy]
limit = 50
window = "1s"
[[tenants]]
name = "acme"
rate = 10
[[targets]]
name = "reference"
[[phases]]
name = "steady"
start = "0s"
end = "1s"
[[phases]]
name = "fault"
start = "1s"
end = "2s"
faults = [{faults}]
"#
        );
        Scenario::parse(&text, "infra-check.toml").unwrap()
    }

    #[test]
    fn in_containers_only_the_faults_on_failmodes_own_redis_process_are_refused() {
        let playable = scenario(
            r#"{ type = "down" }, { type = "hang" }, { type = "flap", period = "1s", down = "200ms" },
               { type = "latency", latency_ms = 5 }, { type = "client-pause" },
               { type = "noisy-neighbour" }, { type = "eviction" }, { type = "scale", to = 2 },
               { type = "kill-instance" }, { type = "oom" }, { type = "busy" },
               { type = "script-flush" }"#,
        );
        for fault in [
            r#"{ type = "stall" }"#,
            r#"{ type = "redis-restart" }"#,
            r#"{ type = "readonly" }"#,
        ] {
            let refused = scenario(&format!(r#"{{ type = "down" }}, {fault}"#));
            match docker_refusal(&refused) {
                Some(RunError::NotInContainers { phase, fault }) if cfg!(feature = "docker") => {
                    assert_eq!(phase, "fault");
                    assert!(
                        ["stall", "redis-restart", "readonly"]
                            .iter()
                            .any(|f| fault.starts_with(f)),
                        "{fault}"
                    );
                }
                Some(RunError::DockerNotBuilt(_)) if cfg!(not(feature = "docker")) => {}
                other => panic!("{fault}: {other:?}"),
            }
        }
        match docker_refusal(&playable) {
            None if cfg!(feature = "docker") => {}
            Some(RunError::DockerNotBuilt(_)) if cfg!(not(feature = "docker")) => {}
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_fault_docker_cannot_play_is_refused_before_anything_is_started_or_written() {
        let out = tempfile::tempdir().unwrap();
        let opts = RunOptions {
            root: crate::infra::workspace_root(),
            results_root: out.path().to_owned(),
            scenario: scenario(r#"{ type = "stall" }"#),
            duration_scale: 1.0,
            targets: None,
            out: None,
            build: false,
            topology: Topology::Docker,
            worker: None,
            live_metrics: None,
        };
        let error = super::super::run(opts, CancellationToken::new(), &Say::default())
            .await
            .unwrap_err();
        let text = error.to_string();
        if cfg!(feature = "docker") {
            assert!(
                text.contains("stall") && text.contains("--infra local"),
                "{text}"
            );
        } else {
            assert!(text.contains(crate::infra::backend::DOCKER_BUILD), "{text}");
        }
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
    }
}
