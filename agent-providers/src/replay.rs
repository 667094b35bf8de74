//! The replay model: answers with the model responses recorded in a session's log,
//! in order, so a run can be re-executed deterministically without a provider.

use std::sync::Arc;

use agent_core::context::TokenCounter;
use agent_core::event::{Event, EventKind};
use agent_core::model::{
    CallPurpose, Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
};
use agent_core::types::{Action, Finish, Usage};
use async_trait::async_trait;

/// One recorded response: usable actions, or output that was rejected.
#[derive(Debug, Clone, PartialEq)]
enum Recorded {
    Responded(ModelResponse),
    Rejected(ModelError),
}

/// A model that replays a recorded session: response `n` answers step `n`.
///
/// The replay diverges — a `Fatal` error naming the step, which ends the run with
/// `provider_error` — when a recorded tool call names a tool the new run does not
/// have, or when the recorded responses run out before a finish.
#[derive(Clone)]
pub struct ReplayModel {
    source: String,
    responses: Vec<Recorded>,
    /// The summaries the recorded session's context policy made, in order; the
    /// n-th summary request is answered with the n-th.
    summaries: Vec<(String, Usage)>,
    /// The recorded reflections, in order, answered the same way.
    reflections: Vec<(String, Usage)>,
    /// The recorded last answer after a limit, if the session asked for one.
    last_answer: Option<(Option<String>, Usage)>,
    counter: Option<Arc<dyn TokenCounter>>,
}

impl std::fmt::Debug for ReplayModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayModel")
            .field("source", &self.source)
            .field("responses", &self.responses.len())
            .field("summaries", &self.summaries.len())
            .finish()
    }
}

impl ReplayModel {
    /// The responses recorded in `events`, the log of session `source`.
    pub fn from_events(source: impl Into<String>, events: &[Event]) -> Self {
        let responses = events
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::ModelResponded {
                    actions,
                    usage,
                    text,
                } => Some(Recorded::Responded(ModelResponse {
                    actions: actions.clone(),
                    usage: *usage,
                    text: text.clone(),
                    model: None,
                })),
                EventKind::ModelOutputRejected { raw, error, usage } => {
                    Some(Recorded::Rejected(ModelError::InvalidOutput {
                        raw: raw.clone(),
                        message: error.clone(),
                        usage: *usage,
                    }))
                }
                _ => None,
            })
            .collect();
        let summaries = events
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::ContextCompacted { summary, usage, .. } => {
                    Some((summary.clone(), *usage))
                }
                _ => None,
            })
            .collect();
        let reflections = events
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::Reflection { note, usage, .. } => Some((note.clone(), *usage)),
                _ => None,
            })
            .collect();
        let last_answer = events.iter().find_map(|event| match &event.kind {
            EventKind::LastAnswer { answer, usage, .. } => Some((answer.clone(), *usage)),
            _ => None,
        });
        Self {
            source: source.into(),
            responses,
            summaries,
            reflections,
            last_answer,
            counter: None,
        }
    }

    /// Counts context tokens with `counter`: the tokenizer of the model the
    /// recorded session ran with, so a context policy summarises where it did.
    pub fn with_token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = Some(counter);
        self
    }

    /// Number of recorded responses.
    pub fn len(&self) -> usize {
        self.responses.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.responses.is_empty()
    }

    /// The recorded summary number `index` (1-based), as a finish.
    fn summary(&self, index: u32, step: u32) -> Result<ModelResponse, ModelError> {
        let position = usize::try_from(index.saturating_sub(1)).unwrap_or(usize::MAX);
        let Some((summary, usage)) = self.summaries.get(position) else {
            return Err(self.diverged(
                step,
                format!(
                    "summary {index} of the context was asked for, but the recorded session made {}; replay it with the --context it was recorded with",
                    self.summaries.len()
                ),
            ));
        };
        Ok(finish(summary, *usage))
    }

    /// The recorded reflection number `index` (1-based), as a finish.
    fn reflection(&self, index: u32, step: u32) -> Result<ModelResponse, ModelError> {
        let position = usize::try_from(index.saturating_sub(1)).unwrap_or(usize::MAX);
        let Some((note, usage)) = self.reflections.get(position) else {
            return Err(self.diverged(
                step,
                format!(
                    "reflection {index} was asked for, but the recorded session made {}; replay it with the --reflect-every it was recorded with",
                    self.reflections.len()
                ),
            ));
        };
        Ok(finish(note, *usage))
    }

    /// The recorded last answer, as a finish.
    fn last_answer(&self, step: u32) -> Result<ModelResponse, ModelError> {
        match &self.last_answer {
            Some((Some(answer), usage)) => Ok(finish(answer, *usage)),
            Some((None, _)) => Err(self.diverged(
                step,
                "the recorded session's last answer held no text".into(),
            )),
            None => Err(self.diverged(
                step,
                "a last answer was asked for, but the recorded session asked for none".into(),
            )),
        }
    }

    fn diverged(&self, step: u32, why: String) -> ModelError {
        ModelError::Fatal {
            message: format!(
                "replay of session `{}` diverged at step {step}: {why}",
                self.source
            ),
        }
    }
}

#[async_trait]
impl Model for ReplayModel {
    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new("replay", self.source.as_str())
    }

    fn token_counter(&self) -> Option<Arc<dyn TokenCounter>> {
        self.counter.clone()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        match ctx.purpose {
            CallPurpose::Summary { index } => return self.summary(index, ctx.step),
            CallPurpose::Reflection { index } => return self.reflection(index, ctx.step),
            CallPurpose::LastAnswer => return self.last_answer(ctx.step),
            CallPurpose::Step => {}
        }
        let index = usize::try_from(ctx.step.saturating_sub(1)).unwrap_or(usize::MAX);
        let Some(recorded) = self.responses.get(index) else {
            return Err(self.diverged(
                ctx.step,
                format!(
                    "the recorded session has only {} model responses and no finish was accepted",
                    self.responses.len()
                ),
            ));
        };
        match recorded {
            Recorded::Rejected(err) => Err(err.clone()),
            Recorded::Responded(response) => {
                for action in &response.actions {
                    if let Action::ToolCall(call) = action
                        && !request.tools.iter().any(|tool| tool.name == call.tool_name)
                    {
                        return Err(self.diverged(
                            ctx.step,
                            format!(
                                "the recorded call `{}` uses tool `{}`, which this run does not have",
                                call.id, call.tool_name
                            ),
                        ));
                    }
                }
                Ok(response.clone())
            }
        }
    }
}

/// A recorded text as the finish a positional request expects.
fn finish(text: &str, usage: Usage) -> ModelResponse {
    ModelResponse {
        actions: vec![Action::Finish(Finish {
            answer: text.to_owned(),
        })],
        usage,
        text: None,
        model: None,
    }
}

#[cfg(test)]
mod tests {
    use agent_core::types::{ToolCall, ToolSpec};
    use serde_json::json;

    use super::*;

    fn request(tools: &[&str]) -> ModelRequest {
        ModelRequest {
            instructions: String::new(),
            task: "t".into(),
            history: Arc::default(),
            tools: Arc::new(
                tools
                    .iter()
                    .map(|name| ToolSpec {
                        name: (*name).into(),
                        description: String::new(),
                        input_schema: json!({}),
                        output_description: None,
                        error_description: None,
                        idempotent: true,
                        needs_approval: false,
                    })
                    .collect(),
            ),
            max_output_tokens: None,
            output_schema: None,
        }
    }

    async fn ask(
        model: &ReplayModel,
        step: u32,
        tools: &[&str],
    ) -> Result<ModelResponse, ModelError> {
        model
            .complete(&request(tools), &ModelContext::new("s", step))
            .await
    }

    fn recorded() -> ReplayModel {
        let call = ToolCall {
            id: "call_1_1".into(),
            tool_name: "calculator".into(),
            arguments: json!({}),
        };
        let kinds = vec![
            EventKind::ModelRequested {
                step: 1,
                context_tokens: None,
            },
            EventKind::ModelResponded {
                actions: vec![Action::ToolCall(call)],
                usage: Usage::default(),
                text: None,
            },
            EventKind::ModelRequested {
                step: 2,
                context_tokens: None,
            },
            EventKind::ModelOutputRejected {
                raw: "oops".into(),
                error: "not JSON".into(),
                usage: Usage::default(),
            },
            EventKind::ModelResponded {
                actions: vec![Action::Finish(Finish {
                    answer: "84".into(),
                })],
                usage: Usage::default(),
                text: None,
            },
        ];
        let events: Vec<Event> = kinds
            .into_iter()
            .zip(1..)
            .map(|(kind, seq)| Event::new("rec", seq, kind))
            .collect();
        ReplayModel::from_events("rec", &events)
    }

    #[tokio::test]
    async fn replays_responses_and_rejections_in_order() {
        let model = recorded();
        assert_eq!(model.len(), 3);
        assert!(ask(&model, 1, &["calculator"]).await.is_ok());
        assert!(matches!(
            ask(&model, 2, &["calculator"]).await,
            Err(ModelError::InvalidOutput { .. })
        ));
        let finish = ask(&model, 3, &["calculator"]).await.unwrap();
        assert!(matches!(&finish.actions[..], [Action::Finish(_)]));
    }

    #[tokio::test]
    async fn diverges_on_a_missing_tool_or_when_responses_run_out() {
        let model = recorded();
        let Err(ModelError::Fatal { message }) = ask(&model, 1, &[]).await else {
            panic!("expected divergence");
        };
        assert!(
            message.contains("diverged at step 1") && message.contains("`calculator`"),
            "{message}"
        );
        let Err(ModelError::Fatal { message }) = ask(&model, 4, &["calculator"]).await else {
            panic!("expected divergence");
        };
        assert!(message.contains("diverged at step 4"), "{message}");
    }
}
