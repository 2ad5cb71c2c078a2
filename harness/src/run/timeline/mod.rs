//! The timeline: its phase boundaries, each at its scheduled instant, where the faults of the
//! phases ending there are removed, those of the phases starting there applied (by the
//! [`Player`], on every target at once), and the targets' counters read once, so one reading
//! ends a phase and starts the next.

mod inside;
mod player;
mod step;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::since;
use super::snapshot::{self, Reading};
use super::world::World;
use crate::faults::Fault;
use crate::results::{Event, PhaseFacts, Worker};
use crate::scenario::{Phase, Scenario};
use crate::wait::{sleep_until, until_stopped};
pub use player::{Outcome, Player};
pub use step::{Done, FaultError};

/// The kind of event a fault's own report is recorded as.
pub(super) const FAULT_REPORT: &str = "fault-report";

/// The timeline this process plays: a worker that does not play the faults still reads the
/// counters at every boundary.
pub(super) fn for_this_process(scenario: &Scenario, worker: Option<Worker>) -> Scenario {
    match worker {
        Some(w) if !w.drives_faults => {
            let mut quiet = scenario.clone();
            for phase in &mut quiet.phases {
                phase.faults.clear();
            }
            quiet
        }
        _ => scenario.clone(),
    }
}

/// Plays the timeline from `start` until its end or `stop`. Returns `[phase][target]` facts.
pub(super) async fn play(
    world: &World,
    scenario: &Scenario,
    start: Instant,
    stop: &CancellationToken,
    http: &reqwest::Client,
    events: &Mutex<Vec<Vec<Event>>>,
) -> Vec<Vec<PhaseFacts>> {
    let mut play = Play::new(world, scenario, start, stop, http, events).await;
    let mut boundaries: Vec<Duration> = scenario
        .phases
        .iter()
        .flat_map(|p| [p.start, p.end])
        .collect();
    boundaries.sort();
    boundaries.dedup();
    for at in boundaries {
        if sleep_until(start + at, stop).await || play.boundary(at).await.is_none() {
            break;
        }
    }
    play.finish().await
}

/// Records one target's fault outcome: its own commands counted, its reports noted as
/// events, a failure noted as `failed`. Returns when it was done, if it was.
fn settle(
    outcome: Outcome,
    failed: &str,
    commands: &mut u64,
    note: &dyn Fn(&str, String, Instant),
) -> Option<Instant> {
    match outcome {
        Ok(done) => {
            let at = done.at.unwrap_or_else(Instant::now);
            *commands += done.commands;
            for report in done.reports {
                note(FAULT_REPORT, report, at);
            }
            Some(at)
        }
        Err(e) => {
            note(failed, e.to_string(), Instant::now());
            None
        }
    }
}

/// Where the targets' events go, timed from the load's start.
#[derive(Debug, Clone, Copy)]
struct Notes<'a> {
    events: &'a Mutex<Vec<Vec<Event>>>,
    start: Instant,
}

impl Notes<'_> {
    fn note(&self, target: usize, kind: &str, detail: String, at: Instant) {
        self.events.lock().unwrap_or_else(|e| e.into_inner())[target].push(Event {
            at_s: since(self.start, at),
            kind: kind.to_owned(),
            detail,
        });
    }
}

/// The timeline being played: what each phase has met so far.
struct Play<'a> {
    world: &'a World,
    phases: &'a [Phase],
    start: Instant,
    stop: &'a CancellationToken,
    http: &'a reqwest::Client,
    notes: Notes<'a>,
    player: Player,
    facts: Vec<Vec<PhaseFacts>>,
    /// Commands the faults sent to each Redis themselves, per phase, left out of the target's.
    fault_commands: Vec<Vec<u64>>,
    /// Per phase, the counters read at its start.
    readings: Vec<Option<Reading>>,
    stop_ongoing: CancellationToken,
    /// Per phase, what runs beside the load for its whole length.
    ongoing: Vec<JoinSet<Vec<(usize, Outcome)>>>,
}

impl<'a> Play<'a> {
    async fn new(
        world: &'a World,
        scenario: &'a Scenario,
        start: Instant,
        stop: &'a CancellationToken,
        http: &'a reqwest::Client,
        events: &'a Mutex<Vec<Vec<Event>>>,
    ) -> Self {
        let player = Player::new(
            world.toxiproxy.clone(),
            world.targets.iter().map(|t| t.proxy.clone()).collect(),
        )
        .with_redis(world.targets.iter().map(|t| t.redis.clone()).collect())
        .await
        .with_redis_addrs(world.targets.iter().map(|t| t.redis_addr).collect())
        .with_fleets(world.targets.iter().map(|t| t.fleet.clone()).collect())
        .with_sentinels(
            world
                .targets
                .iter()
                .map(|t| t.replicated.as_ref().map(|r| Arc::clone(&r.sentinels)))
                .collect(),
        );
        player.start_partners(&scenario.phases);
        let (n, phases) = (world.targets.len(), scenario.phases.len());
        Self {
            world,
            phases: &scenario.phases,
            start,
            stop,
            http,
            notes: Notes { events, start },
            player,
            facts: vec![vec![PhaseFacts::default(); n]; phases],
            fault_commands: vec![vec![0u64; n]; phases],
            readings: vec![None; phases],
            stop_ongoing: stop.child_token(),
            ongoing: (0..phases).map(|_| JoinSet::new()).collect(),
        }
    }

    /// One boundary: the faults ending here removed, those starting here applied, the
    /// counters read. `None` if the run stopped meanwhile.
    async fn boundary(&mut self, at: Duration) -> Option<()> {
        // A `down` (or `scale`) in the phase ending here and in the one starting here stays
        // in place across the boundary.
        let starting: Vec<&Fault> = self
            .phases
            .iter()
            .filter(|p| p.start == at)
            .flat_map(|p| &p.faults)
            .collect();
        let staying: Vec<Fault> = self
            .phases
            .iter()
            .filter(|p| p.end == at)
            .flat_map(|p| &p.faults)
            .filter(|f| f.spans_adjacent_phases() && starting.contains(f))
            .cloned()
            .collect();
        // Instances stopped or started at this boundary take their counters with them or
        // take seconds to be ready: the counters are read before anything changes.
        let topology = self
            .phases
            .iter()
            .filter(|p| p.start == at || p.end == at)
            .any(|p| p.faults.iter().any(Fault::changes_topology));
        let mut early = if topology {
            Some(snapshot::take(self.world, self.http).await)
        } else {
            None
        };
        self.end_phases(at, &staying).await?;
        // Faults land at the boundary, and the counters are read right after: except before
        // a fault that silences Redis (stopped, paused, restarted), so they are read first.
        let silenced = self
            .phases
            .iter()
            .any(|p| p.start == at && p.faults.iter().any(Fault::silences_redis));
        if silenced && early.is_none() {
            early = Some(snapshot::take(self.world, self.http).await);
        }
        self.start_phases(at, &staying).await?;
        let reading = match early {
            Some(reading) => reading,
            None => snapshot::take(self.world, self.http).await,
        };
        self.read(at, &reading);
        Some(())
    }

    /// Ends the phases ending at `at`: what ran for their whole length, then their faults
    /// but those `staying` into the next phase.
    async fn end_phases(&mut self, at: Duration, staying: &[Fault]) -> Option<()> {
        let notes = self.notes;
        for (p, phase) in self.phases.iter().enumerate().filter(|(_, p)| p.end == at) {
            // What ran for the whole phase ends on its own at this instant.
            while let Some(joined) = self.ongoing[p].join_next().await {
                for (t, outcome) in joined.unwrap_or_default() {
                    settle(
                        outcome,
                        "fault-failed",
                        &mut self.fault_commands[p][t],
                        &|k, d, a| notes.note(t, k, d, a),
                    );
                }
            }
            // Stopping or starting instances can take seconds: an interrupt does not wait.
            let removed = until_stopped(
                self.player.remove(&phase.name, &phase.faults, staying),
                self.stop,
            )
            .await?;
            for (t, outcome) in removed.into_iter().enumerate() {
                let done_at = settle(
                    outcome,
                    "fault-not-removed",
                    &mut self.fault_commands[p][t],
                    &|k, d, a| notes.note(t, k, d, a),
                );
                if let Some(at) = done_at.filter(|_| !phase.faults.is_empty()) {
                    self.facts[p][t].faults_removed_at_s = Some(since(self.start, at));
                }
            }
        }
        Some(())
    }

    /// Starts the phases starting at `at`: their faults applied (but those still in place),
    /// and what runs for their whole length set going.
    async fn start_phases(&mut self, at: Duration, staying: &[Fault]) -> Option<()> {
        let (notes, start) = (self.notes, self.start);
        for (p, phase) in self
            .phases
            .iter()
            .enumerate()
            .filter(|(_, p)| p.start == at)
        {
            let apply =
                self.player
                    .apply(&phase.name, &phase.faults, staying, phase.end - phase.start);
            let applied = until_stopped(apply, self.stop).await?;
            for (t, outcome) in applied.into_iter().enumerate() {
                let done_at = settle(
                    outcome,
                    "fault-not-applied",
                    &mut self.fault_commands[p][t],
                    &|k, d, a| notes.note(t, k, d, a),
                );
                if let Some(at) = done_at.filter(|_| !phase.faults.is_empty()) {
                    self.facts[p][t].faults_applied_at_s = Some(since(start, at));
                    // A slow change (instances that take long to be ready) can outlast its
                    // phase: what the next phase measures is then not what it says.
                    if at > start + phase.end {
                        notes.note(
                            t,
                            "fault-late",
                            format!(
                                "{}'s faults were in place only at {:.1} s, after the phase ended \
                                 at {:.1} s",
                                phase.name,
                                since(start, at),
                                phase.end.as_secs_f64()
                            ),
                            at,
                        );
                    }
                }
            }
            for fault in phase.faults.iter().filter(|f| f.is_ongoing()) {
                let (player, cancel, fault) = (
                    self.player.clone(),
                    self.stop_ongoing.clone(),
                    fault.clone(),
                );
                let (from, until) = (start + phase.start, start + phase.end);
                self.ongoing[p]
                    .spawn(async move { player.ongoing(&fault, from, until, &cancel).await });
            }
        }
        Some(())
    }

    /// The reading at `at` ends the phases ending there and starts those starting there.
    fn read(&mut self, at: Duration, reading: &Reading) {
        for (p, phase) in self.phases.iter().enumerate() {
            if phase.end == at
                && let Some(before) = &self.readings[p]
            {
                // A Redis restarted in the phase counted from zero again: its reading at the
                // end is all the phase's (the one before was taken just before the kill).
                let restarted = phase
                    .faults
                    .iter()
                    .any(|f| matches!(f, Fault::RedisRestart { .. }));
                for (t, f) in self.facts[p].iter_mut().enumerate() {
                    f.fallbacks = snapshot::fallbacks_between(
                        before.fallbacks[t].as_deref(),
                        reading.fallbacks[t].as_deref(),
                    );
                    f.store_commands = reading.store_commands[t]
                        .zip(before.store_commands[t])
                        .map(|(a, b)| if restarted { a } else { a.saturating_sub(b) })
                        .map(|c| c.saturating_sub(self.fault_commands[p][t]));
                }
            }
            if phase.start == at {
                self.readings[p] = Some(reading.clone());
            }
        }
    }

    /// Stops what still runs beside the load, and hands the facts over.
    async fn finish(self) -> Vec<Vec<PhaseFacts>> {
        self.stop_ongoing.cancel();
        for mut set in self.ongoing {
            while set.join_next().await.is_some() {}
        }
        self.facts
    }
}
