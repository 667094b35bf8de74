//! `agent run`: start a durable session for a task and drive it to its end.

use agent_runtime::{Session, SessionConfig, SessionOptions};

use crate::cli::RunArgs;
use crate::console::{console, report};
use crate::error::CliError;
use crate::store;

/// Runs the task; returns the exit code of its RunResult.
pub async fn run(args: RunArgs) -> Result<u8, CliError> {
    let config = SessionConfig::resolve(&args.flags.options(), None, &current_dir()?)?;
    let store = store::open(&args.flags.store.store).await?;
    let session = Session::open(&config, store, sinks(args.flags.json)).await?;
    let outcome = session.engine.run(args.task, config.to_value()).await;
    session.shutdown().await;
    report(&outcome?, args.flags.json)
}

/// The current directory, which relative flags are relative to.
pub fn current_dir() -> Result<std::path::PathBuf, CliError> {
    std::env::current_dir()
        .map_err(|err| CliError::Usage(format!("cannot read the current directory: {err}")))
}

/// The session options of a run printed for a person (or not, with `--json`).
pub fn sinks(json: bool) -> SessionOptions {
    SessionOptions {
        sinks: console(json).into_iter().collect(),
        ..SessionOptions::default()
    }
}
