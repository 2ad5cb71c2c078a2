//! A request sent, until its sample is recorded: answered, failed, or abandoned when the
//! run stops before its answer comes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{LoadSummary, Outcome, Recorder, Sample, TransportError};

/// Counted by the requests' tasks as they record their samples, read once every sender thread's
/// runtime (and with it every task) is gone.
#[derive(Debug, Default)]
pub(super) struct Settled {
    /// Attempts after the first, of every request recorded.
    retries: AtomicU64,
    abandoned: AtomicU64,
}

impl Settled {
    pub(super) fn complete(&self, mut summary: LoadSummary) -> LoadSummary {
        summary.retries = self.retries.load(Ordering::Relaxed);
        summary.abandoned = self.abandoned.load(Ordering::Relaxed);
        summary
    }
}

/// One request sent, until its sample is recorded. Owned by the request's task: dropped
/// unrecorded (the run stopped and its sender's runtime dropped the task while it still
/// waited), it records the request as `Transport(Abandoned)`, its latency running from the
/// scheduled send to that moment and its attempts as sent.
pub(super) struct InFlight {
    recorder: Arc<dyn Recorder>,
    settled: Arc<Settled>,
    target: usize,
    tenant: usize,
    instance: usize,
    /// Since the run's start.
    scheduled: Duration,
    scheduled_at: Instant,
    /// The first attempt's actual send, once the task has run.
    sent_at: Option<Instant>,
    sent: Sent,
    recorded: bool,
}

/// What a request's attempts have sent so far.
#[derive(Debug, Default)]
pub(super) struct Sent {
    /// Attempts sent, the one awaiting its answer included.
    pub(super) attempts: u32,
    /// Connections they opened.
    pub(super) new_connections: u32,
}

impl InFlight {
    /// A request of `target` × `tenant` to `instance`, due at `scheduled` after the run's
    /// `start`.
    pub(super) fn new(
        recorder: Arc<dyn Recorder>,
        settled: Arc<Settled>,
        (target, tenant, instance): (usize, usize, usize),
        scheduled: Duration,
        start: Instant,
    ) -> Self {
        Self {
            recorder,
            settled,
            target,
            tenant,
            instance,
            scheduled,
            scheduled_at: start + scheduled,
            sent_at: None,
            sent: Sent::default(),
            recorded: false,
        }
    }

    /// Its first attempt leaves now. Returns what its attempts are counted in as they leave,
    /// so that an abandoned request knows how many it sent.
    pub(super) fn sending(&mut self) -> &mut Sent {
        self.sent_at = Some(Instant::now());
        self.recorder.sending(self.target);
        &mut self.sent
    }

    /// Records its sample: its last attempt's `outcome`, answered (or failed) at `done_at`.
    pub(super) fn answered(mut self, outcome: Outcome, done_at: Instant) {
        self.record(outcome, done_at);
    }

    fn record(&mut self, outcome: Outcome, done_at: Instant) {
        self.recorded = true;
        // A task dropped before its first poll (which the grace makes all but impossible) was
        // counted as sent when it was dispatched: it is recorded as one attempt, sent as late
        // as it could have been.
        let sent_at = self.sent_at.unwrap_or_else(|| {
            // Counted as sent now, so that the live in-flight count stays balanced.
            self.recorder.sending(self.target);
            done_at
        });
        let attempts = self.sent.attempts.max(1);
        self.settled
            .retries
            .fetch_add(u64::from(attempts - 1), Ordering::Relaxed);
        self.recorder.record(&Sample {
            target: self.target,
            tenant: self.tenant,
            instance: self.instance,
            scheduled: self.scheduled,
            send_lag: sent_at.saturating_duration_since(self.scheduled_at),
            latency: done_at.saturating_duration_since(self.scheduled_at),
            service_time: done_at.saturating_duration_since(sent_at),
            outcome,
            attempts,
            new_connections: self.sent.new_connections,
        });
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.recorded {
            self.settled.abandoned.fetch_add(1, Ordering::Relaxed);
            self.record(
                Outcome::Transport(TransportError::Abandoned),
                Instant::now(),
            );
        }
    }
}
