//! `#[derive(Tool)]` through the facade: the spec it writes, validation before the
//! handler, a derived tool in a ReAct session, and the spec–handler check.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;

use agent::prelude::*;
use agent::tools::Typed;
use agent::tools::TypedTool;
use agent::tools::testing::check_enum_values;
use serde::Deserialize;
use serde_json::json;

/// Converts a temperature between units.
#[derive(Deserialize, schemars::JsonSchema, Tool)]
#[tool(idempotent, timeout_secs = 2)]
struct ConvertTemperature {
    /// The value to convert.
    value: f64,
    /// Unit of the value.
    from: Unit,
    /// Wanted unit; the same as `from` when absent.
    to: Option<Unit>,
}

#[derive(Deserialize, schemars::JsonSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Celsius,
    Fahrenheit,
}

impl ConvertTemperature {
    async fn run(self, _ctx: &ToolContext) -> Result<String, ToolError> {
        let celsius = match self.from {
            Unit::Celsius => self.value,
            Unit::Fahrenheit => (self.value - 32.0) / 1.8,
        };
        let out = match self.to.unwrap_or(self.from) {
            Unit::Celsius => celsius,
            Unit::Fahrenheit => celsius * 1.8 + 32.0,
        };
        Ok(format!("{out:.1}"))
    }
}

/// Reads nothing.
#[derive(Deserialize, schemars::JsonSchema, Tool)]
#[tool(name = "noop", description = "Does nothing, loudly.", needs_approval)]
struct Nothing {}

impl Nothing {
    async fn run(self, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(format!("nothing for {}", ctx.call_id).into())
    }
}

#[test]
fn the_spec_comes_from_the_struct_and_its_attributes() {
    let spec = <ConvertTemperature as TypedTool>::spec();
    assert_eq!(spec.name, "convert_temperature");
    assert_eq!(spec.description, "Converts a temperature between units.");
    assert!(spec.idempotent);
    assert!(!spec.needs_approval);
    let schema = &spec.input_schema;
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["required"], json!(["value", "from"]));
    assert_eq!(
        schema["properties"]["value"]["description"],
        "The value to convert."
    );
    assert!(!schema.to_string().contains("$ref"), "{schema}");
    assert!(schema.get("$schema").is_none());
    assert_eq!(
        <ConvertTemperature as TypedTool>::timeout(),
        Some(std::time::Duration::from_secs(2))
    );

    let noop = <Nothing as TypedTool>::spec();
    assert_eq!(noop.name, "noop");
    assert_eq!(noop.description, "Does nothing, loudly.");
    assert!(noop.needs_approval);
    assert!(!noop.idempotent);
}

#[tokio::test]
async fn every_enum_value_of_the_schema_is_accepted_by_the_handler() {
    let tool = Typed::<ConvertTemperature>::new();
    let ctx = ToolContext::new("s", "c", Arc::from(std::path::Path::new(".")));
    check_enum_values(&tool, &json!({"value": 10, "from": "celsius"}), &ctx)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_derived_tool_runs_in_a_react_session_with_validated_arguments() {
    let model = ScriptedModel::from_values(vec![
        json!({"type": "tool_call", "tool_name": "convert_temperature",
               "arguments": {"value": 100, "from": "celsius", "to": "kelvin"}}),
        json!({"type": "tool_call", "tool_name": "convert_temperature",
               "arguments": {"value": 100, "from": "celsius", "to": "fahrenheit", "precision": 2}}),
        json!({"type": "tool_call", "tool_name": "convert_temperature",
               "arguments": {"value": 100, "from": "celsius", "to": "fahrenheit"}}),
        json!({"type": "finish", "answer": "212"}),
    ])
    .unwrap();
    let mut tools = ToolRegistry::new();
    tools.register_typed::<ConvertTemperature>().unwrap();
    tools.register_typed::<Nothing>().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::builder(Arc::new(model), Arc::new(ReAct::new()))
        .tools(tools.into_toolbox())
        .store(store.clone())
        .build();
    let result = engine.run("Convert 100 °C to °F", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let observations: Vec<(bool, String)> = store
        .load(&result.session_id)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.kind {
            agent::event::EventKind::ActionCompleted { observation } => {
                Some((observation.is_error, observation.content))
            }
            _ => None,
        })
        .collect();
    assert!(
        observations[0].0 && observations[0].1.contains("field `to`"),
        "{observations:?}"
    );
    assert!(
        observations[1].0 && observations[1].1.contains("unexpected field `precision`"),
        "{observations:?}"
    );
    assert_eq!(observations[2], (false, "212.0".to_owned()));
}
