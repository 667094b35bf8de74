//! `agent run`: start a durable session for a task and drive it to its end.

use agent_runtime::Session;

use crate::cli::RunArgs;
use crate::console::report;
use crate::error::CliError;
use crate::interrupt::{StopSignals, report_stop};
use crate::run_setup::{current_dir, sinks};
use crate::store;

/// Runs the task; returns the exit code of its RunResult.
pub async fn run(args: RunArgs) -> Result<u8, CliError> {
    let mut config = crate::run_setup::new_session_config(&args.flags, &current_dir()?)?;
    crate::confinement::note(&mut config, args.flags.json);
    let store = store::open(&args.flags.store.store).await?;
    let mut stops = StopSignals::listen()?;
    let (options, progress) = sinks(&args.flags);
    let session = Session::open(&config, store.clone(), options).await?;
    let session_id = agent::id::new_session_id();
    let outcome = tokio::select! {
        outcome = session.engine.run_as(&session_id, args.task, config.to_value()) => Ok(outcome),
        stop = stops.next() => Err(stop),
    };
    session.shutdown().await;
    if let Some(progress) = progress {
        progress.finish();
    }
    match outcome {
        Ok(outcome) => report(&outcome?, args.flags.json),
        Err(stop) => Ok(report_stop(stop, store.as_ref(), &session_id).await),
    }
}
