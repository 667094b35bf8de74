//! The layer that keeps [`SpanInfo`] for every runtime span and, with an
//! OpenTelemetry meter, turns spans and events into the GenAI metrics when they
//! close: `gen_ai.client.operation.duration` and `gen_ai.client.token.usage` per
//! model call, counters of steps, tool calls, tool errors, retries and circuit
//! breaker transitions.

#[cfg(feature = "otel")]
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::spans::{SpanInfo, is_runtime};

/// Keeps what telemetry needs of runtime spans; records metrics when given a meter.
pub struct TelemetryLayer {
    #[cfg(feature = "otel")]
    instruments: Option<super::metrics::Instruments>,
}

impl TelemetryLayer {
    /// A layer that records no metrics.
    pub fn without_metrics() -> Self {
        Self {
            #[cfg(feature = "otel")]
            instruments: None,
        }
    }

    /// A layer that records the metrics with `meter`.
    #[cfg(feature = "otel")]
    pub fn with_meter(meter: &opentelemetry::metrics::Meter) -> Self {
        Self {
            instruments: Some(super::metrics::Instruments::new(meter)),
        }
    }
}

impl<S> Layer<S> for TelemetryLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !is_runtime(attrs.metadata().target()) {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut info = SpanInfo::new(attrs.metadata().name());
        attrs.record(&mut info);
        if info.session_id.is_none() {
            info.session_id = span
                .scope()
                .skip(1)
                .find_map(|parent| parent.extensions().get::<SpanInfo>()?.session_id.clone());
        }
        span.extensions_mut().insert(info);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(info) = span.extensions_mut().get_mut::<SpanInfo>()
        {
            values.record(info);
        }
    }

    #[cfg_attr(not(feature = "otel"), allow(unused_variables))]
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        #[cfg(feature = "otel")]
        if let Some(instruments) = &self.instruments {
            let target = event.metadata().target();
            if target == agent_core::telemetry::RETRY_TARGET
                || target == agent_core::telemetry::CIRCUIT_TARGET
            {
                let mut fields = Fields::default();
                event.record(&mut fields);
                instruments.report(target, &fields.0);
            }
        }
    }

    #[cfg_attr(not(feature = "otel"), allow(unused_variables))]
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        #[cfg(feature = "otel")]
        if let Some(instruments) = &self.instruments
            && let Some(span) = ctx.span(&id)
            && let Some(info) = span.extensions().get::<SpanInfo>()
        {
            instruments.closed(info);
        }
    }
}

/// The text fields of an event.
#[cfg(feature = "otel")]
#[derive(Default)]
pub(super) struct Fields(pub(super) Vec<(&'static str, String)>);

#[cfg(feature = "otel")]
impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name(), value.to_owned()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name(), format!("{value:?}")));
    }
}
