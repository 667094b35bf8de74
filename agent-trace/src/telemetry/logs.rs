//! Log lines as JSON, one object per line: time, level, target, message, the
//! event's fields, and — inside a run — the span it happened in, its session
//! (`session_id`), the session's `trace_id` and, when spans are exported, the
//! OpenTelemetry `span_id`, so a line leads to its trace.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use super::ids::trace_id_hex;
use super::spans::SpanInfo;

/// The JSON line format.
pub struct JsonLines {
    /// Whether an OpenTelemetry layer is installed (then lines carry `span_id`).
    pub exported: bool,
}

struct JsonFields(Map<String, Value>);

impl Visit for JsonFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::from(format!("{value:?}")));
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        let mut fields = JsonFields(Map::new());
        event.record(&mut fields);
        let mut line = Map::new();
        let now = std::time::SystemTime::now();
        line.insert(
            "timestamp".into(),
            Value::from(humantime::format_rfc3339_micros(now).to_string()),
        );
        line.insert("level".into(), Value::from(metadata.level().as_str()));
        line.insert("target".into(), Value::from(metadata.target()));
        if let Some(message) = fields.0.remove("message") {
            line.insert("message".into(), message);
        }
        if !fields.0.is_empty() {
            line.insert("fields".into(), Value::Object(fields.0));
        }
        if let Some(scope) = ctx.event_scope() {
            let mut leaf = None;
            let mut session = None;
            for span in scope {
                leaf.get_or_insert_with(|| (span.id(), span.name()));
                if session.is_none() {
                    session = span
                        .extensions()
                        .get::<SpanInfo>()
                        .and_then(|info| info.session_id.clone());
                }
            }
            if let Some((id, name)) = leaf {
                line.insert("span".into(), Value::from(name));
                if self.exported
                    && let Some(span_id) = exported_span_id(&id)
                {
                    line.insert("span_id".into(), Value::from(span_id));
                }
            }
            if let Some(session) = session {
                line.insert("trace_id".into(), Value::from(trace_id_hex(&session)));
                line.insert("session_id".into(), Value::from(session));
            }
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// The OpenTelemetry span id of span `id`, as hex.
#[cfg(feature = "otel")]
fn exported_span_id(id: &tracing::span::Id) -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    tracing::dispatcher::get_default(|dispatch| {
        let context = tracing_opentelemetry::get_otel_context(id, dispatch)?;
        let span = context.span();
        let span_context = span.span_context();
        span_context
            .is_valid()
            .then(|| span_context.span_id().to_string())
    })
}

#[cfg(not(feature = "otel"))]
fn exported_span_id(_id: &tracing::span::Id) -> Option<String> {
    None
}
