//! OTLP/HTTP export of the runtime's spans and metrics, and the placement of
//! each run in its session's trace.

use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{MetricExporter, Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::{Layer, Registry};

use super::TelemetryError;
use super::ids::{root_span_id_of, trace_id_of};
use super::layer::TelemetryLayer;
use super::spans::is_runtime;

/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The exporting providers of the process.
pub(super) struct Export {
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
}

impl Export {
    /// Starts exporting to `endpoint` (the OTLP/HTTP base URL).
    pub(super) fn start(endpoint: &str, service: Option<&str>) -> Result<Self, TelemetryError> {
        let base = endpoint.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(TelemetryError::Setting(format!(
                "the OTLP endpoint `{endpoint}` must be an http:// or https:// URL, such as http://127.0.0.1:4318"
            )));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut resource = Resource::builder();
        match service {
            Some(name) => resource = resource.with_service_name(name.to_owned()),
            None if std::env::var_os("OTEL_SERVICE_NAME").is_none() => {
                resource = resource.with_service_name("agent");
            }
            None => {}
        }
        let resource = resource.build();
        let spans = SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{base}/v1/traces"))
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|err| TelemetryError::Exporter(err.to_string()))?;
        let metrics = MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{base}/v1/metrics"))
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|err| TelemetryError::Exporter(err.to_string()))?;
        let tracer_provider = SdkTracerProvider::builder()
            .with_batch_exporter(spans)
            .with_resource(resource.clone())
            .build();
        let meter_provider = SdkMeterProvider::builder()
            .with_periodic_exporter(metrics)
            .with_resource(resource)
            .build();
        agent_core::telemetry::on_run_span(place_in_session_trace);
        Ok(Self {
            tracer_provider,
            meter_provider,
        })
    }

    /// The layers that export: spans of the runtime (info and above), and the
    /// telemetry layer with the meter.
    pub(super) fn layers(&self) -> Vec<Box<dyn Layer<Registry> + Send + Sync>> {
        let tracer = self.tracer_provider.tracer("agent");
        let meter = self.meter_provider.meter("agent");
        vec![
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(filter_fn(|metadata| {
                    is_runtime(metadata.target()) && *metadata.level() <= Level::INFO
                }))
                .boxed(),
            TelemetryLayer::with_meter(&meter).boxed(),
        ]
    }

    /// Exports what is left and stops.
    pub(super) fn shutdown(self) {
        if let Err(err) = self.tracer_provider.shutdown() {
            eprintln!("agent: spans could not all be exported: {err}");
        }
        if let Err(err) = self.meter_provider.shutdown() {
            eprintln!("agent: metrics could not all be exported: {err}");
        }
    }
}

/// Makes a run's span a child of its session's root, so every run of a session
/// is in one trace.
fn place_in_session_trace(span: &tracing::Span, session_id: &str) {
    let parent = SpanContext::new(
        TraceId::from(trace_id_of(session_id)),
        SpanId::from(root_span_id_of(session_id)),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
}
