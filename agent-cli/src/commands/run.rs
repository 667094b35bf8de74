//! `agent run`: start a durable session for a task and drive it to its end.

use std::sync::Arc;

use agent::{DeltaSink, EventSink, IgnoreDeltas};
use agent_runtime::{Session, SessionOptions};

use crate::cli::{RunArgs, RunFlags};
use crate::console::{console, report};
use crate::error::CliError;
use crate::interrupt::{StopSignals, report_stop};
use crate::progress::Progress;
use crate::screen::{Screen, streams_by_default};
use crate::store;

/// How long a run in a terminal waits for a store that cannot take a commit
/// (a restarting server, a full disk) before it stops and says so; workers
/// wait longer.
const TERMINAL_STORE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs the task; returns the exit code of its RunResult.
pub async fn run(args: RunArgs) -> Result<u8, CliError> {
    let mut config = crate::commands::agents::new_session_config(&args.flags, &current_dir()?)?;
    crate::confinement::note(&mut config, args.flags.json);
    let store = store::open(&args.flags.store.store).await?;
    let mut stops = StopSignals::listen()?;
    let (options, progress) = sinks(&args.flags);
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
/// and its status line (on a terminal, unless `--quiet`). The run streams —
/// its text printed as it is written — with `--stream`, or by default when
/// stdout is a terminal, unless `--no-stream`; with `--json` a streaming run
/// still prints only its RunResult.
pub fn sinks(flags: &RunFlags) -> (SessionOptions, Option<Arc<Progress>>) {
    let progress = Progress::start(flags.json, flags.quiet);
    let streams = !flags.no_stream && (flags.stream || streams_by_default(flags.json));
    let mut sinks: Vec<Arc<dyn EventSink>> = Vec::new();
    let deltas = if flags.json {
        streams.then(|| Arc::new(IgnoreDeltas) as Arc<dyn DeltaSink>)
    } else {
        let screen = Arc::new(Screen::new(progress.clone()));
        sinks.push(console(Arc::clone(&screen)));
        streams.then_some(screen as Arc<dyn DeltaSink>)
    };
    if let Some(progress) = &progress {
        sinks.push(Arc::clone(progress) as Arc<dyn EventSink>);
    }
    let options = SessionOptions {
        sinks,
        deltas,
        store_patience: Some(TERMINAL_STORE_PATIENCE),
        ..SessionOptions::default()
    };
    (options, progress)
}
