//! Driving the load engine directly: a recorder that keeps every sample, the plan of one
//! target at some instances, and the accounting every engine run must satisfy.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use failmode::load::{
    Arrival, Caller, Client, LoadPlan, LoadSummary, Outcome, Recorder, Rotation, Sample, Spread,
    TargetPlan, TenantPlan, TransportError, try_run,
};
use tokio_util::sync::CancellationToken;

/// Every sample recorded one by one, and those recorded in bulk with their count; the threads
/// that recorded them, and every sender's reports of how far it has dispatched.
#[derive(Default)]
pub(crate) struct Samples {
    one_by_one: Mutex<Vec<Sample>>,
    bulk: Mutex<Vec<(Sample, u64)>>,
    threads: Mutex<BTreeSet<String>>,
    dispatched: Mutex<Vec<(usize, usize, Duration)>>,
}

impl Samples {
    fn note_thread(&self) {
        let name = std::thread::current().name().unwrap_or("").to_owned();
        self.threads.lock().unwrap().insert(name);
    }
}

impl Recorder for Samples {
    fn record(&self, sample: &Sample) {
        self.note_thread();
        self.one_by_one.lock().unwrap().push(*sample);
    }

    fn record_repeated(&self, sample: &Sample, n: u64) {
        self.note_thread();
        self.bulk.lock().unwrap().push((*sample, n));
    }

    fn dispatched(&self, sender: usize, senders: usize, until: Duration) {
        self.dispatched
            .lock()
            .unwrap()
            .push((sender, senders, until));
    }
}

impl Samples {
    /// The samples recorded one by one.
    pub(crate) fn all(&self) -> Vec<Sample> {
        self.one_by_one.lock().unwrap().clone()
    }

    pub(crate) fn bulk(&self) -> Vec<(Sample, u64)> {
        self.bulk.lock().unwrap().clone()
    }

    /// The names of the threads that recorded samples.
    pub(crate) fn threads(&self) -> BTreeSet<String> {
        self.threads.lock().unwrap().clone()
    }

    /// `(sender, senders, until)`, as the senders said them.
    pub(crate) fn dispatched(&self) -> Vec<(usize, usize, Duration)> {
        self.dispatched.lock().unwrap().clone()
    }

    /// Every sample, one by one or in bulk, by outcome.
    pub(crate) fn outcomes(&self) -> HashMap<Outcome, usize> {
        let mut by = HashMap::new();
        for s in self.all() {
            *by.entry(s.outcome).or_insert(0) += 1;
        }
        for (s, n) in self.bulk() {
            *by.entry(s.outcome).or_insert(0) += n as usize;
        }
        by
    }
}

pub(crate) fn tenant(name: &str, rate_per_s: f64, spread: Spread) -> TenantPlan {
    TenantPlan {
        name: name.into(),
        caller: Caller::Key(name.into()),
        rate_per_s,
        arrival: Arrival::Uniform,
        spread,
        client: Client::None,
    }
}

pub(crate) fn with_client(mut t: TenantPlan, client: Client) -> TenantPlan {
    t.client = client;
    t
}

pub(crate) fn plan(
    instances: Vec<SocketAddr>,
    tenants: Vec<TenantPlan>,
    duration: Duration,
) -> LoadPlan {
    LoadPlan {
        targets: vec![TargetPlan {
            name: "t".into(),
            instances: Rotation::new(instances),
            path: "/api".into(),
            caller: failmode::identity::CallerIdentity::Header {
                header: "x-caller".into(),
            },
            connections: failmode::load::Connections::default(),
        }],
        tenants,
        duration,
        seed: 42,
        request_timeout: Duration::from_secs(2),
        max_in_flight_per_target: 1_000,
        role: failmode::load::Role::Sender(failmode::load::Share::WHOLE),
        senders: failmode::load::Senders::Auto,
    }
}

/// Runs `plan` from 50 ms from now; returns the summary, the samples and the start.
pub(crate) async fn run(
    plan: LoadPlan,
    cancel: CancellationToken,
) -> (LoadSummary, Arc<Samples>, Instant) {
    run_after(Duration::from_millis(50), plan, cancel).await
}

/// Runs `plan` from `lead` from now: what happens before the start (the warm-up) has that long.
pub(crate) async fn run_after(
    lead: Duration,
    plan: LoadPlan,
    cancel: CancellationToken,
) -> (LoadSummary, Arc<Samples>, Instant) {
    let samples = Arc::new(Samples::default());
    let start = Instant::now() + lead;
    let summary = try_run(plan, start, samples.clone(), cancel).await.unwrap();
    (summary, samples, start)
}

/// Every scheduled request is accounted for, and every one not cancelled has a sample:
/// answered, failed, dropped, throttled or abandoned.
pub(crate) fn assert_accounted(summary: &LoadSummary, samples: &Samples) {
    assert_eq!(
        summary.scheduled,
        summary.sent + summary.dropped + summary.cancelled + summary.throttled,
        "{summary:?}"
    );
    assert_eq!(
        summary.dropped,
        summary.dropped_by_cause.total(),
        "{summary:?}"
    );
    let in_bulk: u64 = samples.bulk().iter().map(|&(_, n)| n).sum();
    assert_eq!(
        samples.all().len() as u64 + in_bulk,
        summary.scheduled - summary.cancelled,
        "{summary:?}"
    );
    let attempts: u64 = samples.all().iter().map(|s| u64::from(s.attempts)).sum();
    assert_eq!(attempts, summary.sent + summary.retries, "{summary:?}");
    let abandoned = samples
        .all()
        .iter()
        .filter(|s| s.outcome == Outcome::Transport(TransportError::Abandoned))
        .count();
    assert_eq!(abandoned as u64, summary.abandoned, "{summary:?}");
}
