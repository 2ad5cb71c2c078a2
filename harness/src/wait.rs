//! Waits that a cancellation cuts short: the timeline's boundaries, a fault's pauses. A leaf,
//! so the fault player in `run/` and the Redis faults in `infra/` both import it downward.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// Sleeps until `at`; true if cancelled first.
pub(crate) async fn sleep_until(at: Instant, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => true,
        _ = tokio::time::sleep_until(at.into()) => false,
    }
}

/// `work`, unless `stop` fires first.
pub(crate) async fn until_stopped<T>(
    work: impl std::future::Future<Output = T>,
    stop: &CancellationToken,
) -> Option<T> {
    tokio::select! {
        done = work => Some(done),
        () = stop.cancelled() => None,
    }
}
