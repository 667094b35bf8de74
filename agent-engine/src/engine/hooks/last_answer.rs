//! The last answer: when a limit ends a run (steps, tokens, calls, wall time)
//! and the engine's [`OnLimit`] is `Summarise`, or the model's output was
//! invalid too many times in a row, one more request — offering no tools,
//! capped by the output-token limit and bounded by a grace period of its own,
//! not by the budget that ran out — asks the model to answer from what the
//! history holds. Its answer is recorded as `last_answer` just before the
//! `failed` event, so the exit reason stays what it was and the `RunResult`
//! carries the answer, marked `partial` or `degraded`. Nothing is recorded
//! until the answer is in: a crash during the request asks again on resume.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{HookPoint, Hooked, StepHook};
use crate::engine::driver::{Bounded, Driver};
use crate::engine::outcome::Reply;
use crate::error::EngineError;
use crate::guards::OnLimit;
use agent_core::event::{EventKind, LastAnswerKind};
use agent_core::history::HistoryItem;
use agent_core::model::{CallPurpose, ModelRequest};
use agent_core::result::ExitReason;
use agent_core::types::Usage;

/// How long the last request may take, whatever budget ended the run.
const LAST_ANSWER_GRACE: Duration = Duration::from_secs(60);

/// The hook: before a run ends on a limit that calls for a last answer, asks
/// for it once.
pub(super) struct LastAnswer;

#[async_trait]
impl StepHook for LastAnswer {
    async fn consult(
        &self,
        driver: &mut Driver<'_>,
        point: &HookPoint<'_>,
    ) -> Result<Hooked, EngineError> {
        let HookPoint::Ending(ending) = point else {
            return Ok(Hooked::Pass);
        };
        let Some(kind) = driver.last_answer_kind(ending) else {
            return Ok(Hooked::Pass);
        };
        if driver.state.has_last_answer() || driver.state.status().is_terminal() {
            return Ok(Hooked::Pass);
        }
        if driver.ask_last_answer(kind, ending).await? {
            Ok(Hooked::Pass)
        } else {
            Ok(Hooked::Took)
        }
    }
}

impl Driver<'_> {
    fn last_answer_kind(&self, ending: &EventKind) -> Option<LastAnswerKind> {
        let EventKind::Failed { exit_reason, .. } = ending else {
            return None;
        };
        match exit_reason {
            ExitReason::InvalidModelOutput => Some(LastAnswerKind::Degraded),
            ExitReason::MaxStepsExceeded | ExitReason::BudgetExceeded
                if self.engine.on_limit == OnLimit::Summarise =>
            {
                Some(LastAnswerKind::Partial)
            }
            _ => None,
        }
    }

    /// Asks for and records the last answer; `false` when the log moved under
    /// the request (it was reloaded, and the driver decides again).
    async fn ask_last_answer(
        &mut self,
        kind: LastAnswerKind,
        ending: &EventKind,
    ) -> Result<bool, EngineError> {
        let why = match ending {
            EventKind::Failed {
                error: Some(error), ..
            } => error.as_str(),
            _ => "a limit was reached",
        };
        let engine = self.engine;
        let instructions = match kind {
            LastAnswerKind::Partial => format!(
                "The run has reached a limit ({why}) and no more tools can be called. Answer the task now from what the conversation above holds: give the best answer you can, and say plainly what is missing or uncertain."
            ),
            LastAnswerKind::Degraded => format!(
                "Your recent outputs could not be used ({why}). No tools can be called now. Answer the task in plain text, not JSON, from what the conversation above holds, and say what is uncertain."
            ),
        };
        let request = ModelRequest {
            instructions: agent_core::model::agent_instructions(
                engine.instructions.as_deref(),
                instructions,
            ),
            task: self.state.task().to_owned(),
            history: Arc::new(answered(self.state.history())),
            tools: Arc::new(Vec::new()),
            max_output_tokens: engine.max_output_tokens,
            output_schema: None,
        };
        let aside = self
            .ask_aside(
                &request,
                self.state.steps_used() + 1,
                CallPurpose::LastAnswer,
                Some(LAST_ANSWER_GRACE),
            )
            .await;
        let (answer, error, usage) = match aside.outcome {
            Bounded::Interrupted => {
                self.reload().await?;
                return Ok(false);
            }
            Bounded::TimedOut => (
                None,
                Some(format!(
                    "the last answer did not come within {}s",
                    LAST_ANSWER_GRACE.as_secs()
                )),
                Usage::default(),
            ),
            Bounded::Done(outcome) => match Reply::read(outcome) {
                Ok(Reply {
                    text: Some(text),
                    usage,
                    ..
                }) => (Some(text), None, usage),
                Ok(Reply {
                    text: None,
                    invalid,
                    usage,
                }) => {
                    let why = if invalid.is_some() {
                        "the last answer held no text"
                    } else {
                        "the last answer held no text (the model asked for a tool)"
                    };
                    (None, Some(why.to_owned()), usage)
                }
                Err(err) => (
                    None,
                    Some(format!("the last answer failed: {err}")),
                    Usage::default(),
                ),
            },
        };
        for report in aside.reports {
            self.record_timed(report)?;
        }
        self.record(EventKind::LastAnswer {
            kind,
            answer,
            error,
            usage,
        })?;
        Ok(true)
    }
}

/// `history` without a trailing turn whose calls have not all got results (a
/// call a limit stopped in flight), so every call the request shows has its
/// result.
fn answered(history: &[HistoryItem]) -> Vec<HistoryItem> {
    let last_turn = history
        .iter()
        .rposition(|item| matches!(item, HistoryItem::ToolCalls { .. }));
    let Some(start) = last_turn else {
        return history.to_vec();
    };
    let (before, turn) = history.split_at(start);
    let calls = match turn.first() {
        Some(HistoryItem::ToolCalls { calls, .. }) => calls.len(),
        _ => 0,
    };
    let results = turn
        .iter()
        .filter(|item| matches!(item, HistoryItem::Observation { .. }))
        .count();
    if results >= calls {
        history.to_vec()
    } else {
        before.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use agent_core::types::{Observation, ToolCall};

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            tool_name: "calculator".into(),
            arguments: json!({}),
        }
    }

    fn result(id: &str) -> HistoryItem {
        HistoryItem::Observation {
            observation: Observation {
                call_id: id.into(),
                tool_name: "calculator".into(),
                content: "84".into(),
                is_error: false,
            },
        }
    }

    #[test]
    fn a_turn_still_in_flight_is_left_out() {
        let done = vec![
            HistoryItem::ToolCalls {
                calls: vec![call("a")],
                text: None,
            },
            result("a"),
        ];
        assert_eq!(answered(&done), done);
        let mut in_flight = done.clone();
        in_flight.push(HistoryItem::ToolCalls {
            calls: vec![call("b"), call("c")],
            text: None,
        });
        in_flight.push(result("b"));
        assert_eq!(answered(&in_flight), done);
    }
}
