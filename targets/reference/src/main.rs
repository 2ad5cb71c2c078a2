//! The `failmode-reference` binary: parse, serve, stop cleanly on SIGINT or SIGTERM.

use std::process::ExitCode;

use failmode_reference::Server;
use failmode_reference::config::{Config, ParseOutcome};

/// glibc's malloc keeps much of what a peak of requests in flight allocated (each holds a
/// connection and its buffers) long after they are freed; mimalloc gives freed memory back to
/// the system within moments, so memory after a fault's peak is about what the process needs,
/// not the most it ever needed (`just soak`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// sysexits' EX_USAGE: a bad setting.
const EXIT_USAGE: u8 = 64;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FAILMODE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal: a log file or collector gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = match Config::parse_from(std::env::args_os()) {
        Ok(config) => config,
        Err(ParseOutcome::Display(e)) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(ParseOutcome::Invalid(message)) => {
            eprintln!("{}", message.trim_end());
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
        let server = match Server::start(config).await {
            Ok(server) => server,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        wait_for_signal().await;
        tracing::info!("shutting down");
        match server.shutdown().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    })
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
