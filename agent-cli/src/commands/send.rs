//! `agent send ID MESSAGE`: add a follow-up message to a session whose last
//! turn ended and run the next turn with the whole history, printing its
//! RunResult as `agent run` does. Flags given here (another model, tools,
//! budgets) are recorded with the message and hold from this turn on.

use agent::SessionState;
use agent_runtime::{RunOptions, Session, SessionConfig};

use crate::cli::SendArgs;
use crate::commands::resume::recorded_config;
use crate::commands::run::{current_dir, sinks};
use crate::console::report;
use crate::error::{CliError, inconsistent};
use crate::interrupt::{StopSignals, report_stop};
use crate::store;

/// Runs the next turn; returns the exit code of its RunResult.
pub async fn send(args: SendArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.flags.store.store, &args.session_id).await?;
    let events = store.load(&args.session_id).await?;
    let state = SessionState::from_events(&args.session_id, &events).map_err(inconsistent)?;
    let recorded = recorded_config(&args.session_id, &events, &state)?;
    let options = args.flags.options();
    let mut config = SessionConfig::resolve(&options, Some(&recorded), &current_dir()?)?;
    crate::confinement::note(&mut config, args.flags.json);
    let changed = (options != RunOptions::default()).then(|| config.to_value());
    let mut stops = StopSignals::listen()?;
    let (session_options, progress) = sinks(args.flags.json, args.flags.quiet);
    let session = Session::open(&config, store.clone(), session_options).await?;
    let outcome = tokio::select! {
        outcome = session.engine.send(&args.session_id, &args.message, changed) => Ok(outcome),
        stop = stops.next() => Err(stop),
    };
    session.shutdown().await;
    if let Some(progress) = progress {
        progress.finish();
    }
    match outcome {
        Ok(outcome) => report(&outcome?, args.flags.json),
        Err(stop) => Ok(report_stop(stop, store.as_ref(), &args.session_id).await),
    }
}
