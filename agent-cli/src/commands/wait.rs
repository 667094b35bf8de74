//! `agent wait ID`: follow a session until it ends or waits for a human, and
//! print its RunResult as `agent run` would (its events as they are committed,
//! without `--json`). On `--timeout` it exits 9 and the session keeps running.

use std::time::Duration;

use agent::state::SessionState;

use crate::cli::WaitArgs;
use agent::sink::EventSink;

use crate::console::{console, report};
use crate::error::{CliError, inconsistent};
use crate::progress::Progress;
use crate::screen::Screen;
use crate::store;

/// How often the log is read for new events.
const POLL: Duration = Duration::from_millis(100);

/// Waits for the session; returns the exit code of its RunResult.
pub async fn wait(args: WaitArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.store.store, &args.session_id).await?;
    let progress = Progress::start(args.json, args.quiet);
    let console = (!args.json).then(|| console(std::sync::Arc::new(Screen::new(progress.clone()))));
    let deadline = args
        .timeout
        .map(|secs| tokio::time::Instant::now() + Duration::from_secs_f64(secs));
    let mut state = SessionState::new(&args.session_id);
    loop {
        let events = store.load_after(&args.session_id, state.last_seq()).await?;
        for event in &events {
            state.apply(event).map_err(inconsistent)?;
            if let Some(console) = &console {
                console
                    .publish(event, state.steps_used())
                    .map_err(|err| CliError::Internal(err.to_string()))?;
            }
            if let Some(progress) = &progress {
                progress
                    .publish(event, state.steps_used())
                    .map_err(|err| CliError::Internal(err.to_string()))?;
            }
        }
        if let Some(result) = state
            .run_result()
            .or_else(|| state.awaiting_result())
            .or_else(|| state.paused_result())
        {
            if let Some(progress) = &progress {
                progress.finish();
            }
            return report(&result, args.json);
        }
        if deadline.is_some_and(|deadline| tokio::time::Instant::now() >= deadline) {
            return Err(CliError::TimedOut(format!(
                "session `{}` is still {} after {}s; it keeps running — `agent wait {}` again to follow it",
                args.session_id,
                state.public_status().as_str(),
                args.timeout.unwrap_or_default(),
                args.session_id
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}
