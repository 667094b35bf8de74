//! The names of the `tracing` spans and targets a run emits, after the
//! OpenTelemetry GenAI semantic conventions — what a subscriber or an exporter
//! matches on: `invoke_agent` per run (drive) of a session, `chat` per model
//! call, `execute_tool` per tool call, and the targets of retry and circuit
//! reports. `agent-engine` makes the spans.
//!
//! An exporter can place each run's span in its session's trace with
//! [`on_run_span`]: resumed runs then continue the same trace.

use std::sync::OnceLock;

use tracing::Span;

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

/// Calls the hook registered with [`on_run_span`], if any, with a new run span
/// and its session id; whoever makes run spans calls it before entering one.
pub fn announce_run_span(span: &Span, session_id: &str) {
    if let Some(hook) = RUN_SPAN_HOOK.get() {
        hook(span, session_id);
    }
}
