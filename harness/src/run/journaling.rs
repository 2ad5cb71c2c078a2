//! The run's journal kept up to date while the load runs (see [`crate::results::journal`]):
//! every second the collector hands out what changed, and the journal writes it on a blocking
//! thread, off the runtime that plays the faults. A journal that cannot be written is said
//! once and no longer written; the seconds it took are read back from it at the end and those
//! it could not take stay in memory, so the results folder loses nothing.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::progress::Say;
use crate::metrics::{Checkpoint, CheckpointedSecond, Collector, Measured};
use crate::results::folder::RunFolder;
use crate::results::journal::Journal;
use crate::results::{Event, RunResult};
use crate::scenario::Scenario;

/// How often the journal is brought up to date: what a killed run can lose at most.
const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(super) struct Journaling {
    /// Shared with the blocking thread that writes it: a writer that panics leaves it here.
    journal: Option<Arc<Mutex<Journal>>>,
    /// False once a write failed: its files stay as they were (read back at the end) and the
    /// checkpoints' seconds go to `kept`.
    writing: bool,
    /// Seconds handed out while the journal could not take them.
    kept: Vec<CheckpointedSecond>,
}

impl Journaling {
    /// Starts the journal of `run` (as it starts) in `folder`.
    pub(super) fn start(
        folder: &RunFolder,
        run: &RunResult,
        scenario: &Scenario,
        say: &Say,
    ) -> Self {
        let journal = Journal::create(folder, run, scenario)
            .map_err(|e| {
                say.line(&format!(
                    "warning: no journal in {} ({e}): if this run is killed, what it measured \
                     is lost",
                    folder.path.display()
                ));
            })
            .ok();
        Self {
            writing: journal.is_some(),
            journal: journal.map(|j| Arc::new(Mutex::new(j))),
            kept: Vec::new(),
        }
    }

    /// Brings the journal up to date every second from `start` until `done`.
    pub(super) async fn keep(
        &mut self,
        collector: &Collector,
        events: &Mutex<Vec<Vec<Event>>>,
        start: Instant,
        done: &CancellationToken,
        say: &Say,
    ) {
        let mut ticks = tokio::time::interval(EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = done.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let ran_for = start.elapsed();
            self.update(collector.checkpoint_at(ran_for), events, ran_for, say)
                .await;
        }
    }

    async fn update(
        &mut self,
        checkpoint: Checkpoint,
        events: &Mutex<Vec<Vec<Event>>>,
        ran_for: Duration,
        say: &Say,
    ) {
        let journal = match &self.journal {
            Some(journal) if self.writing => Arc::clone(journal),
            _ => {
                self.kept.extend(checkpoint.seconds);
                return;
            }
        };
        let events = events.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // Kept until the journal has them: a failed write (or a writer's panic) loses nothing.
        let seconds = checkpoint.seconds.clone();
        let written = tokio::task::spawn_blocking(move || {
            journal
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .update(&checkpoint, &events, ran_for)
        })
        .await;
        let failure = match written {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => format!("its writer failed: {e}"),
        };
        say.line(&format!(
            "warning: the journal can no longer be written ({failure}): if this run is killed, \
             what it measured from now on is lost"
        ));
        self.writing = false;
        self.kept.extend(seconds);
    }

    /// Once the load is over: everything measured, the seconds the journal took read back
    /// from it. The journal stays until [`Journaling::remove`].
    pub(super) async fn finish(
        &mut self,
        collector: &Collector,
        events: &Mutex<Vec<Vec<Event>>>,
        ran_for: Duration,
        say: &Say,
    ) -> Measured {
        self.update(collector.checkpoint(usize::MAX), events, ran_for, say)
            .await;
        let mut measured = collector.snapshot();
        let read_back = self.journal.as_ref().map(|journal| {
            let journal = journal.lock().unwrap_or_else(PoisonError::into_inner);
            journal.read_seconds_into(&mut measured)
        });
        if let Some(Err(e)) = read_back {
            say.line(&format!(
                "warning: the per-second histograms cannot be read back from the journal ({e}): \
                 the results' seconds.hlog lacks them; the journal's own is kept in \
                 journal/seconds.hlog"
            ));
            self.journal = None;
        }
        for s in std::mem::take(&mut self.kept) {
            if let Some(latency) = s.latency {
                measured.second_latency[s.target][s.slot].insert(s.second, latency);
            }
        }
        measured
    }

    /// Removes the journal, once the results folder is written.
    pub(super) fn remove(self, say: &Say) {
        let Some(journal) = self.journal else { return };
        let journal = Arc::try_unwrap(journal)
            .map(|j| j.into_inner().unwrap_or_else(PoisonError::into_inner));
        if let Ok(journal) = journal
            && let Err(e) = journal.remove()
        {
            say.line(&format!("warning: the journal could not be removed: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{Outcome, Recorder, Sample};
    use crate::results::fixture;

    #[tokio::test]
    async fn a_journal_that_can_no_longer_be_written_loses_no_second() {
        let dir = tempfile::tempdir().unwrap();
        let (scenario, folder, started) = fixture::started_run(dir.path());
        let (say, events) = (Say::new(), Mutex::new(vec![Vec::new()]));
        let collector = Collector::new(scenario.measurement_shape(1));
        let mut journaling = Journaling::start(&folder, &started, &scenario, &say);
        for at_ms in (0..4_000).step_by(100) {
            collector.record(&Sample {
                target: 0,
                tenant: 0,
                instance: 0,
                scheduled: Duration::from_millis(at_ms),
                send_lag: Duration::ZERO,
                latency: Duration::from_millis(1),
                service_time: Duration::from_millis(1),
                outcome: Outcome::Admitted,
                attempts: 1,
                new_connections: 1,
            });
        }
        let second = Duration::from_secs(1);
        journaling
            .update(collector.checkpoint(2), &events, 2 * second, &say)
            .await;
        // From now on the journal's state cannot be replaced: a directory stands in its way.
        let state = folder.path.join("journal/state.json");
        std::fs::remove_file(&state).unwrap();
        std::fs::create_dir_all(state.join("in-the-way")).unwrap();
        journaling
            .update(collector.checkpoint(3), &events, 3 * second, &say)
            .await;
        assert!(!journaling.writing);

        let measured = journaling
            .finish(&collector, &events, 4 * second, &say)
            .await;
        // Seconds 0 and 1 from the journal, 2 and 3 kept in memory: none lost.
        let seconds: Vec<usize> = measured.second_latency[0][0].keys().copied().collect();
        assert_eq!(seconds, [0, 1, 2, 3]);
    }
}
