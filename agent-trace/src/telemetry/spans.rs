//! What the telemetry layer keeps of each span of the runtime (target `agent*`):
//! its session, the GenAI attributes it carries, when it started — for log lines
//! that name their session and trace, and for metrics measured when it closes.

use std::time::Instant;

use tracing::field::{Field, Visit};

/// The fields of a runtime span the telemetry reads.
#[derive(Debug, Clone)]
pub struct SpanInfo {
    /// The span's name (`invoke_agent`, `chat`, `execute_tool`, …).
    pub name: &'static str,
    /// When it was created.
    pub started: Instant,
    /// `gen_ai.conversation.id`: the session.
    pub session_id: Option<String>,
    /// `gen_ai.provider.name`.
    pub provider: Option<String>,
    /// `gen_ai.request.model`.
    pub request_model: Option<String>,
    /// `gen_ai.tool.name`.
    pub tool: Option<String>,
    /// `error.type`, once a failure was recorded.
    pub error_type: Option<String>,
    /// `gen_ai.usage.input_tokens`.
    pub input_tokens: Option<u64>,
    /// `gen_ai.usage.output_tokens`.
    pub output_tokens: Option<u64>,
}

impl SpanInfo {
    /// A span named `name`, created now, no fields read yet.
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            started: Instant::now(),
            session_id: None,
            provider: None,
            request_model: None,
            tool: None,
            error_type: None,
            input_tokens: None,
            output_tokens: None,
        }
    }
}

impl Visit for SpanInfo {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "gen_ai.conversation.id" => &mut self.session_id,
            "gen_ai.provider.name" => &mut self.provider,
            "gen_ai.request.model" => &mut self.request_model,
            "gen_ai.tool.name" => &mut self.tool,
            "error.type" => &mut self.error_type,
            _ => return,
        };
        *slot = Some(value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "gen_ai.usage.input_tokens" => self.input_tokens = Some(value),
            "gen_ai.usage.output_tokens" => self.output_tokens = Some(value),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, u64::try_from(value).unwrap_or(0));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if matches!(
            field.name(),
            "gen_ai.conversation.id" | "gen_ai.provider.name" | "gen_ai.request.model"
        ) {
            self.record_str(field, format!("{value:?}").trim_matches('"'));
        }
    }
}

/// Whether a span or event comes from the runtime's crates.
pub fn is_runtime(target: &str) -> bool {
    target.starts_with("agent")
}
