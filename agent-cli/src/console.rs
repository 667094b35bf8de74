//! The readable account of a run printed without `--json`: each action and
//! observation as it is committed, then the outcome.

use std::io;

use agent::{Action, Event, EventKind, EventSink, ExitReason, RunResult, SinkError};

use crate::output::print_line;

/// Prints committed events for a person, on stdout.
#[derive(Debug, Default)]
pub struct Console;

impl EventSink for Console {
    fn publish(&self, event: &Event, step: u32) -> Result<(), SinkError> {
        let text = match &event.kind {
            EventKind::SessionStarted { task, .. } => {
                format!("session {}\ntask: {task}", event.session_id)
            }
            EventKind::ModelResponded { actions, .. } => actions
                .iter()
                .map(|action| match action {
                    Action::ToolCall(call) => {
                        format!("step {step:<3} -> {} {}", call.tool_name, call.arguments)
                    }
                    Action::Finish(_) => format!("step {step:<3} finish"),
                    Action::Plan { steps } => {
                        format!("step {step:<3} plan of {} step(s)", steps.len())
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"),
            EventKind::ModelOutputRejected { error, .. } => {
                format!("step {step:<3} !! invalid model output: {error}")
            }
            EventKind::ModelRetried {
                attempt,
                error,
                delay_ms,
            } => format!("         retry {attempt} of the model call in {delay_ms} ms: {error}"),
            EventKind::ActionAttemptFailed {
                tool_name,
                attempt,
                error,
                delay_ms,
                ..
            } => format!("         retry {attempt} of {tool_name} in {delay_ms} ms: {error}"),
            EventKind::CircuitChanged { tool_name, state } => {
                format!("         circuit of {tool_name} is now {state:?}")
            }
            EventKind::ApprovalRequested { calls } => calls
                .iter()
                .map(|call| {
                    format!(
                        "         awaiting approval: {} {} [{}]",
                        call.tool_name, call.arguments, call.id
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"),
            EventKind::ApprovalDecided {
                call_id,
                decision,
                by,
                ..
            } => {
                format!("         [{call_id}] {} by {by}", decision.name())
            }
            EventKind::Strategy { name, data, .. } => format!("         {name}: {data}"),
            EventKind::ResponseRefused { reason } => format!("step {step:<3} !! refused: {reason}"),
            EventKind::FinishRejected { reason, .. } => {
                format!("         finish refused: {reason}")
            }
            EventKind::Resumed { .. } => format!("resumed session {}", event.session_id),
            EventKind::Cancelled { reason } => format!("cancelled: {reason}"),
            EventKind::ActionCompleted { observation } => {
                let marker = if observation.is_error { "error:" } else { "<-" };
                format!(
                    "         {marker} {} ({})",
                    observation.content, observation.tool_name
                )
            }
            _ => return Ok(()),
        };
        print_line(&text).map_err(|err| SinkError(format!("cannot write to stdout: {err}")))
    }
}

/// Prints how the run ended.
pub fn print_outcome(result: &RunResult) -> io::Result<()> {
    let mut text = String::new();
    if let Some(answer) = &result.answer {
        text.push_str(&format!("answer: {answer}\n"));
    }
    let usage = &result.usage;
    text.push_str(&format!(
        "{} after {} step(s): {} model call(s), {} tool call(s), {} input and {} output tokens",
        result.exit_reason,
        result.steps_used,
        usage.model_calls,
        usage.tool_calls,
        usage.input_tokens,
        usage.output_tokens
    ));
    if let Some(budget) = &result.budget {
        text.push_str(&format!("\nbudget exceeded: {budget}"));
    }
    if let Some(error) = &result.error {
        text.push_str(&format!("\nerror: {error}"));
    }
    for call in &result.pending {
        text.push_str(&format!(
            "\nwaiting for approval: {} {} [{}]\n  agent approve {} --call {}   (optionally --args '<JSON>')\n  agent deny {} --call {} --reason '<why>'",
            call.tool_name, call.arguments, call.id, result.session_id, call.id, result.session_id, call.id
        ));
    }
    if !result.pending.is_empty() {
        text.push_str(&format!("\nthen: agent resume {}", result.session_id));
    }
    if result.exit_reason != ExitReason::Finished {
        text.push_str(&format!("\nsession: {}", result.session_id));
    }
    print_line(&text)
}
