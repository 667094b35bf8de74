//! `agent run`: start a durable session for a task and drive it to its end.

use std::sync::Arc;

use agent::EventSink;
use agent_runtime::{Session, SessionConfig, SessionOptions};

use crate::cli::RunArgs;
use crate::console::{console, report};
use crate::error::CliError;
use crate::interrupt::{StopSignals, report_stop};
use crate::progress::Progress;
use crate::store;

/// Runs the task; returns the exit code of its RunResult.
pub async fn run(args: RunArgs) -> Result<u8, CliError> {
    let mut config = SessionConfig::resolve(&args.flags.options(), None, &current_dir()?)?;
    crate::confinement::note(&mut config, args.flags.json);
    let store = store::open(&args.flags.store.store).await?;
    let mut stops = StopSignals::listen()?;
    let (options, progress) = sinks(args.flags.json, args.flags.quiet);
    let session = Session::open(&config, store.clone(), options).await?;
    let session_id = agent::new_session_id();
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

/// The current directory, which relative flags are relative to.
pub fn current_dir() -> Result<std::path::PathBuf, CliError> {
    std::env::current_dir()
        .map_err(|err| CliError::Usage(format!("cannot read the current directory: {err}")))
}

/// The session options of a run printed for a person (or not, with `--json`),
/// and its status line (on a terminal, unless `--quiet`).
pub fn sinks(json: bool, quiet: bool) -> (SessionOptions, Option<Arc<Progress>>) {
    let progress = Progress::start(json, quiet);
    let mut sinks: Vec<Arc<dyn EventSink>> = console(json, progress.clone()).into_iter().collect();
    if let Some(progress) = &progress {
        sinks.push(Arc::clone(progress) as Arc<dyn EventSink>);
    }
    let options = SessionOptions {
        sinks,
        ..SessionOptions::default()
    };
    (options, progress)
}
