//! How a model call's outcome is read, the same for a step's call and a side
//! call: a side call's answer as text ([`Reply::read`]), a failure as the event
//! that records it ([`failure_event`]), and the outcome on the call's span
//! ([`record_chat`]).

use tracing::Span;

use super::driver::{Bounded, internal_failure};
use crate::telemetry;
use agent_core::event::EventKind;
use agent_core::model::{ModelError, ModelResponse};
use agent_core::result::ExitReason;
use agent_core::types::{Action, Usage};

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

/// Records what a model call gave on its span: tokens and the answering model,
/// or the error.
pub(super) fn record_chat(
    span: &Span,
    outcome: &Bounded<Result<ModelResponse, ModelError>>,
    content: bool,
) {
    match outcome {
        Bounded::Done(Ok(response)) => {
            record_usage(span, response.usage);
            if let Some(model) = &response.model {
                span.record("gen_ai.response.model", model.as_str());
            }
            if content {
                let output = serde_json::to_string(&response.actions).unwrap_or_default();
                span.record("gen_ai.output.messages", output);
            }
        }
        Bounded::Done(Err(err)) => {
            if let ModelError::InvalidOutput { usage, .. } = err {
                record_usage(span, *usage);
            }
            let kind = match err {
                ModelError::InvalidOutput { .. } => "invalid_output",
                ModelError::Transient { .. } => "transient",
                ModelError::Fatal { .. } => "fatal",
                ModelError::Internal { .. } => "internal",
            };
            telemetry::record_error(span, kind, &err.to_string());
        }
        Bounded::TimedOut => telemetry::record_error(span, "timeout", "a budget's deadline passed"),
        Bounded::Interrupted => {
            telemetry::record_error(span, "interrupted", "the session's log moved under the run");
        }
    }
}

/// Token counts on a span, as the signed integers OpenTelemetry attributes hold.
fn record_usage(span: &Span, usage: Usage) {
    let signed = |tokens: u64| i64::try_from(tokens).unwrap_or(i64::MAX);
    span.record("gen_ai.usage.input_tokens", signed(usage.input_tokens));
    span.record("gen_ai.usage.output_tokens", signed(usage.output_tokens));
}
