//! The `failmode-reference` binary: parse, serve, stop cleanly on SIGINT or SIGTERM.

use std::process::ExitCode;

use failmode_reference::Server;
use failmode_reference::config::{Config, ParseOutcome};

/// glibc's malloc keeps much of what a peak of requests in flight allocated (each holds a
/// connection and its buffers) long after they are freed; mimalloc gives freed memory back to
/// the system within moments, so memory after a fault's peak is about what the process needs,
/// not the most it ever needed (`just soak`). Built without asking for transparent huge pages
/// (`no_thp`, and [`no_huge_pages`] below).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// sysexits' EX_USAGE: a bad setting.
const EXIT_USAGE: u8 = 64;

fn main() -> ExitCode {
    let huge_pages = no_huge_pages();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FAILMODE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal: a log file or collector gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Err(e) = huge_pages {
        tracing::warn!(
            error = %e,
            "could not turn transparent huge pages off; RSS may move in 2 MiB steps"
        );
    }
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

/// Turns transparent huge pages off for this process, on a host that gives them to every
/// process ("always") as on one that gives them on request. The heap is a few MiB: backed by
/// 2 MiB pages, its RSS moves in 2 MiB steps when a burst first touches a 2 MiB range, when
/// the kernel's khugepaged merges a sparsely used one into a huge page (`max_ptes_none` lets
/// it merge a range with one page in use) or a purge splits one, so a soak reads steps of
/// 2–5 MiB that are neither use nor leak. Nothing here gains from them at this size.
#[cfg(target_os = "linux")]
fn no_huge_pages() -> nix::Result<()> {
    nix::sys::prctl::set_thp_disable(true)
}

#[cfg(not(target_os = "linux"))]
fn no_huge_pages() -> Result<(), std::convert::Infallible> {
    Ok(())
}
