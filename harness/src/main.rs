//! The `failmode` command line: parse, call the library, map the outcome to an exit code by
//! the one table every command follows, `failmode::exit::CODES`. The subcommands live in
//! `failmode::cli`.

use std::process::ExitCode;

use clap::Parser;
use failmode::cli::{Cli, dispatch};

/// glibc's malloc keeps much of what a peak of requests in flight allocated (each holds a
/// connection and its buffers) long after they are freed; mimalloc gives freed memory back to
/// the system within moments, so memory after a fault's peak is about what the process needs,
/// not the most it ever needed (`just soak`). Built with `no_thp`: it does not ask for
/// transparent huge pages, whose 2 MiB steps would make the soak's RSS readings move without
/// any change in use. Unlike the reference, failmode does not turn them off for the process:
/// that setting would pass to every child, and Redis, Toxiproxy and the peers' limiters run as
/// the host has them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FAILMODE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
