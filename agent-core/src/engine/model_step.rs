//! The model step: guard, commit the previous step's results durably, record the
//! request, ask the model (bounded), then record its retries and its response —
//! usable actions with call ids made unique, or rejected output that becomes
//! feedback, or the failure that ends the run.

use std::collections::HashSet;
use std::sync::Arc;

use super::driver::{Driver, internal_failure};
use super::reports::{ModelReports, Reports};
use crate::cancel::Cancellation;
use crate::error::EngineError;
use crate::event::EventKind;
use crate::guard::Checkpoint;
use crate::model::{ModelContext, ModelError, ModelRequest, ModelResponse};
use crate::result::ExitReason;
use crate::state::Status;
use crate::store::Durability;
use crate::strategy::ModelCall;
use crate::types::Action;

impl Driver<'_> {
    pub(super) async fn call_model(&mut self, call: ModelCall) -> Result<(), EngineError> {
        if !self.guarded(Checkpoint::ModelCall).await? || !self.flush(Durability::Full).await? {
            return Ok(());
        }
        let step = self.state.steps_used() + 1;
        self.record(EventKind::ModelRequested { step })?;
        if self.state.status() != Status::Thinking {
            return Ok(());
        }
        let engine = self.engine;
        let request = ModelRequest {
            instructions: call.instructions,
            task: self.state.task().to_owned(),
            history: call.history,
            tools: engine.tools.specs(),
            max_output_tokens: engine.max_output_tokens,
        };
        let reports = Arc::new(Reports::default());
        let ctx = ModelContext {
            session_id: self.state.session_id().to_owned(),
            step,
            observer: Arc::new(ModelReports(Arc::clone(&reports))),
            cancel: Cancellation::new(),
        };
        let outcome = self
            .bounds
            .wait(engine.model.complete(&request, &ctx))
            .await;
        ctx.cancel.cancel();
        let Some(outcome) = self.settle(outcome).await? else {
            return Ok(());
        };
        for report in reports.take() {
            self.record_timed(report)?;
        }
        let kind = match outcome {
            Ok(response) => self.responded(response, step),
            Err(ModelError::InvalidOutput {
                raw,
                message,
                usage,
            }) => EventKind::ModelOutputRejected {
                raw,
                error: message,
                usage,
            },
            Err(err @ (ModelError::Transient { .. } | ModelError::Fatal { .. })) => {
                EventKind::Failed {
                    exit_reason: ExitReason::ProviderError,
                    budget: None,
                    error: Some(format!("step {step}: {err}")),
                }
            }
            Err(ModelError::Internal { message }) => internal_failure(message),
        };
        self.record(kind)
    }

    /// The event for a usable response: ids made unique within the session, and an
    /// empty response turned into rejected output.
    fn responded(&self, response: ModelResponse, step: u32) -> EventKind {
        if response.actions.is_empty() {
            return EventKind::ModelOutputRejected {
                raw: response.text.unwrap_or_default(),
                error: "the response holds no action: call a tool or finish with an answer".into(),
                usage: response.usage,
            };
        }
        let mut seen: HashSet<String> = HashSet::new();
        let actions = response
            .actions
            .into_iter()
            .enumerate()
            .map(|(index, action)| match action {
                Action::ToolCall(mut call) => {
                    if call.id.is_empty()
                        || seen.contains(&call.id)
                        || self.state.knows_call(&call.id)
                    {
                        call.id = self.fresh_call_id(step, index, &seen);
                    }
                    seen.insert(call.id.clone());
                    Action::ToolCall(call)
                }
                other => other,
            })
            .collect();
        EventKind::ModelResponded {
            actions,
            usage: response.usage,
            text: response.text,
        }
    }

    fn fresh_call_id(&self, step: u32, index: usize, seen: &HashSet<String>) -> String {
        let base = format!("call_{step}_{}", index + 1);
        let mut candidate = base.clone();
        let mut suffix = 1;
        while seen.contains(&candidate) || self.state.knows_call(&candidate) {
            suffix += 1;
            candidate = format!("{base}_{suffix}");
        }
        candidate
    }
}
