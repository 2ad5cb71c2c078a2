//! The journal of a run in progress, `journal/` in its results folder, brought up to date
//! every second: a run killed outright (SIGKILL, an OOM kill, a cancelled CI job) leaves what
//! it measured up to its last second, and `failmode report` rebuilds a partial `run.json`
//! from it ([`rebuild`]). It is also where closed seconds go, so that a run's memory stays flat
//! however long it is; at the end they are read back for the results folder, and the journal
//! is removed.
//!
//! - `run.json` and `scenario.toml`: the run as it started, no figures yet;
//! - `lock`: locked by the running harness (the kernel lets go when it dies), so that a run in
//!   progress is never taken for a killed one;
//! - `seconds.hlog` and `series.csv`: each second's latency histogram and counts, appended as
//!   the second closes (a last line cut short by a kill is left out when read). A very late
//!   answer counted after its second closed reaches the results, not the journal;
//! - `latency.hlog`, `service_time.hlog`, `send_lag.hlog` and `state.json` (the phase cells'
//!   counts, every request's count, the drops by cause, the events, how long the run had
//!   run): rewritten whole each second, only the cells that changed encoded again; through a
//!   kill of the harness, not a power cut (no disk flush every second).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::Flock;
use serde::{Deserialize, Serialize};

use super::build::build_targets;
use super::folder::{RunFolder, series_row};
use super::hlog::{self, Interval};
use super::measured_files::{FilesError, Written, read_measured, read_scenario, slot_names};
use super::read::{ReadError, SERIES_HEADER};
use super::trust::judge_figures;
use super::unfinished::lock;
pub use super::unfinished::{JOURNAL, Unfinished, unfinished};
use super::{Event, LoadTotals, RunResult, TargetFacts, atomic};
use crate::load::DroppedByCause;
use crate::metrics::{Checkpoint, Counts, Measured};
use crate::scenario::Scenario;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(
        "{0} holds no journal of a run that was killed (a finished run's folder has run.json \
         instead)"
    )]
    NotARun(PathBuf),
    #[error("the run writing {0} is still going: its results are written when it ends")]
    Running(PathBuf),
    #[error("cannot lock the journal in {path}: {source}")]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the journal in {path} cannot be read: {source}")]
    Files {
        path: PathBuf,
        source: Box<FilesError>,
    },
    #[error("the journal in {path} cannot be read: {message}")]
    State { path: PathBuf, message: String },
    #[error("cannot write the rebuilt results in {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What changes as the run goes besides the histograms.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// How long the load had run at the last update.
    ran_for_s: f64,
    /// `[target][tenant][phase]`.
    counts: Vec<Vec<Vec<Counts>>>,
    /// Every request, counted once.
    totals: Counts,
    /// The seconds below this are in `series.csv` and `seconds.hlog`.
    closed_below: usize,
    dropped_by_cause: DroppedByCause,
    /// Per target.
    events: Vec<Vec<Event>>,
}

/// A journal being written.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    scenario: Scenario,
    targets: Vec<String>,
    seconds: BufWriter<File>,
    series: BufWriter<File>,
    /// Each phase cell's latest line in `latency.hlog`, by tag.
    latency: BTreeMap<String, Vec<u8>>,
    /// Each phase cell's latest line in `service_time.hlog`, by tag.
    service_time: BTreeMap<String, Vec<u8>>,
    /// Each target's latest line in `send_lag.hlog`, by name.
    send_lag: BTreeMap<String, Vec<u8>>,
    state: State,
    /// Held while the journal is written; the kernel lets go when the process dies.
    _lock: Flock<File>,
}

impl Journal {
    /// Starts the journal of `run` (as it starts: no figures yet) in `folder`.
    pub fn create(
        folder: &RunFolder,
        run: &RunResult,
        scenario: &Scenario,
    ) -> std::io::Result<Self> {
        let dir = folder.path.join(JOURNAL);
        let created = Self::create_in(&dir, run, scenario);
        if created.is_err() {
            // Half a journal would be taken for a killed run's.
            let _ = std::fs::remove_dir_all(&dir);
        }
        created
    }

    fn create_in(dir: &Path, run: &RunResult, scenario: &Scenario) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let lock = lock(dir, true)?.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "another process is writing a journal in this folder",
            )
        })?;
        atomic::write(&dir.join("scenario.toml"), &scenario.source)?;
        let append = |name: &str, first: &[u8]| -> std::io::Result<BufWriter<File>> {
            let mut file = BufWriter::new(File::create(dir.join(name))?);
            file.write_all(first)?;
            file.flush()?;
            Ok(file)
        };
        // As the results' logs begin (the interval lines' max column is in milliseconds).
        let comment = "#failmode journal: each second's latency from the scheduled send, \
                       microseconds, appended as the second closes\n#[MaxValueDivisor: 1000.000]\n";
        let shape = scenario.measurement_shape(run.targets.len());
        let journal = Self {
            seconds: append("seconds.hlog", comment.as_bytes())?,
            series: append("series.csv", format!("{SERIES_HEADER}\n").as_bytes())?,
            dir: dir.to_owned(),
            scenario: scenario.clone(),
            targets: run.targets.iter().map(|t| t.name.clone()).collect(),
            latency: BTreeMap::new(),
            service_time: BTreeMap::new(),
            send_lag: BTreeMap::new(),
            state: State {
                counts: Measured::empty(&shape)
                    .cells
                    .iter()
                    .map(|t| {
                        t.iter()
                            .map(|n| n.iter().map(|c| c.counts).collect())
                            .collect()
                    })
                    .collect(),
                events: vec![Vec::new(); run.targets.len()],
                ..State::default()
            },
            _lock: lock,
        };
        journal.rewrite()?;
        // Last: with it the journal is whole (see `unfinished`).
        let json = serde_json::to_string_pretty(run).map_err(std::io::Error::other)?;
        atomic::write(&dir.join("run.json"), json + "\n")?;
        Ok(journal)
    }

    /// Brings the journal up to date with what changed (`checkpoint`), the events so far and
    /// how long the load has run.
    pub fn update(
        &mut self,
        checkpoint: &Checkpoint,
        events: &[Vec<Event>],
        ran_for: Duration,
    ) -> std::io::Result<()> {
        let slots: Vec<&str> = slot_names(&self.scenario).collect();
        for s in &checkpoint.seconds {
            let target = &self.targets[s.target];
            let row = series_row(&self.scenario, target, slots[s.slot], s.second, &s.summary);
            writeln!(self.series, "{}", row.csv_line())?;
            if let Some(packed) = &s.latency {
                let line = hlog::encode_line(&Interval {
                    tag: format!("{target}/{}", slots[s.slot]),
                    start: Duration::from_secs(s.second as u64),
                    length: Duration::from_secs(1),
                    histogram: crate::metrics::unpack(packed).map_err(std::io::Error::other)?,
                })?;
                self.seconds.write_all(&line)?;
            }
        }
        // Flushed to the kernel: what a killed process wrote is kept, only a power cut loses it.
        self.seconds.flush()?;
        self.series.flush()?;
        for ((t, n, p), cell) in &checkpoint.cells {
            let tag = format!(
                "{}/{}/{}",
                self.targets[*t], self.scenario.tenants[*n].name, self.scenario.phases[*p].name
            );
            let phase = &self.scenario.phases[*p];
            let interval = |histogram: &hdrhistogram::Histogram<u64>| Interval {
                tag: tag.clone(),
                start: phase.start,
                length: phase.length(),
                histogram: histogram.clone(),
            };
            self.latency
                .insert(tag.clone(), hlog::encode_line(&interval(&cell.latency))?);
            self.service_time.insert(
                tag.clone(),
                hlog::encode_line(&interval(&cell.service_time))?,
            );
            self.state.counts[*t][*n][*p] = cell.counts;
        }
        for (t, lag) in &checkpoint.send_lag {
            let name = &self.targets[*t];
            let line = hlog::encode_line(&Interval {
                tag: name.clone(),
                start: Duration::ZERO,
                length: self.scenario.duration,
                histogram: lag.clone(),
            })?;
            self.send_lag.insert(name.clone(), line);
        }
        self.state.totals = checkpoint.totals;
        self.state.closed_below = checkpoint.closed_below;
        self.state.dropped_by_cause = checkpoint.dropped_by_cause;
        self.state.events = events.to_vec();
        self.state.ran_for_s = ran_for.as_secs_f64();
        self.rewrite()
    }

    fn rewrite(&self) -> std::io::Result<()> {
        let comments = |what: &str| vec![format!("failmode journal: {what}, microseconds")];
        hlog::write_lines(
            &self.dir.join("latency.hlog"),
            &comments("latency from the scheduled send"),
            self.latency.values().map(Vec::as_slice),
        )?;
        hlog::write_lines(
            &self.dir.join("service_time.hlog"),
            &comments("service time from the actual send"),
            self.service_time.values().map(Vec::as_slice),
        )?;
        hlog::write_lines(
            &self.dir.join("send_lag.hlog"),
            &comments("the load generator's send lag"),
            self.send_lag.values().map(Vec::as_slice),
        )?;
        let json = serde_json::to_string(&self.state).map_err(std::io::Error::other)?;
        atomic::write_lasting(
            &self.dir.join("state.json"),
            atomic::Lasting::Kills,
            |out| out.write_all(json.as_bytes()),
        )
    }

    /// The journal's per-second histograms, read back into `measured` (whose seconds the
    /// checkpoints took out of memory), once the run is over.
    pub fn read_seconds_into(&self, measured: &mut Measured) -> Result<(), FilesError> {
        let names: Vec<&str> = self.targets.iter().map(String::as_str).collect();
        let tags = super::measured_files::Tags::of(&names, &self.scenario);
        for i in hlog::read_complete_lines(&self.dir.join("seconds.hlog"))? {
            if let Some(&(t, n)) = tags.slots.get(&i.tag) {
                measured.second_latency[t][n].insert(
                    i.start.as_secs() as usize,
                    crate::metrics::pack(&i.histogram),
                );
            }
        }
        Ok(())
    }

    /// Removes the journal, once the results folder holds everything it held.
    pub fn remove(self) -> std::io::Result<()> {
        std::fs::remove_dir_all(&self.dir)
    }
}

/// Rebuilds the results of a run that was killed before it wrote them, from its journal: a
/// partial `run.json` covering the seconds the journal holds, with the series and histograms
/// beside it. The journal is removed once they are written.
pub fn rebuild(folder: &Path) -> Result<RunResult, JournalError> {
    let dir = folder.join(JOURNAL);
    if unfinished(folder).is_none() {
        return Err(JournalError::NotARun(folder.to_owned()));
    }
    // Held until the journal is gone: two rebuilds of one folder do not race.
    let _lock = match lock(&dir, false) {
        Ok(Some(lock)) => lock,
        Ok(None) => return Err(JournalError::Running(folder.to_owned())),
        Err(source) => return Err(JournalError::Lock { path: dir, source }),
    };
    let files = |source: FilesError| JournalError::Files {
        path: dir.clone(),
        source: Box::new(source),
    };
    let started = RunResult::read(&dir).map_err(|e| files(e.into()))?;
    let scenario = read_scenario(&dir, &started).map_err(files)?;
    let mut measured =
        read_measured(&dir, &started, &scenario, Written::Appended).map_err(files)?;
    let state = read_state(&dir)?;
    let fits =
        state.counts.len() == measured.cells.len()
            && state.counts.iter().zip(&measured.cells).all(|(a, b)| {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.len() == y.len())
            });
    if !fits {
        return Err(JournalError::State {
            path: dir.join("state.json"),
            message: "its counts do not fit the run's targets, tenants and phases".into(),
        });
    }
    for (cells, counts) in measured
        .cells
        .iter_mut()
        .flatten()
        .zip(state.counts.iter().flatten())
    {
        for (cell, counts) in cells.iter_mut().zip(counts) {
            cell.counts = *counts;
        }
    }
    let ran_for = Duration::from_secs_f64(state.ran_for_s.clamp(0.0, 1e9));
    let facts: Vec<TargetFacts> = started
        .targets
        .iter()
        .enumerate()
        .map(|(t, target)| {
            let events = state.events.get(t).cloned().unwrap_or_default();
            TargetFacts::recorded(&started, target, &scenario, events)
        })
        .collect();
    let mut targets = build_targets(&scenario, &measured, &facts, ran_for);
    let mut notes = started.notes.clone();
    notes.extend(judge_figures(&mut targets, started.worker));
    notes.push(format!(
        "rebuilt by `failmode report` from the journal of a run that was killed after {:.1} s \
         of {:.1} s: the phases' figures cover it up to then, the per-second series (and its \
         plots) the first {} s, the seconds no answer could still come in; when each fault was \
         applied and removed, and the targets' fallback and store counters, were not kept; the \
         targets' events are in their `events`",
        ran_for.as_secs_f64(),
        scenario.duration.as_secs_f64(),
        state.closed_below
    ));
    let result = RunResult {
        duration_s: ran_for.as_secs_f64().min(scenario.duration.as_secs_f64()),
        partial: true,
        load: totals(&state),
        notes,
        targets,
        ..started
    }
    .with_trust_recorded();
    let out = RunFolder {
        path: folder.to_owned(),
    };
    let written = out.write(&result, &scenario, &measured);
    written
        .and_then(|()| std::fs::remove_dir_all(&dir))
        .map_err(|source| JournalError::Write {
            path: folder.to_owned(),
            source,
        })?;
    Ok(result)
}

fn read_state(dir: &Path) -> Result<State, JournalError> {
    let path = dir.join("state.json");
    let text = std::fs::read_to_string(&path).map_err(|source| JournalError::Files {
        path: dir.to_owned(),
        source: Box::new(
            ReadError::Io {
                path: path.clone(),
                source,
            }
            .into(),
        ),
    })?;
    serde_json::from_str(&text).map_err(|e| JournalError::State {
        path,
        message: e.to_string(),
    })
}

/// The load's totals as the journal last counted them (every request once, the cells' as
/// well as those outside any phase).
fn totals(state: &State) -> LoadTotals {
    let all = &state.totals;
    LoadTotals {
        scheduled: all.offered,
        sent: all.sent(),
        dropped: all.dropped,
        dropped_by_cause: state.dropped_by_cause,
        cancelled: 0,
        abandoned: 0,
        retries: all.retries,
        throttled: all.throttled,
        senders: 0,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;
    use crate::load::{DropCause, Outcome, Recorder, Sample};
    use crate::metrics::Collector;
    use crate::results::fixture;
    use crate::results::read::read_series;

    fn answered(tenant: usize, at_ms: u64, outcome: Outcome) -> Sample {
        Sample {
            target: 0,
            tenant,
            instance: 0,
            scheduled: Duration::from_millis(at_ms),
            send_lag: Duration::from_micros(80),
            latency: Duration::from_micros(900 + at_ms),
            service_time: Duration::from_micros(700),
            outcome,
            attempts: 1,
            new_connections: 1,
        }
    }

    fn append(path: &Path, text: &str) {
        let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn a_run_killed_mid_way_is_rebuilt_from_its_journal_as_partial_with_what_it_had_journaled() {
        let dir = tempfile::tempdir().unwrap();
        let (scenario, folder, started) = fixture::started_run(dir.path());
        let collector = Collector::new(scenario.measurement_shape(1));
        let mut journal = Journal::create(&folder, &started, &scenario).unwrap();
        let record = |from_ms: u64, to_ms: u64| {
            for at in (from_ms..to_ms).step_by(50) {
                let outcome = if at % 200 == 0 {
                    Outcome::Limited
                } else {
                    Outcome::Admitted
                };
                collector.record(&answered((at % 100 == 0) as usize, at, outcome));
            }
            if (from_ms..to_ms).contains(&2_650) {
                collector.record(&Sample {
                    outcome: Outcome::Dropped(DropCause::Backlog),
                    attempts: 0,
                    new_connections: 0,
                    ..answered(0, 2_650, Outcome::Admitted)
                });
            }
        };
        let events = vec![vec![Event {
            at_s: 1.5,
            kind: "instance-exited".into(),
            detail: "instance 2 exited with status 1".into(),
        }]];
        for (from_ms, to_ms) in [(0, 2_500), (2_500, 2_900)] {
            record(from_ms, to_ms);
            let ran_for = Duration::from_millis(to_ms);
            journal
                .update(&collector.checkpoint(2), &events, ran_for)
                .unwrap();
        }
        let measured = collector.snapshot();
        assert_eq!(unfinished(&folder.path), Some(Unfinished::Running));
        assert!(matches!(
            rebuild(&folder.path),
            Err(JournalError::Running(_))
        ));
        // Killed while appending: each appended file ends in a line cut short.
        drop(journal);
        append(
            &folder.path.join("journal/seconds.hlog"),
            "Tag=oracle/acme,2.000,1.0",
        );
        append(
            &folder.path.join("journal/series.csv"),
            "oracle,acme,2,fault,1",
        );
        assert_eq!(unfinished(&folder.path), Some(Unfinished::Killed));
        assert!(matches!(
            RunResult::read(&folder.path),
            Err(ReadError::Killed(_))
        ));

        let run = rebuild(&folder.path).unwrap();
        assert!(run.partial);
        assert_eq!(run.duration_s, 2.9);
        assert!(
            run.notes.last().unwrap().contains("killed after 2.9 s"),
            "{:?}",
            run.notes
        );
        let target = &run.targets[0];
        assert_eq!(target.events, events[0]);
        assert_eq!(
            target.phases.len(),
            2,
            "steady, and the fault it was killed in"
        );
        for (p, phase) in target.phases.iter().enumerate() {
            for (n, tenant) in phase.tenants.iter().enumerate() {
                assert_eq!(
                    tenant.counts, measured.cells[0][n][p].counts,
                    "{}",
                    phase.name
                );
            }
        }
        let steady = &target.phases[0].all;
        assert_eq!((steady.counts.offered, steady.counts.limited), (40, 10));
        assert!(
            steady.latency_us.is_some(),
            "the cells' histograms were journaled"
        );
        assert_eq!(
            run.load.scheduled, 59,
            "every request recorded by the last update"
        );
        assert_eq!(run.load.dropped, 1);
        assert_eq!(run.load.dropped_by_cause.backlog, 1);
        // The seconds closed before the kill, every slot; none after.
        let rows = read_series(&folder.path).unwrap();
        let acme: Vec<_> = rows.iter().filter(|r| r.tenant == "acme").collect();
        assert_eq!(acme[1].counts, measured.seconds[0][0][1].counts);
        assert!(acme[1].counts.offered > 0 && acme[1].p99_us > 0);
        assert!(
            acme[2..].iter().all(|r| r.counts.offered == 0),
            "not closed when killed"
        );
        let seconds = hlog::read(&folder.path.join("seconds.hlog")).unwrap();
        assert_eq!(
            seconds.len(),
            2 * 3,
            "seconds 0 and 1 of acme, globex and all"
        );
        assert!(!folder.path.join(JOURNAL).exists());
        let written = RunResult::read(&folder.path).unwrap();
        assert!(written.partial && written.load == run.load && written.notes == run.notes);
        assert!(matches!(
            rebuild(&folder.path),
            Err(JournalError::NotARun(_))
        ));
    }
}
