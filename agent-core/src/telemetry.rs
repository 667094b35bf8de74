//! The `tracing` spans a run emits, named and attributed after the OpenTelemetry
//! GenAI semantic conventions, so that any `tracing` subscriber sees them and an
//! OpenTelemetry bridge exports them as they are: `invoke_agent {agent}` per run
//! (drive) of a session, `chat {model}` per model call, `execute_tool {tool}` per
//! tool call. Outcomes are recorded on the span when known (tokens, the response
//! model, `error.type` and an error status on failures). Message content is
//! recorded only when the engine is told to (`EngineBuilder::record_content`
//! in `agent-engine`).
//!
//! An exporter can place each run's span in its session's trace with
//! [`on_run_span`]: resumed runs then continue the same trace.

use std::sync::OnceLock;

use tracing::Span;
use tracing::field::Empty;

use crate::event::EventKind;
use crate::model::ModelIdentity;
use crate::types::ToolCall;

/// Span name of a run of a session.
pub const INVOKE_AGENT: &str = "invoke_agent";
/// Span name of a model call.
pub const CHAT: &str = "chat";
/// Span name of a tool call.
pub const EXECUTE_TOOL: &str = "execute_tool";
/// `tracing` target of retry reports (a model or tool layer retried).
pub const RETRY_TARGET: &str = "agent::retry";
/// `tracing` target of circuit breaker transitions.
pub const CIRCUIT_TARGET: &str = "agent::circuit";

type RunSpanHook = Box<dyn Fn(&Span, &str) + Send + Sync>;

static RUN_SPAN_HOOK: OnceLock<RunSpanHook> = OnceLock::new();

/// Registers `hook`, called with every new run span and its session id before the
/// span is entered (to give it a parent, such as the session's trace). Only the
/// first registration in a process counts; returns whether this one did.
pub fn on_run_span(hook: impl Fn(&Span, &str) + Send + Sync + 'static) -> bool {
    RUN_SPAN_HOOK.set(Box::new(hook)).is_ok()
}

/// The span of one run of `session_id`.
pub fn run_span(session_id: &str, agent: &str, model: &ModelIdentity) -> Span {
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = %format!("{INVOKE_AGENT} {agent}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = INVOKE_AGENT,
        gen_ai.agent.name = agent,
        gen_ai.conversation.id = session_id,
        gen_ai.provider.name = model.provider.as_str(),
        gen_ai.request.model = model.model.as_str(),
        agent.exit_reason = Empty,
        error.type = Empty,
    );
    if let Some(hook) = RUN_SPAN_HOOK.get() {
        hook(&span, session_id);
    }
    span
}

/// The span of model call `step` of `session_id`.
pub fn chat_span(session_id: &str, step: u32, model: &ModelIdentity) -> Span {
    tracing::info_span!(
        "chat",
        otel.name = %format!("{CHAT} {}", model.model),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = CHAT,
        gen_ai.conversation.id = session_id,
        gen_ai.provider.name = model.provider.as_str(),
        gen_ai.request.model = model.model.as_str(),
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        agent.step = step,
        error.type = Empty,
    )
}

/// The span of one tool call of `session_id`.
pub fn tool_span(session_id: &str, call: &ToolCall, record_content: bool) -> Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format!("{EXECUTE_TOOL} {}", call.tool_name),
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = EXECUTE_TOOL,
        gen_ai.conversation.id = session_id,
        gen_ai.tool.name = call.tool_name.as_str(),
        gen_ai.tool.call.id = call.id.as_str(),
        gen_ai.tool.type = "function",
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
    );
    if record_content {
        span.record("gen_ai.tool.call.arguments", call.arguments.to_string());
    }
    span
}

/// Marks `span` failed: `error.type` and an error status with `message`.
pub fn record_error(span: &Span, error_type: &str, message: &str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_description", message);
}

/// Records a tool call's outcome, the event that records its result, on its span.
pub fn record_tool_outcome(span: &Span, result: &EventKind, record_content: bool) {
    match result {
        EventKind::ActionCompleted { observation } => {
            if record_content {
                span.record("gen_ai.tool.call.result", observation.content.as_str());
            }
            if observation.is_error {
                record_error(span, "tool_error", &observation.content);
            }
        }
        EventKind::Failed { error, .. } => {
            record_error(
                span,
                "internal",
                error.as_deref().unwrap_or("the tool failed"),
            );
        }
        _ => {}
    }
}
