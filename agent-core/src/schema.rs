//! JSON Schemas: derived from Rust types ([`input_schema_for`]), compiled once
//! ([`ArgumentValidator`]), with errors turned into one message that names every
//! offending field. Tool arguments and a session's typed output are checked with
//! them.

use jsonschema::error::ValidationErrorKind;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The JSON Schema of `T` as a tool input or output schema: subschemas inlined
/// (no `$ref`), no `$schema`/`title`, and `additionalProperties: false` at the
/// top level so that a misspelled field is an error rather than silently ignored.
pub fn input_schema_for<T: JsonSchema>() -> Value {
    let mut schema = SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>();
    schema.remove("$schema");
    schema.remove("title");
    schema.remove("description");
    if let Some(object) = schema.as_object_mut() {
        object.insert("additionalProperties".into(), Value::Bool(false));
    }
    schema.to_value()
}

/// A JSON Schema (a tool's input, a session's output), compiled once.
#[derive(Debug, Clone)]
pub struct ArgumentValidator {
    validator: jsonschema::Validator,
    allowed_fields: Vec<String>,
}

/// A schema that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON Schema: {0}")]
pub struct InvalidSchema(pub String);

impl ArgumentValidator {
    /// Compiles `schema`.
    pub fn new(schema: &Value) -> Result<Self, InvalidSchema> {
        let validator =
            jsonschema::validator_for(schema).map_err(|err| InvalidSchema(err.to_string()))?;
        let allowed_fields = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default();
        Ok(Self {
            validator,
            allowed_fields,
        })
    }

    /// Checks `arguments`; the error names each field that is wrong and how.
    pub fn validate(&self, arguments: &Value) -> Result<(), String> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(arguments)
            .map(|error| {
                let path = error.instance_path().to_string();
                let place = if path.is_empty() {
                    String::new()
                } else {
                    format!(" in `{}`", path.trim_start_matches('/'))
                };
                match error.kind() {
                    ValidationErrorKind::Required { property } => {
                        let name = property
                            .as_str()
                            .map_or_else(|| property.to_string(), str::to_owned);
                        format!("missing required field `{name}`{place}")
                    }
                    ValidationErrorKind::AdditionalProperties { unexpected } => {
                        let names: Vec<String> =
                            unexpected.iter().map(|name| format!("`{name}`")).collect();
                        let allowed = if path.is_empty() && !self.allowed_fields.is_empty() {
                            format!(" (allowed: {})", self.allowed_fields.join(", "))
                        } else {
                            String::new()
                        };
                        format!("unexpected field {}{place}{allowed}", names.join(", "))
                    }
                    _ if path.is_empty() => error.to_string(),
                    _ => format!("field `{}`: {error}", path.trim_start_matches('/')),
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn validator() -> ArgumentValidator {
        ArgumentValidator::new(&json!({
            "type": "object",
            "properties": {
                "left": {"type": "number"},
                "op": {"type": "string", "enum": ["add", "divide"]}
            },
            "required": ["left", "op"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    #[test]
    fn valid_arguments_pass() {
        assert_eq!(
            validator().validate(&json!({"left": 1, "op": "add"})),
            Ok(())
        );
    }

    #[test]
    fn each_problem_names_its_field() {
        let message = validator()
            .validate(&json!({"left": "x", "opp": "add"}))
            .unwrap_err();
        assert!(message.contains("missing required field `op`"), "{message}");
        assert!(
            message.contains("unexpected field `opp` (allowed: left, op)"),
            "{message}"
        );
        assert!(message.contains("field `left`:"), "{message}");
        let message = validator()
            .validate(&json!({"left": 1, "op": "power"}))
            .unwrap_err();
        assert!(message.starts_with("field `op`:"), "{message}");
    }

    #[test]
    fn a_broken_schema_is_refused() {
        assert!(ArgumentValidator::new(&json!({"type": "no-such-type"})).is_err());
    }
}
