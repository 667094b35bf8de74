//! ReAct: think, act, observe. The model sees the task, the tool specs and the
//! whole history; the tool calls it proposes in one turn run concurrently; a finish
//! ends the run.

use agent_core::state::{SessionState, Status};
use agent_core::strategy::{Decision, ExecutionStrategy, ModelCall, StrategyError};

/// The system instructions ReAct sends with every model call.
pub const REACT_INSTRUCTIONS: &str = "You are an agent that completes the user's task. \
Think step by step. When a tool helps, call it; you may call several tools at once \
when they do not depend on each other. Read each tool result before deciding the next \
step. When you know the answer, finish with it.";

/// The ReAct strategy.
#[derive(Debug, Clone, Default)]
pub struct ReAct {
    instructions: Option<String>,
}

impl ReAct {
    /// ReAct with the default instructions.
    pub fn new() -> Self {
        Self::default()
    }

    /// ReAct with custom system instructions.
    pub fn with_instructions(instructions: impl Into<String>) -> Self {
        Self {
            instructions: Some(instructions.into()),
        }
    }

    fn model_call(&self, state: &SessionState) -> Decision {
        Decision::CallModel(ModelCall {
            instructions: self
                .instructions
                .clone()
                .unwrap_or_else(|| REACT_INSTRUCTIONS.to_owned()),
            history: state.shared_history(),
        })
    }
}

impl ExecutionStrategy for ReAct {
    fn name(&self) -> &str {
        "react"
    }

    /// A follow-up message is the newest item of the history the next
    /// decision sees.
    fn takes_follow_ups(&self) -> bool {
        true
    }

    fn next(&self, state: &SessionState) -> Result<Decision, StrategyError> {
        match state.status() {
            Status::Idle | Status::Observing => Ok(self.model_call(state)),
            Status::Thinking => match (state.proposed_finish(), state.proposed_plan()) {
                (Some(answer), _) => Ok(Decision::Finish {
                    answer: answer.to_owned(),
                }),
                (None, Some(_)) => Ok(Decision::Refuse {
                    reason: "a plan is not used here: call a tool, or finish with the answer"
                        .into(),
                }),
                (None, None) => Err(self.stuck("the model call has no response")),
            },
            Status::ActionPending => Ok(Decision::Dispatch(state.undispatched_calls())),
            status @ (Status::New
            | Status::AwaitingApproval
            | Status::Paused
            | Status::ActionExecuting
            | Status::Finished
            | Status::Error
            | Status::Cancelled) => {
                Err(self.stuck(&format!("nothing to decide in status `{status}`")))
            }
        }
    }
}

impl ReAct {
    fn stuck(&self, message: &str) -> StrategyError {
        StrategyError {
            strategy: self.name().to_owned(),
            message: message.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use agent_core::event::{Event, EventKind};
    use agent_core::types::{Action, Finish, ToolCall, Usage};
    use serde_json::json;

    use super::*;

    fn state(kinds: Vec<EventKind>) -> SessionState {
        let mut kinds = kinds;
        kinds.insert(
            0,
            EventKind::SessionStarted {
                task: "t".into(),
                strategy: "react".into(),
                config: json!({}),
            },
        );
        let events: Vec<Event> = kinds
            .into_iter()
            .zip(1..)
            .map(|(kind, seq)| Event::new("s", seq, kind))
            .collect();
        SessionState::from_events("s", &events).unwrap()
    }

    fn responded(action: Action) -> EventKind {
        EventKind::ModelResponded {
            actions: vec![action],
            usage: Usage::default(),
            text: None,
        }
    }

    #[test]
    fn asks_the_model_first_then_dispatches_then_finishes() {
        let react = ReAct::new();
        assert!(matches!(
            react.next(&state(vec![])).unwrap(),
            Decision::CallModel(ModelCall { ref history, .. }) if history.is_empty()
        ));
        let call = ToolCall {
            id: "c".into(),
            tool_name: "calculator".into(),
            arguments: json!({}),
        };
        let pending = state(vec![
            EventKind::ModelRequested {
                step: 1,
                context_tokens: None,
            },
            responded(Action::ToolCall(call.clone())),
        ]);
        assert_eq!(
            react.next(&pending).unwrap(),
            Decision::Dispatch(vec![call])
        );
        let finishing = state(vec![
            EventKind::ModelRequested {
                step: 1,
                context_tokens: None,
            },
            responded(Action::Finish(Finish {
                answer: "42".into(),
            })),
        ]);
        assert_eq!(
            react.next(&finishing).unwrap(),
            Decision::Finish {
                answer: "42".into()
            }
        );
    }
}
