//! `failmode-oracle`: a scripted test target whose every answer is known in advance. It is not
//! a rate limiter anyone deploys: it exists so that failmode's own verdicts (over-admission,
//! wrongful denial, 5xx and transport-error rates, tail latency per phase) can be checked
//! against a target whose behaviour is exact. It shares no code with the harness: HTTP is
//! their only contract, so the measuring tool and the thing measured cannot share a bug.
//!
//! # The clock: t0
//!
//! Script times are seconds since t0, the moment the instance decided its first `/api`
//! request from a caller other than the warm-up caller. `/healthz`, `/metrics`, requests
//! without a caller key and failmode's warm-up requests (caller `failmode-warm-up`, sent
//! before the load starts) do not start it.
//!
//! Against failmode's schedule (`harness/src/load/schedule.rs`): a uniform tenant's arrival
//! i is at `phase + i / rate` after the run's start, with `phase` drawn once per target ×
//! tenant in [0, 1 / rate); a Poisson tenant's first arrival is one exponential gap in. So
//! with one instance the oracle's t0 is the earliest first arrival over the tenants, plus
//! the send lag and the loopback trip, less `FAILMODE_ORACLE_LEAD_MS` (the manifest sets 3 ms,
//! so an arrival scheduled on a whole second is not pushed into the one before by a delivery
//! faster than the first request's): oracle time = run time − δ, where δ is below the
//! smallest 1 / rate of the uniform tenants plus about a millisecond (8.3 ms at 120 req/s,
//! 50 ms at 20 req/s). A segment `2..4` therefore covers the run's [2 + δ, 4 + δ), and the
//! oracle's fixed windows start δ after the harness's whole seconds. Tests that compare
//! counts per phase should put boundaries where δ does not matter (whole seconds against a
//! tenant fast enough, or a tolerance of one request at each boundary).

pub mod config;
pub mod decide;
pub mod http;
pub mod metrics;
pub mod script;
pub mod windows;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use config::Config;
use decide::{Decider, Oracle};
use http::App;
use metrics::Counters;

/// A listening instance.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    serving: JoinHandle<()>,
}

impl Server {
    /// Binds the configured address and starts serving.
    pub async fn start(config: Config) -> std::io::Result<Self> {
        let listener = TcpListener::bind(config.listen).await.map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", config.listen))
        })?;
        let addr = listener.local_addr()?;
        let app = Arc::new(App {
            oracle: Oracle::new(Decider::new(config.script, config.defaults), config.lead),
            counters: Counters::default(),
            key: config.key,
            caller_header: config.caller_header,
            warm_up_caller: config.warm_up_caller,
            cold: config.cold,
            warm_ups: AtomicU64::new(0),
            refuse_status: config.refuse_status,
        });
        let serving = tokio::spawn(http::serve(listener, app));
        Ok(Self { addr, serving })
    }

    /// The address it listens on (the port chosen when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting; connections in flight go with the runtime.
    pub fn stop(self) {
        self.serving.abort();
    }
}
