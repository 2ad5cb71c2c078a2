//! The `failmode-oracle` binary: parse, say what it will do, serve until SIGINT or SIGTERM.

use std::io::Write as _;
use std::process::ExitCode;

use failmode_oracle::Server;
use failmode_oracle::config::{Config, ParseOutcome};

/// sysexits' EX_USAGE: a bad setting.
const EXIT_USAGE: u8 = 64;

fn main() -> ExitCode {
    let config = match Config::parse_from(std::env::args_os()) {
        Ok(config) => config,
        Err(ParseOutcome::Display(e)) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(ParseOutcome::Invalid(message)) => {
            eprintln!("error: {}", message.trim_end());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        // Listening before the address is printed: whoever reads it may signal at once.
        let stop = stop_signal();
        let summary = describe(&config);
        let server = match Server::start(config).await {
            Ok(server) => server,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        // On stdout, flushed: with port 0 this line is how a test learns the port. The
        // harness keeps it in the instance's log.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "failmode-oracle listening on {}", server.addr());
        let _ = writeln!(out, "{summary}");
        let _ = out.flush();
        drop(out);
        stop.await;
        server.stop();
        ExitCode::SUCCESS
    })
}

/// The script and the defaults, for the log.
fn describe(config: &Config) -> String {
    let script = config.script.to_string();
    format!(
        "default: limit {}, delay {} ms; script: {}; t0 starts at the first /api request{}",
        config.defaults.limit,
        config.defaults.delay.as_millis(),
        if script.is_empty() { "(none)" } else { &script },
        config
            .warm_up_caller
            .as_ref()
            .map(|c| format!(" not from {c}"))
            .unwrap_or_default(),
    )
}

/// Resolves on SIGINT or SIGTERM; both handlers are installed when this returns.
fn stop_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            // No handler: the default action (exit) stands in for a clean stop.
            _ => std::future::pending().await,
        }
    }
}
