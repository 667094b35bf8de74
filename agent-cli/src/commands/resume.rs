//! `agent resume ID`: continue a stored session with the configuration it recorded
//! at start (flags given here override it). An ended session prints its result again.
//! A fork keeps its parent's flags except the trace file, used only when `--trace`
//! is given again. With `--detach` the session is queued for a worker instead,
//! with the flags it recorded, and the command returns at once.

use agent::event::EventKind;
use agent::state::SessionState;
use agent_runtime::control::{Requeued, queue_again};
use agent_runtime::{AgentSpec, SessionConfig};
use serde_json::json;

use crate::cli::ResumeArgs;
use crate::console::report;
use crate::error::{CliError, inconsistent};
use crate::output::{print, print_json};
use crate::run_setup::{Drive, current_dir, drive_session};
use crate::store;

/// Resumes the session; returns the exit code of its RunResult.
pub async fn resume(args: ResumeArgs) -> Result<u8, CliError> {
    if let Some(agent) = &args.flags.agent {
        return Err(CliError::Usage(format!(
            "--agent {agent}: a resume continues the session's recorded agent; start a new session with `agent run --agent {agent}`, or give the next turn to it with `agent send --agent {agent}`"
        )));
    }
    let store = store::open_for(&args.flags.store.store, &args.session_id).await?;
    let events = store.load(&args.session_id).await?;
    let state = SessionState::from_events(&args.session_id, &events).map_err(inconsistent)?;
    if let Some(result) = state.run_result() {
        return report(&result, args.flags.json);
    }
    let recorded = recorded_config(&args.session_id, &events, &state)?;
    if args.detach {
        return detach(&args, store.as_ref()).await;
    }
    let mut config = SessionConfig::resolve(&args.flags.spec, Some(&recorded), &current_dir()?)?;
    crate::confinement::note(&mut config, args.flags.json);
    let drive = Drive::Resume {
        session_id: &args.session_id,
    };
    drive_session(&config, &store, &args.flags, drive).await
}

/// The configuration a stored session runs with now: the one it recorded at
/// start, or the one its latest follow-up message recorded; a fork's has no
/// trace file. A DAG workflow is refused: its graph lives in the program that
/// built it.
pub fn recorded_config(
    session_id: &str,
    events: &[agent::event::Event],
    state: &SessionState,
) -> Result<SessionConfig, CliError> {
    let strategy = state.strategy();
    if events.is_empty() {
        return Err(CliError::Internal(format!(
            "session `{session_id}` does not start with its configuration"
        )));
    }
    if strategy.starts_with("dag:") {
        return Err(CliError::Usage(format!(
            "session `{session_id}` is a DAG workflow (`{strategy}`) whose graph lives in the program that built it; continue it there with the `Engine` and the same graph (`agent show` and `agent cancel` work here)"
        )));
    }
    let mut recorded = SessionConfig::recorded(state.config())?;
    if events
        .iter()
        .any(|event| matches!(event.kind, EventKind::Forked { .. }))
    {
        recorded.spec.trace = None;
    }
    Ok(recorded)
}

/// Queues the session for a worker, which runs it with the flags it recorded.
async fn detach(args: &ResumeArgs, store: &dyn agent::store::Store) -> Result<u8, CliError> {
    if args.flags.spec != AgentSpec::default() {
        return Err(CliError::Usage(
            "--detach continues the session on a worker with the flags it recorded; drop the other run flags (only --store and --json go with it)".into(),
        ));
    }
    match queue_again(store, &args.session_id, "resume").await? {
        Requeued::Stopped(result) => report(&result, args.flags.json),
        Requeued::Queued => {
            if args.flags.json {
                print_json(&json!({"session_id": args.session_id, "status": "queued"}))?;
            } else {
                print(&format!(
                    "session {} queued\nfollow it with: agent wait {}",
                    args.session_id, args.session_id
                ))?;
            }
            Ok(0)
        }
    }
}
