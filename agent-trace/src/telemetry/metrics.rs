//! The OpenTelemetry instruments of the runtime and what each span or event adds
//! to them.

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};

use super::spans::SpanInfo;

/// The instruments, made once per meter.
pub struct Instruments {
    duration: Histogram<f64>,
    tokens: Histogram<u64>,
    tool_duration: Histogram<f64>,
    steps: Counter<u64>,
    tool_calls: Counter<u64>,
    tool_errors: Counter<u64>,
    retries: Counter<u64>,
    transitions: Counter<u64>,
    runs: Counter<u64>,
}

impl Instruments {
    /// The instruments of `meter`.
    pub fn new(meter: &Meter) -> Self {
        Self {
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("Duration of GenAI operations (model calls).")
                .build(),
            tokens: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens used per model call, by gen_ai.token.type.")
                .build(),
            tool_duration: meter
                .f64_histogram("agent.tool.duration")
                .with_unit("s")
                .with_description("Duration of tool calls.")
                .build(),
            steps: meter
                .u64_counter("agent.steps")
                .with_description("Model calls made (steps, valid or not).")
                .build(),
            tool_calls: meter
                .u64_counter("agent.tool.calls")
                .with_description("Tool calls run.")
                .build(),
            tool_errors: meter
                .u64_counter("agent.tool.errors")
                .with_description("Tool calls whose result is an error.")
                .build(),
            retries: meter
                .u64_counter("agent.retries")
                .with_description("Retries of model and tool calls, by kind.")
                .build(),
            transitions: meter
                .u64_counter("agent.circuit.transitions")
                .with_description("Circuit breaker state changes, by tool and state.")
                .build(),
            runs: meter
                .u64_counter("agent.runs")
                .with_description("Runs (drives) of sessions, by how they ended.")
                .build(),
        }
    }

    /// Adds a closed span.
    pub fn closed(&self, info: &SpanInfo) {
        let seconds = info.started.elapsed().as_secs_f64();
        let error = info
            .error_type
            .iter()
            .map(|error| KeyValue::new("error.type", error.clone()));
        match info.name {
            agent_core::telemetry::CHAT => {
                let mut attributes = vec![
                    KeyValue::new("gen_ai.operation.name", "chat"),
                    KeyValue::new(
                        "gen_ai.provider.name",
                        info.provider.clone().unwrap_or_default(),
                    ),
                    KeyValue::new(
                        "gen_ai.request.model",
                        info.request_model.clone().unwrap_or_default(),
                    ),
                ];
                for (kind, count) in [("input", info.input_tokens), ("output", info.output_tokens)]
                {
                    if let Some(count) = count {
                        let mut with_type = attributes.clone();
                        with_type.push(KeyValue::new("gen_ai.token.type", kind));
                        self.tokens.record(count, &with_type);
                    }
                }
                self.steps.add(1, &attributes);
                attributes.extend(error);
                self.duration.record(seconds, &attributes);
            }
            agent_core::telemetry::EXECUTE_TOOL => {
                let tool = [KeyValue::new(
                    "gen_ai.tool.name",
                    info.tool.clone().unwrap_or_default(),
                )];
                self.tool_calls.add(1, &tool);
                if info.error_type.is_some() {
                    self.tool_errors.add(1, &tool);
                }
                let attributes: Vec<KeyValue> = tool.into_iter().chain(error).collect();
                self.tool_duration.record(seconds, &attributes);
            }
            agent_core::telemetry::INVOKE_AGENT => {
                let outcome = info.error_type.clone().unwrap_or_else(|| "ok".into());
                self.runs.add(1, &[KeyValue::new("outcome", outcome)]);
            }
            _ => {}
        }
    }

    /// Adds a retry or breaker event with its text `fields`.
    pub fn report(&self, target: &str, fields: &[(&'static str, String)]) {
        let attributes: Vec<KeyValue> = fields
            .iter()
            .filter(|(name, _)| matches!(*name, "kind" | "tool" | "state"))
            .map(|(name, value)| KeyValue::new(*name, value.clone()))
            .collect();
        if target == agent_core::telemetry::RETRY_TARGET {
            self.retries.add(1, &attributes);
        } else {
            self.transitions.add(1, &attributes);
        }
    }
}
