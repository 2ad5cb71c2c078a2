//! The shared store: one call = one atomic script in Redis, bounded by a timeout, never retried
//! here (retrying is a policy's decision, made in the limiter).

mod connection;
mod scripts;
mod source;

use std::sync::Arc;
use std::time::Duration;

use crate::local::Uncounted;
use crate::policy::Algorithm;
pub(crate) use connection::BACKOFF_MAX as RECONNECT_BACKOFF_MAX;
use connection::Connection;
use scripts::{LuaScript, Reloaded, Scripts};
pub(crate) use source::Source;
pub use source::{SentinelSettings, redacted_url};

/// Why a store call gave no answer. Each is a fallback reason, never a failed request.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    #[error("store call timed out after {0:?}")]
    Timeout(Duration),
    #[error("store connection failed: {0}")]
    Connection(String),
    /// A reply that says the store as a whole cannot serve, whatever the key (see
    /// [`STORE_WIDE`]): as much a failure of the store as a timeout.
    #[error("store refused the call: {0}")]
    Refused(String),
    /// An error about this one call (a script error, a key of the wrong type): the store
    /// answered, so it says nothing about the store's health.
    #[error("store answered with an error: {0}")]
    Reply(String),
}

impl StoreError {
    /// Whether the error says the store is unavailable, which is what a circuit breaker
    /// counts: one route's script errors must not open the breaker every route shares.
    pub fn is_store_failure(&self) -> bool {
        !matches!(self, Self::Reply(_))
    }
}

/// Error codes of replies that every command would get (out of memory with `noeviction`, a
/// script running too long, a dump loading, a demoted primary, a cluster or its primary down,
/// a failed save with `stop-writes-on-bgsave-error`, too few replicas for a write, a password
/// or ACL changed under the instance).
pub const STORE_WIDE: [&str; 11] = [
    "OOM",
    "BUSY",
    "LOADING",
    "READONLY",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "MISCONF",
    "NOREPLICAS",
    "NOAUTH",
    "WRONGPASS",
    "NOPERM",
];

/// Whether `e` is a store-wide reply: its own code, or (Redis before 7 wraps an error a script
/// met in `ERR Error running script … -OOM …`) the code of the reply inside it.
fn is_store_wide(e: &redis::RedisError) -> bool {
    if e.code().is_some_and(|code| STORE_WIDE.contains(&code)) {
        return true;
    }
    let text = e.to_string();
    STORE_WIDE
        .iter()
        .any(|code| text.contains(&format!("-{code} ")))
}

/// The store's answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreVerdict {
    pub allowed: bool,
    pub remaining: u64,
    pub retry_after: Duration,
    /// Until more than `remaining` is admissible (the RateLimit field's `t`).
    pub more_in: Duration,
    /// The script was missing (`NOSCRIPT`) and was loaded again for this call.
    pub reloaded_script: bool,
}

/// A handle on the limiter's Redis.
#[derive(Debug)]
pub struct Store {
    connection: Arc<Connection>,
    scripts: Arc<Scripts>,
    key_prefix: String,
}

impl Store {
    /// Starts connecting in the background; an unreachable Redis is not an error here.
    pub(crate) fn start(source: Source, connect_timeout: Duration, key_prefix: &str) -> Self {
        let scripts = Arc::new(Scripts::new());
        Self {
            connection: Connection::start(source, connect_timeout, Arc::clone(&scripts)),
            scripts,
            key_prefix: key_prefix.to_owned(),
        }
    }

    /// Whether a connection is up right now (it may still be hung).
    pub fn is_connected(&self) -> bool {
        self.connection.is_connected()
    }

    /// How many connections to the store have been made (each after a connect and a script
    /// load succeeded): it grows when the store is reached again after a lost connection.
    pub fn connections_made(&self) -> u64 {
        self.connection.generation()
    }

    /// The caller's key: hash-tagged on the caller so that every key of one caller shares a
    /// Redis Cluster slot. A `}` in a caller would end the hash tag early and put the caller
    /// in another caller's slot, so `{` and `}` become the fullwidth `｛` and `｝`: callers are
    /// visible ASCII, so no caller's key can be another's, and every caller without braces
    /// keeps the key it always had (old and new instances count it together in a rollout).
    pub fn key(&self, caller: &str, route: &str) -> String {
        let prefix = &self.key_prefix;
        if caller.contains(['{', '}']) {
            let tag = caller.replace('{', "\u{ff5b}").replace('}', "\u{ff5d}");
            format!("{prefix}:{{{tag}}}:{route}")
        } else {
            format!("{prefix}:{{{caller}}}:{route}")
        }
    }

    /// One decision for `caller` on `route`, within `timeout`, after counting `carry`, the
    /// requests this instance admitted in the current window and the one before while it
    /// decided without the store.
    pub async fn check(
        &self,
        (algorithm, caller, route): (Algorithm, &str, &str),
        (limit, window): (u32, Duration),
        carry: Uncounted,
        timeout: Duration,
    ) -> Result<StoreVerdict, StoreError> {
        let (reply, reloaded) = self
            .run(
                (algorithm, caller, route),
                (limit, window),
                (carry, false),
                timeout,
            )
            .await?;
        match reply.as_slice() {
            &[allowed, remaining, retry_ms, more_ms] => Ok(StoreVerdict {
                allowed: allowed == 1,
                remaining: remaining.max(0) as u64,
                retry_after: Duration::from_millis(retry_ms.max(0) as u64),
                more_in: Duration::from_millis(more_ms.max(0) as u64),
                reloaded_script: reloaded == Reloaded::Yes,
            }),
            other => Err(StoreError::Reply(format!(
                "the script returned {other:?}, expected 4 integers"
            ))),
        }
    }

    /// Counts `carry`, the requests of `caller` on `route` that this instance admitted in the
    /// current window and the one before without the store, deciding nothing.
    pub async fn count(
        &self,
        (algorithm, caller, route): (Algorithm, &str, &str),
        (limit, window): (u32, Duration),
        carry: Uncounted,
        timeout: Duration,
    ) -> Result<(), StoreError> {
        self.run(
            (algorithm, caller, route),
            (limit, window),
            (carry, true),
            timeout,
        )
        .await
        .map(drop)
    }

    async fn run(
        &self,
        (algorithm, caller, route): (Algorithm, &str, &str),
        (limit, window): (u32, Duration),
        (carry, count_only): (Uncounted, bool),
        timeout: Duration,
    ) -> Result<(Vec<i64>, Reloaded), StoreError> {
        let script = match algorithm {
            Algorithm::SlidingWindow => &self.scripts.sliding_window,
            Algorithm::TokenBucket => &self.scripts.token_bucket,
        };
        let args = [
            limit.to_string(),
            window.as_millis().max(1).to_string(),
            carry.now.to_string(),
            u8::from(count_only).to_string(),
            carry.before.to_string(),
        ];
        self.call(script, &self.key(caller, route), &args, timeout)
            .await
    }

    /// Records this instance as alive and returns how many instances are, and this one's rank
    /// among them.
    pub async fn heartbeat(
        &self,
        instance_id: &str,
        stale_after: Duration,
        timeout: Duration,
    ) -> Result<(u32, u32), StoreError> {
        let key = format!("{}:instances", self.key_prefix);
        let args = [instance_id.to_owned(), stale_after.as_millis().to_string()];
        let (reply, _) = self
            .call(&self.scripts.heartbeat, &key, &args, timeout)
            .await?;
        let int = |n: i64| n.clamp(0, i64::from(u32::MAX)) as u32;
        match reply[..] {
            [n, rank, ..] => Ok((int(n), int(rank))),
            _ => Err(StoreError::Reply(format!(
                "the heartbeat returned {reply:?}, expected 2 integers"
            ))),
        }
    }

    /// The window from which the fleet decides `route` by the store again after an outage:
    /// `proposed`, which starts in `until`, if this instance asks first; else what the first
    /// proposed (the key expires when that window starts, ready for the next outage).
    pub async fn rejoin_window(
        &self,
        route: &str,
        (proposed, until): (u64, Duration),
        timeout: Duration,
    ) -> Result<u64, StoreError> {
        let key = format!("{}:rejoin:{route}", self.key_prefix);
        let args = [proposed.to_string(), until.as_millis().max(1).to_string()];
        let (reply, _) = self
            .call(&self.scripts.rejoin, &key, &args, timeout)
            .await?;
        match reply[..] {
            [agreed] => Ok(agreed.max(0) as u64),
            _ => Err(StoreError::Reply(format!(
                "the rejoin script returned {reply:?}, expected 1 integer"
            ))),
        }
    }

    /// Removes this instance from the live set (on a clean shutdown).
    pub async fn leave(&self, instance_id: &str, timeout: Duration) -> Result<(), StoreError> {
        let Some(mut lease) = self.connection.lease() else {
            return Err(StoreError::Connection("not connected".into()));
        };
        let key = format!("{}:instances", self.key_prefix);
        let mut cmd = redis::cmd("ZREM");
        cmd.arg(key).arg(instance_id);
        match tokio::time::timeout(timeout, cmd.query_async::<i64>(&mut lease.conn)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(StoreError::Connection(e.to_string())),
            Err(_) => Err(StoreError::Timeout(timeout)),
        }
    }

    async fn call(
        &self,
        script: &LuaScript,
        key: &str,
        args: &[String],
        timeout: Duration,
    ) -> Result<(Vec<i64>, Reloaded), StoreError> {
        let Some(mut lease) = self.connection.lease() else {
            return Err(StoreError::Connection("not connected".into()));
        };
        let outcome = tokio::time::timeout(
            timeout,
            scripts::eval_sha(&mut lease.conn, script, key, args),
        )
        .await;
        match outcome {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) if is_connection_error(&e) => {
                self.connection.broken(&lease);
                Err(StoreError::Connection(e.to_string()))
            }
            Ok(Err(e)) if is_store_wide(&e) => Err(StoreError::Refused(e.to_string())),
            Ok(Err(e)) => Err(StoreError::Reply(e.to_string())),
            Err(_) => Err(StoreError::Timeout(timeout)),
        }
    }
}

fn is_connection_error(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
}
