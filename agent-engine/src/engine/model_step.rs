//! The model step: guard, commit the previous step's results durably, record the
//! request, ask the model (bounded), then record its retries and its response —
//! usable actions with call ids made unique, or rejected output that becomes
//! feedback, or the failure that ends the run.

use std::collections::HashSet;
use std::sync::Arc;

use super::driver::{Bounded, Driver};
use super::hooks::HookPoint;
use super::outcome::{failure_event, record_chat};
use super::reports::Reports;
use crate::error::EngineError;
use crate::telemetry;
use agent_core::context::ContextInput;
use agent_core::event::EventKind;
use agent_core::guard::Checkpoint;
use agent_core::model::{CallPurpose, ModelRequest, ModelResponse};
use agent_core::state::Status;
use agent_core::strategy::ModelCall;
use agent_core::types::Action;
use tracing::Instrument;

impl Driver<'_> {
    pub(super) async fn call_model(&mut self, call: ModelCall) -> Result<(), EngineError> {
        if !self.guarded(Checkpoint::ModelCall).await?
            || !self.flush(self.step_durability()).await?
        {
            return Ok(());
        }
        if self.state.pause_requested() || !self.state.pending_messages().is_empty() {
            // The commit placed this step's results after a pause request or a
            // message: the step is over, so the driver pauses or delivers the
            // message before asking for the next.
            return Ok(());
        }
        let engine = self.engine;
        let tools = engine.tools.specs();
        let (history, context_tokens) = match &engine.context {
            Some(policy) => {
                let task = self.state.task().to_owned();
                let input = ContextInput {
                    instructions: &call.instructions,
                    task: &task,
                    tools: &tools,
                    history: &call.history,
                };
                let view = policy.view(&input);
                let tokens = input.with_history(&view).tokens(policy.counter());
                (view, Some(tokens))
            }
            None => (Arc::clone(&call.history), None),
        };
        let point = HookPoint::ModelCall {
            call: &call,
            view: &history,
        };
        if !self.consult_hooks(point).await? {
            return Ok(());
        }
        // The request holds the history from here on: a second handle would
        // make the state copy it when this step's response is appended.
        let ModelCall {
            instructions,
            history: whole,
        } = call;
        drop(whole);
        let step = self.state.steps_used() + 1;
        self.record(EventKind::ModelRequested {
            step,
            context_tokens,
        })?;
        if self.state.status() != Status::Thinking {
            return Ok(());
        }
        let instructions = match &engine.output {
            Some(schema) => format!("{instructions}\n\n{}", schema.instructions()),
            None => instructions,
        };
        let instructions =
            agent_core::model::agent_instructions(engine.instructions.as_deref(), instructions);
        let request = ModelRequest {
            instructions,
            task: self.state.task().to_owned(),
            history,
            tools,
            max_output_tokens: engine.max_output_tokens,
            output_schema: engine
                .output
                .as_ref()
                .map(|schema| Arc::clone(schema.schema())),
        };
        let reports = Arc::new(Reports::default());
        let ctx = self.model_context(step, CallPurpose::Step, &reports);
        let span = telemetry::chat_span(self.state.session_id(), step, &engine.model.identity());
        if engine.record_content {
            let input = serde_json::json!({"task": &request.task, "history": &*request.history});
            span.record("gen_ai.input.messages", input.to_string());
        }
        let interrupt = self.signal().interrupt.notified();
        let answer = engine
            .model
            .complete(&request, &ctx)
            .instrument(span.clone());
        let outcome = self
            .bounds
            .wait(async {
                tokio::select! {
                    biased;
                    answer = answer => Some(answer),
                    () = interrupt => None,
                }
            })
            .await;
        ctx.cancel.cancel();
        // The request shares the state's history: let go of it before the
        // response is applied, so the history grows in place instead of being
        // copied (a copy per step would make each step cost the session's length).
        drop(request);
        let outcome = match outcome {
            Bounded::Done(Some(answer)) => Bounded::Done(answer),
            Bounded::Done(None) => {
                // A message that interrupts arrived: this call is abandoned
                // and the model asked again with the message.
                self.reload().await?;
                return Ok(());
            }
            Bounded::TimedOut => Bounded::TimedOut,
            Bounded::Interrupted => Bounded::Interrupted,
        };
        record_chat(&span, &outcome, engine.record_content);
        let Some(outcome) = self.settle(outcome).await? else {
            return Ok(());
        };
        for report in reports.take() {
            self.record_timed(report)?;
        }
        let kind = match outcome {
            Ok(response) => self.responded(response, step),
            Err(err) => failure_event(err, &format!("step {step}")),
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
