//! `agent show ID`: a session's status, task and timeline — seq, event, status
//! transition, tool calls and results.

use agent::{Action, Event, EventKind, SessionState};
use serde_json::json;

use crate::cli::SessionArgs;
use crate::error::CliError;
use crate::output::{print, print_json, timestamp};
use crate::store;

/// Shows the session.
pub async fn show(args: SessionArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.store.store, &args.session_id)?;
    let events = store.load(&args.session_id).await?;
    let mut state = SessionState::new(&args.session_id);
    let mut lines = Vec::new();
    for event in &events {
        let before = state.status();
        state
            .apply(event)
            .map_err(|err| CliError::Internal(format!("the session log is inconsistent: {err}")))?;
        let transition = if before == state.status() {
            String::new()
        } else {
            format!("{before} -> {}", state.status())
        };
        lines.push(format!(
            "{:>4}  {}  {:<22} {:<32} {}",
            event.seq,
            timestamp(event.at),
            event.kind.name(),
            transition,
            details(event)
        ));
    }
    if args.json {
        print_json(&json!({
            "session_id": args.session_id,
            "status": state.status().public(),
            "task": state.task(),
            "events": events,
        }))?;
    } else {
        print(&format!(
            "session {}\nstatus: {}\ntask: {}\n",
            args.session_id,
            state.status().public(),
            state.task()
        ))?;
        for line in lines {
            print(line.trim_end())?;
        }
    }
    Ok(0)
}

/// What a timeline line says about an event beyond its kind.
fn details(event: &Event) -> String {
    match &event.kind {
        EventKind::ModelResponded { actions, .. } => actions
            .iter()
            .map(|action| match action {
                Action::ToolCall(call) => {
                    format!("{} {} [{}]", call.tool_name, call.arguments, call.id)
                }
                Action::Finish(finish) => format!("finish: {}", finish.answer),
                Action::Plan { steps } => format!(
                    "plan: {}",
                    steps
                        .iter()
                        .map(|step| step.goal.as_str())
                        .collect::<Vec<_>>()
                        .join(" | ")
                ),
            })
            .collect::<Vec<_>>()
            .join("; "),
        EventKind::ModelOutputRejected { error, .. } => error.clone(),
        EventKind::ActionDispatched { call } => format!("{} [{}]", call.tool_name, call.id),
        EventKind::ActionCompleted { observation } => format!(
            "{} [{}] {}{}",
            observation.tool_name,
            observation.call_id,
            if observation.is_error { "error: " } else { "" },
            observation.content
        ),
        EventKind::Finished { answer } => answer.clone(),
        EventKind::ApprovalRequested { calls } => calls
            .iter()
            .map(|call| format!("{} {} [{}]", call.tool_name, call.arguments, call.id))
            .collect::<Vec<_>>()
            .join("; "),
        EventKind::ApprovalDecided {
            call_id,
            decision,
            by,
            ..
        } => format!("[{call_id}] {} by {by}", decision.name()),
        EventKind::Strategy { name, data, .. } => format!("{name} {data}"),
        EventKind::ResponseRefused { reason } => reason.clone(),
        EventKind::FinishRejected { reason, .. } => reason.clone(),
        EventKind::Failed {
            exit_reason, error, ..
        } => format!("{exit_reason}: {}", error.as_deref().unwrap_or("")),
        EventKind::Cancelled { reason } | EventKind::Resumed { reason } => reason.clone(),
        EventKind::SessionStarted { strategy, .. } => format!("strategy {strategy}"),
        EventKind::ModelRequested { step } => format!("step {step}"),
        EventKind::ActionAttemptFailed {
            call_id,
            tool_name,
            attempt,
            error,
            delay_ms,
            ..
        } => format!(
            "{tool_name} [{call_id}] attempt {attempt} failed, retry in {delay_ms} ms: {error}"
        ),
        EventKind::CircuitChanged { tool_name, state } => format!("{tool_name} circuit {state:?}"),
        EventKind::ModelRetried {
            attempt,
            error,
            delay_ms,
        } => format!("retry {attempt} in {delay_ms} ms: {error}"),
        EventKind::Forked { parent, at } => format!("copy of {parent} up to seq {at}"),
    }
}
