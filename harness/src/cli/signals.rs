//! The signals that stop a run, a fault player or a check, watched for the commands that
//! start one.

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// SIGINT, SIGTERM (a cancelled CI job) and SIGHUP (a closed terminal), listened for from
/// creation on, so one sent meanwhile is not lost.
pub(super) struct Signals {
    /// `None` when they cannot be listened for: then Ctrl-C alone.
    streams: Option<[Signal; 3]>,
}

impl Signals {
    pub(super) fn new() -> Self {
        let streams = (|| {
            Some([
                signal(SignalKind::interrupt()).ok()?,
                signal(SignalKind::terminate()).ok()?,
                signal(SignalKind::hangup()).ok()?,
            ])
        })();
        Self { streams }
    }

    /// The next signal, by what it means for the command: "interrupted", "terminated" or
    /// "hung up".
    pub(super) async fn next(&mut self) -> &'static str {
        match &mut self.streams {
            Some([int, term, hup]) => tokio::select! {
                _ = int.recv() => "interrupted",
                _ = term.recv() => "terminated",
                _ = hup.recv() => "hung up",
            },
            None => {
                let _ = tokio::signal::ctrl_c().await;
                "interrupted"
            }
        }
    }
}

/// A run stops cleanly on the first signal: load stopped, faults removed, children stopped,
/// results written. A second means "now": exit at once, without writing results.
pub(super) async fn watch_signals(interrupt: CancellationToken) {
    let mut signals = Signals::new();
    let name = signals.next().await;
    eprintln!(
        "\n{name}: stopping the load, removing faults, stopping every child, writing what was measured (again to quit at once)"
    );
    interrupt.cancel();
    let name = signals.next().await;
    // The children need no cleanup here: their watchers (`infra::guard`) kill them once this
    // process is gone.
    eprintln!(
        "{name} again: quitting at once, without writing results; every child dies with failmode \
         (an attached deployment's toxics and Docker containers may be left)"
    );
    std::process::exit(130);
}
