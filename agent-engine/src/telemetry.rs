//! The `tracing` spans a run emits, named and attributed after the OpenTelemetry
//! GenAI semantic conventions (the names are `agent_core::telemetry`'s): an
//! `invoke_agent {agent}` span per run (drive) of a session, `chat {model}`
//! per model call, `execute_tool {tool}` per tool call. Outcomes are recorded
//! on the span when known (tokens, the response model, `error.type` and an
//! error status on failures). Message content is recorded only when the engine
//! is told to ([`EngineBuilder::record_content`](crate::EngineBuilder::record_content)).

use tracing::Span;
use tracing::field::Empty;

use agent_core::event::EventKind;
use agent_core::model::ModelIdentity;
use agent_core::telemetry::{CHAT, EXECUTE_TOOL, INVOKE_AGENT, announce_run_span};
use agent_core::types::ToolCall;

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
    announce_run_span(&span, session_id);
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
