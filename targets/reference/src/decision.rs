//! What one request is answered: admitted or limited (and by what), or refused because the
//! store is unavailable; and where the decision came from, for the `Failmode-Source` header
//! and the metrics.

use std::time::Duration;

/// Where a decision came from; the `Failmode-Source` header and a metrics label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Store,
    Local,
    FailOpen,
    FailClosed,
    DenyOnError,
    Static,
    Unlimited,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Self::Store => "store",
            Self::Local => "local",
            Self::FailOpen => "fail_open",
            Self::FailClosed => "fail_closed",
            Self::DenyOnError => "deny_on_error",
            Self::Static => "static",
            Self::Unlimited => "unlimited",
        }
    }
}

/// The answer for one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    Admitted {
        source: Source,
        /// What remains in the caller's quota, when the deciding counter knows it.
        remaining: Option<u64>,
        /// Until more than `remaining` is admissible: the RateLimit field's `t`.
        more_in: Duration,
    },
    Limited {
        source: Source,
        retry_after: Duration,
    },
    /// The store is unavailable and the route fails closed.
    Unavailable {
        status: u16,
        retry_after: Option<Duration>,
    },
}

impl Decision {
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Admitted { .. } => "admitted",
            Self::Limited { .. } => "limited",
            Self::Unavailable { .. } => "unavailable",
        }
    }

    pub fn source(&self) -> Source {
        match *self {
            Self::Admitted { source, .. } | Self::Limited { source, .. } => source,
            Self::Unavailable { .. } => Source::FailClosed,
        }
    }
}
