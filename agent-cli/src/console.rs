//! The readable account of a run printed without `--json`: each event as it is
//! committed, in the words of [`describe`], then the outcome.

use std::io;
use std::sync::Arc;

use agent::event::{Event, EventKind};
use agent::result::{ExitReason, RunResult};
use agent::sink::{EventSink, SinkError};
use agent::trace::describe;
use agent::types::Action;

use crate::error::CliError;
use crate::output::{print_json, print_line};
use crate::screen::Screen;

/// Prints committed events for a person, on stdout (around the status line,
/// if any, and after text streamed on the same screen).
pub struct Console {
    screen: Arc<Screen>,
}

impl EventSink for Console {
    fn publish(&self, event: &Event, step: u32) -> Result<(), SinkError> {
        let text = match &event.kind {
            EventKind::SessionStarted { task, .. } => {
                format!("session {}\ntask: {task}", event.session_id)
            }
            EventKind::ModelRequested { .. }
            | EventKind::ActionDispatched { .. }
            | EventKind::ActionsQueued { .. }
            | EventKind::Finished { .. }
            | EventKind::Failed { .. }
            | EventKind::Forked { .. } => return Ok(()),
            EventKind::ModelResponded { actions, .. } if matches!(actions.as_slice(), [Action::Finish(finish)] if self.screen.showed(step, &finish.answer)) =>
            {
                format!("step {step:<3} -> finish (its text is above)")
            }
            kind @ EventKind::ModelResponded { .. } => {
                format!("step {step:<3} -> {}", describe(kind))
            }
            kind @ (EventKind::ModelOutputRejected { .. } | EventKind::ResponseRefused { .. }) => {
                format!("step {step:<3} !! {}", describe(kind))
            }
            kind @ EventKind::ActionCompleted { .. } => format!("         <- {}", describe(kind)),
            kind => format!("         {}", describe(kind)),
        };
        self.screen
            .line(&text)
            .map_err(|err| SinkError(format!("cannot write to stdout: {err}")))
    }
}

/// The console sink, printing on `screen`.
pub fn console(screen: Arc<Screen>) -> Arc<dyn EventSink> {
    Arc::new(Console { screen })
}

/// Prints a RunResult (one JSON value with `--json`, a readable summary without)
/// and returns its exit code.
pub fn report(result: &RunResult, json: bool) -> Result<u8, CliError> {
    if json {
        print_json(result)?;
    } else {
        print_outcome(result)
            .map_err(|err| CliError::Internal(format!("cannot write to stdout: {err}")))?;
    }
    Ok(u8::try_from(result.exit_code()).unwrap_or(1))
}

/// Prints how the run ended.
fn print_outcome(result: &RunResult) -> io::Result<()> {
    let mut text = String::new();
    if let Some(answer) = &result.answer {
        let label = if result.partial {
            "partial answer (written after a limit ended the run)"
        } else if result.degraded {
            "degraded answer (plain text after repeated invalid output)"
        } else {
            "answer"
        };
        text.push_str(&format!("{label}: {answer}\n"));
    }
    if let Some(output) = &result.output {
        text.push_str(&format!("output: {output}\n"));
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
    if usage.by_model.len() > 1 {
        for (model, counted) in &usage.by_model {
            text.push_str(&format!(
                "\n  {model}: {} call(s), {} input and {} output tokens",
                counted.model_calls, counted.input_tokens, counted.output_tokens
            ));
        }
    }
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
