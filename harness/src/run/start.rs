//! When the load starts: shortly after the world is ready, or, for one of several workers, at
//! the start time they share (`--start-at`), refused if it has passed.

use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use super::RunError;
use super::progress::Say;
use crate::load::Role;
use crate::results::Worker;

/// `--start-at`: an RFC 3339 time (`2026-11-30T20:00:00Z`, fractions allowed) or seconds
/// since the Unix epoch (`1796068800`, as `date +%s` gives).
pub fn parse_start_at(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds)
            .map(|d| SystemTime::UNIX_EPOCH + d)
            .map_err(|_| format!("{text:?} is not a time: seconds since the epoch must be ≥ 0"));
    }
    humantime::parse_rfc3339_weak(text).map_err(|e| {
        format!(
            "{text:?} is not a time ({e}): give an RFC 3339 time such as 2026-11-30T20:00:00Z, \
             or seconds since the epoch"
        )
    })
}

/// How long until a worker's start time; or, passed, how long ago.
pub(super) fn until_start(w: &Worker) -> Result<Duration, Duration> {
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(w.start_at_ms);
    at.duration_since(SystemTime::now())
        .map_err(|e| e.duration())
}

pub(super) fn start_passed(w: &Worker, late: Duration) -> RunError {
    RunError::StartPassed {
        at: start_shown(w),
        late,
    }
}

pub(super) fn start_shown(w: &Worker) -> String {
    humantime::format_rfc3339_millis(SystemTime::UNIX_EPOCH + Duration::from_millis(w.start_at_ms))
        .to_string()
}

/// The instant the load starts: a moment from now, or a worker's shared start, waited for
/// here unless interrupted. The caller stops the world it started on an error.
pub(super) async fn instant(
    worker: Option<&Worker>,
    interrupt: &CancellationToken,
    logs: &std::path::Path,
    say: &Say,
) -> Result<Instant, RunError> {
    let Some(w) = worker else {
        return Ok(Instant::now() + Duration::from_millis(100));
    };
    let wait = until_start(w).map_err(|late| start_passed(w, late))?;
    let shown = start_shown(w);
    say.line(&format!(
        "{}: starting with the others at {shown}, in {:.1} s",
        match w.role {
            Role::FaultPlayer => "faults only".to_owned(),
            Role::Sender(share) => format!("worker {share}"),
        },
        wait.as_secs_f64()
    ));
    let start = Instant::now() + wait;
    let interrupted = tokio::select! {
        _ = interrupt.cancelled() => true,
        () = tokio::time::sleep_until((start - Duration::from_millis(50).min(wait)).into()) => false,
    };
    if interrupted {
        return Err(RunError::InterruptedBeforeLoad(logs.to_owned()));
    }
    Ok(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_time_is_rfc_3339_or_seconds_since_the_epoch_and_nonsense_is_named() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_068_800);
        assert_eq!(parse_start_at("2026-11-30T20:00:00Z"), Ok(at));
        assert_eq!(parse_start_at("1796068800"), Ok(at));
        assert_eq!(
            parse_start_at("2026-11-30T20:00:00.250Z"),
            Ok(at + Duration::from_millis(250))
        );
        let e = parse_start_at("tomorrow").unwrap_err();
        assert!(
            e.contains("\"tomorrow\"") && e.contains(":00Z, or seconds"),
            "{e}"
        );
        assert!(parse_start_at("-5").is_err());
    }
}
