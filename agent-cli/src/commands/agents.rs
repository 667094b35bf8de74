//! `agent agents list|show NAME`: the agents the agents file declares.

use std::path::Path;

use agent_runtime::{AgentDefinition, Agents};

use crate::cli::{AgentsCommand, AgentsFileArgs};
use crate::error::CliError;
use crate::output::{print, print_json};

/// Lists or shows the declared agents.
pub fn agents(command: AgentsCommand) -> Result<u8, CliError> {
    let cwd = crate::run_setup::current_dir()?;
    match command {
        AgentsCommand::List { json, agents } => {
            let agents = find(&agents, &cwd)?;
            if json {
                let all: Vec<_> = agents.iter().map(AgentDefinition::view).collect();
                print_json(&all)?;
            } else if let Some(path) = &agents.path {
                print(&format!("agents of {}:", path.display()))?;
                for agent in agents.iter() {
                    print(&format!(
                        "  {:<20} {:<36} {}",
                        agent.name,
                        agent
                            .spec
                            .model
                            .as_deref()
                            .unwrap_or("(model given when run)"),
                        agent.description.as_deref().unwrap_or_default()
                    ))?;
                }
            } else {
                print("no agents file here: give one with --agents FILE, or write agents.toml")?;
            }
            Ok(0)
        }
        AgentsCommand::Show { name, json, agents } => {
            let agents = find(&agents, &cwd)?;
            let agent = agents.get(&name)?;
            if json {
                print_json(&agent.view())?;
            } else {
                print(&format!(
                    "agent {}\ndigest: {}\n{}",
                    agent.name,
                    agent.digest(),
                    serde_json::to_string_pretty(&agent.spec).unwrap_or_default()
                ))?;
            }
            Ok(0)
        }
    }
}

/// The agents of the file `args` names (or the default one).
fn find(args: &AgentsFileArgs, cwd: &Path) -> Result<Agents, CliError> {
    Ok(Agents::find(args.file.as_deref(), cwd)?)
}
