//! `failmode scenario show NAME`: a scenario's TOML as the lookup finds it, to copy and edit.

use clap::Subcommand;

use crate::project::Project;

#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// Print a scenario's TOML (the project's, the checkout's or the built-in one) to copy and
    /// edit: `failmode scenario show redis-down > failmode/scenarios/my-outage.toml`.
    Show {
        /// A scenario name (`failmode list`) or a path to a TOML file.
        name: String,
    },
}

/// What the command prints.
pub fn render(project: &Project, command: &ScenarioCommand) -> anyhow::Result<String> {
    match command {
        ScenarioCommand::Show { name } => Ok(project.scenario_text(name)?),
    }
}
