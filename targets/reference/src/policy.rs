//! What a route does when its store is slow or gone, and which algorithm it counts with.

use std::time::Duration;

/// The failure policies failmode compares, all switches of this one binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Policy {
    /// Short timeout, no retries, a breaker; on failure enforce limit / live instances locally.
    LocalShare,
    /// On failure admit everything.
    FailOpen,
    /// On failure refuse everything with a configurable status (500 by default, as Envoy and
    /// Kong answer; 503 with Retry-After for a route that fails closed on purpose).
    FailClosed,
    /// Seed 002: 50 ms timeout, one retry, then deny with 429.
    RetryThenDeny,
    /// Keep enforcing the over-limit decisions already held; everyone else gets the local share.
    FailStatic,
    /// Local share without a breaker: every request pays the timeout while the store is slow.
    TimeoutOnly,
    /// No store at all: each instance enforces the whole limit on its own.
    LocalOnly,
    /// No limit: the route answers 200 without deciding anything (a baseline for benchmarks).
    None,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Self::LocalShare => "local-share",
            Self::FailOpen => "fail-open",
            Self::FailClosed => "fail-closed",
            Self::RetryThenDeny => "retry-then-deny",
            Self::FailStatic => "fail-static",
            Self::TimeoutOnly => "timeout-only",
            Self::LocalOnly => "local-only",
            Self::None => "none",
        }
    }

    /// Whether the route asks Redis at all.
    pub fn uses_store(self) -> bool {
        !matches!(self, Self::LocalOnly | Self::None)
    }

    /// Whether the store's absence is met with the instance's turns of the limit
    /// (`crate::share`).
    pub fn takes_turns(self) -> bool {
        matches!(
            self,
            Self::LocalShare | Self::FailStatic | Self::TimeoutOnly
        )
    }

    pub fn default_store_timeout(self) -> Duration {
        match self {
            Self::RetryThenDeny => Duration::from_millis(50),
            _ => Duration::from_millis(20),
        }
    }

    pub fn default_store_retries(self) -> u32 {
        match self {
            Self::RetryThenDeny => 1,
            _ => 0,
        }
    }

    /// The breaker is what separates local share from timeout-only, and seed 002's
    /// retry-then-deny had none.
    pub fn default_breaker(self) -> bool {
        !matches!(self, Self::TimeoutOnly | Self::RetryThenDeny)
    }
}

/// How a route counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Algorithm {
    SlidingWindow,
    TokenBucket,
}

/// One route's complete, validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// The policy name in `RateLimit-Policy` and in metrics.
    pub name: String,
    pub path: String,
    pub policy: Policy,
    pub algorithm: Algorithm,
    pub limit: u32,
    pub window: Duration,
    pub store_timeout: Duration,
    /// Extra attempts after a failed store call (each with its own timeout).
    pub store_retries: u32,
    pub breaker: bool,
    /// The status a fail-closed route answers while the store is unavailable.
    pub fail_status: u16,
}

impl Route {
    /// A route with the policy's defaults.
    pub fn new(path: &str, policy: Policy, limit: u32, window: Duration) -> Self {
        Self {
            name: path.trim_start_matches('/').replace('/', "-"),
            path: path.to_owned(),
            policy,
            algorithm: Algorithm::SlidingWindow,
            limit,
            window,
            store_timeout: policy.default_store_timeout(),
            store_retries: policy.default_store_retries(),
            breaker: policy.default_breaker(),
            fail_status: 500,
        }
    }
}
