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
        wait_for_signal().await;
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

async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
