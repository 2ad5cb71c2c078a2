//! One worker's results folder read back into what its run measured: its `run.json`, its
//! scenario, and its histograms and series placed by the tags of its logs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::MergeError;
use crate::metrics::{Measured, Shape, pack};
use crate::results::hlog;
use crate::results::read::{ReadError, read_series};
use crate::results::{RunResult, Worker};
use crate::scenario::Scenario;

/// One worker's folder, read back into what its run measured.
#[derive(Debug)]
pub(super) struct Part {
    pub(super) path: PathBuf,
    pub(super) run: RunResult,
    pub(super) worker: Worker,
    pub(super) scenario: Scenario,
    pub(super) measured: Measured,
}

pub(super) fn shape_of(run: &RunResult, scenario: &Scenario) -> Shape {
    scenario.measurement_shape(run.targets.len())
}

/// The index of every tag a folder's logs can hold, by what they cover.
#[derive(Debug, Default)]
struct Tags {
    cells: BTreeMap<String, (usize, usize, usize)>,
    slots: BTreeMap<String, (usize, usize)>,
    targets: BTreeMap<String, usize>,
}

impl Tags {
    fn of(run: &RunResult, scenario: &Scenario) -> Self {
        let mut tags = Self::default();
        for (t, target) in run.targets.iter().enumerate() {
            tags.targets.insert(target.name.clone(), t);
            let slots = scenario
                .tenants
                .iter()
                .map(|x| x.name.as_str())
                .chain(["all"]);
            for (n, slot) in slots.enumerate() {
                tags.slots.insert(format!("{}/{slot}", target.name), (t, n));
            }
            for (n, tenant) in scenario.tenants.iter().enumerate() {
                for (p, phase) in scenario.phases.iter().enumerate() {
                    tags.cells.insert(
                        format!("{}/{}/{}", target.name, tenant.name, phase.name),
                        (t, n, p),
                    );
                }
            }
        }
        tags
    }
}

pub(super) fn read_part(path: &Path) -> Result<Part, MergeError> {
    let run = RunResult::read(path)?;
    let worker = run
        .worker
        .ok_or_else(|| MergeError::NotAWorker(path.to_owned()))?;
    let scenario_path = path.join("scenario.toml");
    let source = std::fs::read_to_string(&scenario_path).map_err(|source| {
        MergeError::Read(ReadError::Io {
            path: scenario_path.clone(),
            source,
        })
    })?;
    let mut scenario =
        Scenario::parse(&source, &scenario_path.display().to_string()).map_err(|source| {
            MergeError::Scenario {
                path: scenario_path.clone(),
                source,
            }
        })?;
    scenario.seed = run.seed;
    let scenario = scenario.scaled(run.duration_scale);
    let mut measured = Measured::empty(&shape_of(&run, &scenario));
    let tags = Tags::of(&run, &scenario);
    let content = |message: String| MergeError::Content {
        path: path.to_owned(),
        message,
    };

    for (t, target) in run.targets.iter().enumerate() {
        for phase in &target.phases {
            let p = scenario
                .phases
                .iter()
                .position(|x| x.name == phase.name)
                .ok_or_else(|| content(format!("run.json names a phase {:?}", phase.name)))?;
            for (n, tenant) in phase.tenants.iter().enumerate() {
                if let Some(cell) = measured.cells[t].get_mut(n) {
                    cell[p].counts = tenant.counts;
                }
            }
        }
    }
    for (file, service) in [("latency.hlog", false), ("service_time.hlog", true)] {
        for i in hlog::read(&path.join(file))? {
            let &(t, n, p) = tags
                .cells
                .get(&i.tag)
                .ok_or_else(|| content(format!("{file} has an unknown tag {:?}", i.tag)))?;
            let cell = &mut measured.cells[t][n][p];
            if service {
                cell.service_time = i.histogram;
            } else {
                cell.latency = i.histogram;
            }
        }
    }
    for i in hlog::read(&path.join("seconds.hlog"))? {
        let &(t, n) = tags
            .slots
            .get(&i.tag)
            .ok_or_else(|| content(format!("seconds.hlog has an unknown tag {:?}", i.tag)))?;
        measured.second_latency[t][n].insert(i.start.as_secs() as usize, pack(&i.histogram));
    }
    for i in hlog::read(&path.join("send_lag.hlog"))? {
        let &t = tags
            .targets
            .get(&i.tag)
            .ok_or_else(|| content(format!("send_lag.hlog has an unknown tag {:?}", i.tag)))?;
        measured.send_lag[t] = i.histogram;
    }
    for row in read_series(path)? {
        let &(t, n) = tags
            .slots
            .get(&format!("{}/{}", row.target, row.tenant))
            .ok_or_else(|| {
                content(format!(
                    "series.csv has an unknown target/tenant {}/{}",
                    row.target, row.tenant
                ))
            })?;
        if let Some(second) = measured.seconds[t][n].get_mut(row.second as usize) {
            second.counts = row.counts;
        }
    }
    Ok(Part {
        path: path.to_owned(),
        run,
        worker,
        scenario,
        measured,
    })
}
