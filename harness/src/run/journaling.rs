//! The run's journal kept up to date while the load runs (see [`crate::results::journal`]):
//! every second the collector hands out what changed, and the journal writes it on a blocking
//! thread, off the runtime that plays the faults. A journal that cannot be written is said
//! once and given up; the seconds it could not take stay in memory, so the results folder
//! loses nothing.

use std::sync::Mutex;
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
    journal: Option<Journal>,
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
            journal,
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
        let Some(mut journal) = self.journal.take() else {
            self.kept.extend(checkpoint.seconds);
            return;
        };
        let events = events.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let written = tokio::task::spawn_blocking(move || {
            let written = journal.update(&checkpoint, &events, ran_for);
            (journal, checkpoint, written)
        })
        .await;
        match written {
            Ok((journal, _, Ok(()))) => self.journal = Some(journal),
            Ok((_, checkpoint, Err(e))) => {
                say.line(&format!(
                    "warning: the journal can no longer be written ({e}): if this run is \
                     killed, what it measured from now on is lost"
                ));
                self.kept.extend(checkpoint.seconds);
            }
            Err(e) => say.line(&format!("warning: the journal's writer failed: {e}")),
        }
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
        if let Some(journal) = &self.journal
            && let Err(e) = journal.read_seconds_into(&mut measured)
        {
            say.line(&format!(
                "warning: the per-second histograms cannot be read back from the journal ({e}); \
                 it is left in the results folder"
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
        if let Some(journal) = self.journal
            && let Err(e) = journal.remove()
        {
            say.line(&format!("warning: the journal could not be removed: {e}"));
        }
    }
}
