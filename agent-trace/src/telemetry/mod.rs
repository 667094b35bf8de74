//! The telemetry of a process: log lines on stderr (readable, or JSON with
//! `session_id`, `trace_id` and `span_id`), at the level `RUST_LOG` or
//! `--log-level` asks for (default `warn`), never on stdout; and, with the
//! feature `otel` and an OTLP endpoint (`--otlp-endpoint` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT`), the runtime's spans and GenAI metrics exported
//! over OTLP/HTTP with protobuf. Each run of a session is a span of the
//! session's trace ([`trace_id_of`]), so resumed runs continue it.
//! [`Telemetry::shutdown`] flushes what is left; call it before the process exits.

mod ids;
mod layer;
mod logs;
#[cfg(feature = "otel")]
mod metrics;
mod spans;

use std::str::FromStr;

use tracing_subscriber::filter::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

pub use self::ids::{trace_id_hex, trace_id_of};
pub use self::layer::TelemetryLayer;
pub use self::logs::JsonLines;
pub use self::spans::SpanInfo;

/// The log level when neither `RUST_LOG` nor `--log-level` says.
pub const DEFAULT_LOG_LEVEL: &str = "warn";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// For people (colours on a terminal).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = TelemetryError;

    fn from_str(text: &str) -> Result<Self, TelemetryError> {
        match text {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(TelemetryError::Setting(format!(
                "log format `{other}` is not known; use text or json"
            ))),
        }
    }
}

/// What a process's telemetry is asked to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// How log lines are written.
    pub log_format: LogFormat,
    /// Which log lines are written: `RUST_LOG` directives (default [`DEFAULT_LOG_LEVEL`]).
    pub log_filter: Option<String>,
    /// The OTLP/HTTP endpoint (`http://HOST:4318`); `/v1/traces` and `/v1/metrics`
    /// are added. None: nothing is exported.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported resource (default `OTEL_SERVICE_NAME`, else `agent`).
    pub service_name: Option<String>,
}

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A setting is unusable.
    #[error("{0}")]
    Setting(String),
    /// The exporter could not be built.
    #[error("the OTLP exporter cannot be set up: {0}")]
    Exporter(String),
    /// Another subscriber was installed first.
    #[error("telemetry is already set up in this process")]
    AlreadySet,
}

/// The telemetry of the process; [`Telemetry::shutdown`] (or dropping it) flushes
/// the spans and metrics not yet exported.
pub struct Telemetry {
    #[cfg(feature = "otel")]
    export: Option<otel::Export>,
}

impl Telemetry {
    /// Installs the process's subscriber as `config` asks. Call it outside an
    /// async runtime (the exporter keeps a thread of its own).
    pub fn install(config: &TelemetryConfig) -> Result<Self, TelemetryError> {
        let filter = config.log_filter.as_deref().unwrap_or(DEFAULT_LOG_LEVEL);
        let filter = EnvFilter::try_new(filter).map_err(|err| {
            TelemetryError::Setting(format!("log level `{filter}` is not usable: {err}"))
        })?;
        #[cfg(feature = "otel")]
        let export = match &config.otlp_endpoint {
            Some(endpoint) => Some(otel::Export::start(
                endpoint,
                config.service_name.as_deref(),
            )?),
            None => None,
        };
        #[cfg(feature = "otel")]
        let exported = export.is_some();
        #[cfg(not(feature = "otel"))]
        let exported = false;
        #[cfg(not(feature = "otel"))]
        if config.otlp_endpoint.is_some() {
            return Err(TelemetryError::Setting(
                "this build has no OpenTelemetry export (feature `otel`)".into(),
            ));
        }
        // Runtime spans are only kept when something reads them (JSON lines name
        // their session, exporters send them): otherwise a span costs nothing.
        let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> =
            vec![match config.log_format {
                LogFormat::Text => fmt
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                    .with_filter(filter)
                    .boxed(),
                LogFormat::Json => fmt
                    .event_format(JsonLines { exported })
                    .with_filter(filter)
                    .boxed(),
            }];
        #[cfg(feature = "otel")]
        if let Some(export) = &export {
            layers.extend(export.layers());
        }
        if !exported && config.log_format == LogFormat::Json {
            layers.push(TelemetryLayer::without_metrics().boxed());
        }
        tracing::subscriber::set_global_default(Registry::default().with(layers))
            .map_err(|_| TelemetryError::AlreadySet)?;
        Ok(Self {
            #[cfg(feature = "otel")]
            export,
        })
    }

    /// Whether spans and metrics are exported.
    pub fn exporting(&self) -> bool {
        #[cfg(feature = "otel")]
        return self.export.is_some();
        #[cfg(not(feature = "otel"))]
        false
    }

    /// Exports what is left and stops the exporter; says on stderr what could
    /// not be exported.
    pub fn shutdown(mut self) {
        self.flush();
    }

    fn flush(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(export) = self.export.take() {
            export.shutdown();
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(feature = "otel")]
mod otel;
