//! `agent approve` and `agent deny`: decide calls that wait for a human. The
//! session continues with `agent resume`.

use agent::tools::{ArgumentValidator, BuiltinOptions, builtin_tool};
use agent::trace::{ContentMode, JsonlTrace};
use agent::{
    ApprovalDecision, EventKind, EventSink, EventStore, SessionState, decide_approval, strict_json,
};
use serde_json::json;

use crate::config::RunConfig;

use crate::cli::{ApproveArgs, DenyArgs};
use crate::error::CliError;
use crate::output::{print, print_json};
use crate::store;

/// Who the log records as the decider.
fn decider() -> String {
    std::env::var("USER")
        .ok()
        .filter(|user| !user.is_empty())
        .map_or_else(|| "agent approve".into(), |user| format!("{user} (cli)"))
}

/// Approves waiting calls, optionally with edited arguments.
pub async fn approve(args: ApproveArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.store.store, &args.session_id).await?;
    let arguments = match &args.args {
        None => None,
        Some(text) => {
            let value = strict_json::from_str(text)
                .map_err(|err| CliError::Usage(format!("--args is not valid JSON: {err}")))?;
            if !value.is_object() {
                return Err(CliError::Usage(
                    "--args must be a JSON object of arguments".into(),
                ));
            }
            let events = store.load(&args.session_id).await?;
            let state = SessionState::from_events(&args.session_id, &events)
                .map_err(|err| CliError::Internal(err.to_string()))?;
            let waiting = state.undecided_calls();
            let call = match &args.call {
                Some(id) => waiting.iter().find(|call| &call.id == id),
                None if waiting.len() == 1 => waiting.first(),
                None if waiting.is_empty() => None,
                None => {
                    return Err(CliError::Usage(format!(
                        "{} calls wait; name the one to edit with --call",
                        waiting.len()
                    )));
                }
            };
            if let Some(tool) =
                call.and_then(|call| builtin_tool(&call.tool_name, &BuiltinOptions::default()))
            {
                let validator = ArgumentValidator::new(&tool.spec().input_schema)
                    .map_err(|err| CliError::Internal(err.to_string()))?;
                validator.validate(&value).map_err(|err| {
                    CliError::Usage(format!("--args for `{}`: {err}", tool.spec().name))
                })?;
            }
            Some(value)
        }
    };
    let before = last_seq(store.as_ref(), &args.session_id).await?;
    let decided = decide_approval(
        store.as_ref(),
        &args.session_id,
        args.call.as_deref(),
        ApprovalDecision::Approved { arguments },
        &decider(),
    )
    .await?;
    trace_decisions(store.as_ref(), &args.session_id, before).await?;
    report(&args.session_id, &decided, "approved", args.json)
}

/// Denies waiting calls; the model receives the reason.
pub async fn deny(args: DenyArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.store.store, &args.session_id).await?;
    let before = last_seq(store.as_ref(), &args.session_id).await?;
    let decided = decide_approval(
        store.as_ref(),
        &args.session_id,
        args.call.as_deref(),
        ApprovalDecision::Denied {
            reason: args.reason.clone(),
        },
        &decider(),
    )
    .await?;
    trace_decisions(store.as_ref(), &args.session_id, before).await?;
    report(&args.session_id, &decided, "denied", args.json)
}

async fn last_seq(store: &dyn EventStore, session_id: &str) -> Result<u64, CliError> {
    Ok(store
        .load(session_id)
        .await?
        .last()
        .map_or(0, |event| event.seq))
}

/// Appends the decisions (events after `before`) to the session's recorded trace:
/// no process drives a session while it waits, so nobody else writes them.
async fn trace_decisions(
    store: &dyn EventStore,
    session_id: &str,
    before: u64,
) -> Result<(), CliError> {
    let events = store.load(session_id).await?;
    let Some(EventKind::SessionStarted { config, .. }) = events.first().map(|event| &event.kind)
    else {
        return Ok(());
    };
    let recorded = RunConfig::recorded(config)?;
    let Some(path) = &recorded.trace else {
        return Ok(());
    };
    let mode: ContentMode = recorded.trace_content.parse().unwrap_or_default();
    let trace = JsonlTrace::open(path, mode).map_err(|err| {
        CliError::Internal(format!(
            "cannot append to the trace `{}`: {err}",
            path.display()
        ))
    })?;
    let mut state = SessionState::new(session_id);
    for event in &events {
        state
            .apply(event)
            .map_err(|err| CliError::Internal(err.to_string()))?;
        if event.seq > before {
            trace
                .publish(event, state.steps_used())
                .map_err(|err| CliError::Internal(err.to_string()))?;
        }
    }
    Ok(())
}

fn report(session_id: &str, decided: &[String], what: &str, json: bool) -> Result<u8, CliError> {
    if json {
        print_json(&json!({"session_id": session_id, "decided": decided}))?;
    } else {
        print(&format!(
            "{what}: {}\ncontinue with: agent resume {session_id}",
            decided.join(", ")
        ))?;
    }
    Ok(0)
}
