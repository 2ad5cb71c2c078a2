//! The one multiplexed connection to Redis, and the background task that restores it.
//!
//! Written by hand rather than with redis-rs's `ConnectionManager` because the request path
//! must never wait for a reconnect: while there is no connection a store call fails at once
//! ("connection"), and a separate task reconnects with backoff and reloads the scripts.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use tokio::sync::mpsc;

use super::scripts::Scripts;
use super::source::Source;

const BACKOFF_START: Duration = Duration::from_millis(25);
/// Short: refused connects cost nothing, and every backoff step is time the store is back but
/// unused.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_millis(250);

/// The current connection, if any, and a generation number so that an error seen on an old
/// connection cannot tear down its replacement.
#[derive(Debug, Default)]
struct Slot {
    conn: Option<MultiplexedConnection>,
    generation: u64,
}

/// A connection handed to one call, tagged with its generation.
#[derive(Debug)]
pub(crate) struct Lease {
    pub(crate) conn: MultiplexedConnection,
    generation: u64,
}

#[derive(Debug)]
pub(crate) struct Connection {
    source: Source,
    connect_timeout: Duration,
    slot: Mutex<Slot>,
    wake: mpsc::Sender<()>,
}

impl Connection {
    /// Creates the connection holder and spawns the task that keeps it connected.
    pub(crate) fn start(
        source: Source,
        connect_timeout: Duration,
        scripts: Arc<Scripts>,
    ) -> Arc<Self> {
        let (wake, woken) = mpsc::channel(1);
        let this = Arc::new(Self {
            source,
            connect_timeout,
            slot: Mutex::new(Slot::default()),
            wake,
        });
        tokio::spawn(reconnect_loop(Arc::downgrade(&this), woken, scripts));
        this
    }

    /// The live connection, or `None` while it is being restored.
    pub(crate) fn lease(&self) -> Option<Lease> {
        let slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        slot.conn.clone().map(|conn| Lease {
            conn,
            generation: slot.generation,
        })
    }

    /// Drops the connection a failed call used, if it is still the current one.
    pub(crate) fn broken(&self, lease: &Lease) {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if slot.generation == lease.generation && slot.conn.is_some() {
            slot.conn = None;
            drop(slot);
            tracing::warn!("store connection lost; reconnecting in the background");
            let _ = self.wake.try_send(());
        }
    }

    /// How many connections have been made so far: a higher number than before means the
    /// store was reached again in between.
    pub(crate) fn generation(&self) -> u64 {
        self.slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .generation
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .conn
            .is_some()
    }

    async fn connect(&self, scripts: &Scripts) -> redis::RedisResult<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.connect_timeout));
        // A sentinel that stops answering must not hold up the reconnects for longer than a
        // connect would.
        let client = tokio::time::timeout(self.connect_timeout, self.source.client())
            .await
            .map_err(|_| {
                redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "no answer from the sentinels within the connect timeout",
                ))
            })??;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        scripts.load_all(&mut conn).await?;
        Ok(conn)
    }

    fn install(&self, conn: MultiplexedConnection) {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        slot.generation += 1;
        slot.conn = Some(conn);
    }
}

async fn reconnect_loop(
    this: Weak<Connection>,
    mut woken: mpsc::Receiver<()>,
    scripts: Arc<Scripts>,
) {
    let mut backoff = BACKOFF_START;
    let mut logged_failure = false;
    loop {
        let Some(connection) = this.upgrade() else {
            return;
        };
        if connection.is_connected() {
            drop(connection);
            // Returns None once the Connection (and its sender) is gone.
            if woken.recv().await.is_none() {
                return;
            }
            continue;
        }
        let attempt =
            tokio::time::timeout(connection.connect_timeout * 2, connection.connect(&scripts))
                .await;
        let failed = !matches!(attempt, Ok(Ok(_)));
        match attempt {
            Ok(Ok(conn)) => {
                connection.install(conn);
                tracing::info!("store connected");
                backoff = BACKOFF_START;
                logged_failure = false;
            }
            Ok(Err(e)) if !logged_failure => {
                tracing::warn!(error = %e, "store unreachable; will keep trying");
                logged_failure = true;
            }
            Err(_) if !logged_failure => {
                tracing::warn!("store connect timed out; will keep trying");
                logged_failure = true;
            }
            _ => {}
        }
        drop(connection);
        if failed {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }
}
