//! The `failmode` command line. The harness itself (scenarios, infrastructure, load, report)
//! lands with the harness issue; until then this binary only names itself.

use clap::Parser;

/// Chaos and load-test harness for rate limiters: what does your limiter do when Redis is slow
/// or gone?
#[derive(Debug, Parser)]
#[command(name = "failmode", version)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    Cli::parse();
    Ok(())
}
