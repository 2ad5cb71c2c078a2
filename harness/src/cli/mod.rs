//! The `failmode` command line, one module per subcommand (its flags and what it does);
//! `main.rs` parses into [`Cli`] and hands it to [`dispatch`].

mod args;
pub mod baseline;
pub mod check;
pub mod compare;
pub mod faults;
pub mod gate;
pub mod init;
mod init_text;
pub mod list;
pub mod merge;
pub mod outcomes;
pub mod report;
pub mod run;
pub mod scenario;
pub mod setup;
mod signals;

pub use args::{Cli, Command};

use crate::project::Project;

/// Runs the command asked for and says how it ended as an exit code (`crate::exit::CODES`);
/// an `Err` is the harness or its input failing, which `main` reports and exits 2 on.
pub async fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    let project = Project::resolve(cli.project.as_deref())?;
    match cli.command {
        Command::List => {
            print!("{}", list::render(&project)?);
            Ok(0)
        }
        Command::Scenario(command) => {
            print!("{}", scenario::render(&project, &command)?);
            Ok(0)
        }
        Command::Init(args) => {
            // `--project DIR` names where to write; without it, here (not the project found).
            let dir = match cli.project {
                Some(dir) => dir,
                None => std::env::current_dir()?,
            };
            let written = init::init(&dir, &project, &args)?;
            print!("{}", init::report(&written, &dir));
            Ok(0)
        }
        Command::Check(args) => Ok(check::check(&project, &args).await?.exit_code()),
        Command::Setup(args) => Ok(u8::from(!setup::setup(&args)?)),
        Command::Run(args) => run::run(args, &project).await,
        Command::Gate(args) => gate::gate(&args),
        Command::Report(args) => report::report(&args),
        Command::Outcomes(args) => outcomes::outcomes(&args),
        Command::Baseline(command) => baseline::baseline(&command, &project.results_dir()),
        Command::Compare(args) => compare::compare(args),
        Command::Faults(command) => faults::faults(command, &project).await,
        Command::Merge(args) => merge::merge(&args, &project.results_dir()),
    }
}
