//! The signals that stop a run or a fault player, watched for the commands that start one.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// SIGINT, SIGTERM (a cancelled CI job) and SIGHUP (a closed terminal) all stop the run
/// cleanly: load stopped, faults removed, children stopped, results written. A second signal
/// means "now": exit at once, without that cleanup.
pub(super) async fn watch_signals(interrupt: CancellationToken) {
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        let _ = tokio::signal::ctrl_c().await;
        interrupt.cancel();
        return;
    };
    let mut first = true;
    loop {
        let name = tokio::select! {
            _ = tokio::signal::ctrl_c() => "interrupted",
            _ = term.recv() => "terminated",
            _ = hup.recv() => "hung up",
        };
        if first {
            eprintln!(
                "\n{name}: stopping the load, removing faults, stopping every child, writing what was measured (again to quit at once)"
            );
            interrupt.cancel();
            first = false;
        } else {
            eprintln!(
                "{name} again: quitting at once; children may be left running (see the run's logs/)"
            );
            std::process::exit(130);
        }
    }
}
