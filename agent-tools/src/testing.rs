//! Contract checks for tests: does a tool's handler accept what its spec promises?

use agent_core::tool::{Tool, ToolContext, ToolError};
use serde_json::Value;

/// Calls `tool` once per value of every `enum` in its input schema's top-level
/// properties, starting from `example` (valid arguments), and fails if the handler
/// calls any of those values invalid: a spec that drifted from its handler.
pub async fn check_enum_values(
    tool: &dyn Tool,
    example: &Value,
    ctx: &ToolContext,
) -> Result<(), String> {
    let schema = &tool.spec().input_schema;
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (field, property) in properties {
        let values = property
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .or_else(|| {
                property
                    .get("oneOf")
                    .and_then(Value::as_array)
                    .map(|options| {
                        options
                            .iter()
                            .filter_map(|option| option.get("const").cloned())
                            .collect()
                    })
            })
            .unwrap_or_default();
        for value in values {
            let mut arguments = example.clone();
            if let Some(object) = arguments.as_object_mut() {
                object.insert(field.clone(), value.clone());
            }
            if let Err(ToolError::InvalidArguments(message)) = tool.call(arguments, ctx).await {
                return Err(format!(
                    "tool `{}` promises {value} for `{field}` but its handler refuses it: {message}",
                    tool.spec().name
                ));
            }
        }
    }
    Ok(())
}
