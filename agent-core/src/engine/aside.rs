//! Model calls outside the step sequence — a context summary, a reflection,
//! the last answer after a limit: one request with its own purpose, made and
//! traced like a step's call, whose layers' reports (retries, fallbacks) the
//! caller records before the answer. Their answers are read one way
//! ([`Reply::read`]), and a model call's failure becomes an event in one place
//! ([`failure_event`]), for side calls and steps alike.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::driver::{Bounded, Driver, internal_failure};
use super::model_step::record_chat;
use super::reports::{ModelReports, Reports};
use crate::call::Timed;
use crate::cancel::Cancellation;
use crate::event::EventKind;
use crate::model::{CallPurpose, ModelContext, ModelError, ModelRequest, ModelResponse};
use crate::result::ExitReason;
use crate::telemetry;
use crate::types::{Action, Usage};

/// How an aside call ended, and what the layers reported meanwhile.
pub(super) struct Aside {
    pub(super) outcome: Bounded<Result<ModelResponse, ModelError>>,
    pub(super) reports: Vec<Timed>,
}

impl Driver<'_> {
    /// Asks the model `request` for `purpose` at `step`, bounded by the run's
    /// deadline — or, with `limit`, by that instead (the last answer, asked
    /// after the deadline passed) — and by the log moving.
    pub(super) async fn ask_aside(
        &self,
        request: &ModelRequest,
        step: u32,
        purpose: CallPurpose,
        limit: Option<Duration>,
    ) -> Aside {
        let engine = self.engine;
        let reports = Arc::new(Reports::default());
        let ctx = ModelContext {
            session_id: self.state.session_id().to_owned(),
            step,
            observer: Arc::new(ModelReports(Arc::clone(&reports))),
            cancel: Cancellation::new(),
            purpose,
            // A last answer is the run's answer, shown as it comes like a
            // step's; summaries and reflections are bookkeeping.
            deltas: engine
                .deltas
                .clone()
                .filter(|_| purpose == CallPurpose::LastAnswer),
        };
        let span = telemetry::chat_span(self.state.session_id(), step, &engine.model.identity());
        let call = engine
            .model
            .complete(request, &ctx)
            .instrument(span.clone());
        let outcome = match limit {
            Some(limit) => self.bounds.wait_at_most(limit, call).await,
            None => self.bounds.wait(call).await,
        };
        ctx.cancel.cancel();
        record_chat(&span, &outcome, engine.record_content);
        Aside {
            outcome,
            reports: reports.take(),
        }
    }
}

/// What a side call's answer holds.
pub(super) struct Reply {
    /// Its text, trimmed, when it holds any: a finish's answer, else the
    /// response's text — or, for output that could not be parsed, the raw text.
    pub(super) text: Option<String>,
    /// Why the output could not be parsed, when it could not.
    pub(super) invalid: Option<String>,
    /// What the call cost.
    pub(super) usage: Usage,
}

impl Reply {
    /// Reads a model call's outcome; a failure of the provider or of the
    /// runtime stays an error.
    pub(super) fn read(outcome: Result<ModelResponse, ModelError>) -> Result<Self, ModelError> {
        let nonempty = |text: String| Some(text.trim().to_owned()).filter(|text| !text.is_empty());
        match outcome {
            Ok(response) => {
                let answer = response
                    .actions
                    .into_iter()
                    .find_map(|action| match action {
                        Action::Finish(finish) => Some(finish.answer),
                        _ => None,
                    });
                Ok(Self {
                    text: answer.or(response.text).and_then(nonempty),
                    invalid: None,
                    usage: response.usage,
                })
            }
            Err(ModelError::InvalidOutput {
                raw,
                message,
                usage,
            }) => Ok(Self {
                text: nonempty(raw),
                invalid: Some(message),
                usage,
            }),
            Err(err) => Err(err),
        }
    }
}

/// The event a model call's failure is recorded as: output that could not be
/// parsed is rejected output, which the run goes on from (the model sees why);
/// a provider's failure that outlived its retries ends the run with
/// `provider_error`, naming the call (`during`); the runtime's own failure
/// ends it with `internal_error`.
pub(super) fn failure_event(err: ModelError, during: &str) -> EventKind {
    match err {
        ModelError::InvalidOutput {
            raw,
            message,
            usage,
        } => EventKind::ModelOutputRejected {
            raw,
            error: message,
            usage,
        },
        err @ (ModelError::Transient { .. } | ModelError::Fatal { .. }) => EventKind::Failed {
            exit_reason: ExitReason::ProviderError,
            budget: None,
            error: Some(format!("{during}: {err}")),
        },
        ModelError::Internal { message } => internal_failure(message),
    }
}
