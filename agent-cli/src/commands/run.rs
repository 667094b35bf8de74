//! `agent run`: start a durable session for a task and drive it to its end.

use crate::cli::RunArgs;
use crate::config::RunConfig;
use crate::console::{console, report};
use crate::error::CliError;
use crate::store;

/// Runs the task; returns the exit code of its RunResult.
pub async fn run(args: RunArgs) -> Result<u8, CliError> {
    let config = RunConfig::from_flags(&args.flags, None)?;
    let store = store::open(&args.flags.store.store).await?;
    let session = config.engine(store, console(args.flags.json)).await?;
    let recorded = serde_json::to_value(&config)
        .map_err(|err| CliError::Internal(format!("cannot record the configuration: {err}")))?;
    let outcome = session.engine.run(args.task, recorded).await;
    session.shutdown().await;
    report(&outcome?, args.flags.json)
}
