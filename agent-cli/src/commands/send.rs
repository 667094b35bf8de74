//! `agent send ID MESSAGE`: add a follow-up message to a session whose last
//! turn ended and run the next turn with the whole history, printing its
//! RunResult as `agent run` does. Flags given here (another model, tools,
//! budgets) are recorded with the message and hold from this turn on. To a
//! session that runs, the message goes as its `--on-message` policy says and
//! the command returns at once.

use agent::state::SessionState;
use agent_runtime::control::{is_running, message_running};
use agent_runtime::{AgentSpec, SessionConfig};
use serde_json::json;

use crate::cli::SendArgs;
use crate::commands::resume::recorded_config;
use crate::error::{CliError, inconsistent};
use crate::output::{print, print_json};
use crate::run_setup::{Drive, current_dir, drive_session};
use crate::store;

/// Runs the next turn; returns the exit code of its RunResult.
pub async fn send(args: SendArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.flags.store.store, &args.session_id).await?;
    let events = store.load(&args.session_id).await?;
    let mut state = SessionState::from_events(&args.session_id, &events).map_err(inconsistent)?;
    if is_running(&state) {
        if let Some(code) = to_running(&args, store.as_ref()).await? {
            return Ok(code);
        }
        // Its turn ended meanwhile: the message opens the next one.
        let events = store.load(&args.session_id).await?;
        state = SessionState::from_events(&args.session_id, &events).map_err(inconsistent)?;
    }
    let recorded = recorded_config(&args.session_id, &events, &state)?;
    let options = &args.flags.spec;
    let cwd = current_dir()?;
    let mut config = match &args.flags.agent {
        // The next turns run the named agent, the flags on top.
        Some(_) => crate::run_setup::new_session_config(&args.flags, &cwd)?,
        None => SessionConfig::resolve(options, Some(&recorded), &cwd)?,
    };
    crate::confinement::note(&mut config, args.flags.json);
    let changed = (*options != AgentSpec::default()).then(|| config.to_value());
    let drive = Drive::Send {
        session_id: &args.session_id,
        message: &args.message,
        config: changed,
    };
    drive_session(&config, &store, &args.flags, drive).await
}

/// Adds the message to a running session as its policy says; prints what was
/// done and returns its exit code at once (the process driving the session
/// answers it), or `None` when the session stopped running before the message
/// was recorded.
async fn to_running(
    args: &SendArgs,
    store: &dyn agent::store::Store,
) -> Result<Option<u8>, CliError> {
    if args.flags.spec != AgentSpec::default() {
        return Err(CliError::Usage(format!(
            "session `{}` is running; a message to it takes no run flags (only --store and --json)",
            args.session_id
        )));
    }
    let Some(interrupt) = message_running(store, &args.session_id, &args.message).await? else {
        return Ok(None);
    };
    if args.flags.json {
        print_json(&json!({
            "session_id": args.session_id,
            "status": "running",
            "message": if interrupt { "interrupting" } else { "queued" },
        }))?;
    } else {
        print(&format!(
            "session {} is running; the message {}",
            args.session_id,
            if interrupt {
                "interrupts its model call in flight and is answered next"
            } else {
                "is seen at its next model call"
            }
        ))?;
    }
    Ok(Some(0))
}
