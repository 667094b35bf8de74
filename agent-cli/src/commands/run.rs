//! `agent run`: start a durable session for a task and drive it to its end.

use std::sync::Arc;

use agent::{EventSink, RunResult};

use crate::cli::RunArgs;
use crate::config::RunConfig;
use crate::console::{Console, print_outcome};
use crate::error::CliError;
use crate::output::print_json;
use crate::store;

/// Runs the task; returns the exit code of its RunResult.
pub async fn run(args: RunArgs) -> Result<u8, CliError> {
    let config = RunConfig::from_flags(&args.flags, None)?;
    let store = store::open(&args.flags.store.store)?;
    let session = config.engine(store, console(args.flags.json)).await?;
    let recorded = serde_json::to_value(&config)
        .map_err(|err| CliError::Internal(format!("cannot record the configuration: {err}")))?;
    let outcome = session.engine.run(args.task, recorded).await;
    session.shutdown().await;
    report(&outcome?, args.flags.json)
}

/// The console sink, unless output is JSON.
pub fn console(json: bool) -> Option<Arc<dyn EventSink>> {
    (!json).then(|| Arc::new(Console) as Arc<dyn EventSink>)
}

/// Prints a RunResult (one JSON value with `--json`, a readable summary without)
/// and returns its exit code.
pub fn report(result: &RunResult, json: bool) -> Result<u8, CliError> {
    if json {
        print_json(result)?;
    } else {
        print_outcome(result)
            .map_err(|err| CliError::Internal(format!("cannot write to stdout: {err}")))?;
    }
    Ok(u8::try_from(result.exit_code()).unwrap_or(1))
}
