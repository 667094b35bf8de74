//! Typed final output: a JSON Schema the finish's answer must satisfy. A finish
//! whose answer is not JSON, or breaks the schema, is refused like a completion
//! gate refuses one — the model is told which field is wrong and answers again —
//! and an accepted answer is recorded as JSON in the `finished` event, so the
//! `RunResult` carries it as `output`.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde_json::Value;

use agent_core::event::EventKind;
use agent_core::guard::{Checkpoint, Guard, GuardContext, Verdict};
use agent_core::schema::{ArgumentValidator, InvalidSchema, input_schema_for};

/// A compiled output schema.
#[derive(Debug, Clone)]
pub struct OutputSchema {
    schema: Arc<Value>,
    validator: ArgumentValidator,
}

impl OutputSchema {
    /// Compiles `schema`; a schema that is not valid JSON Schema is refused.
    pub fn new(schema: Value) -> Result<Self, InvalidSchema> {
        let validator = ArgumentValidator::new(&schema)?;
        Ok(Self {
            schema: Arc::new(schema),
            validator,
        })
    }

    /// The schema derived from `T` (as tool inputs are: no unknown fields at
    /// the top level).
    pub fn of<T: JsonSchema>() -> Result<Self, InvalidSchema> {
        Self::new(input_schema_for::<T>())
    }

    /// The schema itself.
    pub fn schema(&self) -> &Arc<Value> {
        &self.schema
    }

    /// The answer as JSON if it is JSON (a Markdown code fence around it is
    /// allowed) that satisfies the schema; otherwise what is wrong, naming each
    /// field.
    pub fn check(&self, answer: &str) -> Result<Value, String> {
        let text = without_fence(answer);
        let value: Value =
            serde_json::from_str(text).map_err(|err| format!("the answer is not JSON ({err})"))?;
        self.validator.validate(&value)?;
        Ok(value)
    }

    /// What the instructions add so that a model without a native response
    /// format knows the answer's shape.
    pub fn instructions(&self) -> String {
        format!(
            "When you finish, the answer must be a single JSON value, with no other text, that satisfies this JSON Schema:\n{}",
            self.schema
        )
    }
}

/// `text` without a surrounding Markdown code fence (```json … ```).
fn without_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(inner) = trimmed
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
    else {
        return trimmed;
    };
    let inner = inner.strip_prefix("json").unwrap_or(inner);
    inner.trim()
}

/// The guard that refuses a finish whose answer does not satisfy the schema.
pub struct OutputGuard(pub Arc<OutputSchema>);

#[async_trait]
impl Guard for OutputGuard {
    async fn check(&self, checkpoint: Checkpoint<'_>, _ctx: &GuardContext<'_>) -> Verdict {
        let Checkpoint::Finish(answer) = checkpoint else {
            return Verdict::Proceed;
        };
        match self.0.check(answer) {
            Ok(_) => Verdict::Proceed,
            Err(problem) => Verdict::Intervene(EventKind::FinishRejected {
                answer: answer.to_owned(),
                reason: format!("the answer does not satisfy the output schema: {problem}"),
                details: format!(
                    "Finish again with an answer that is a single JSON value satisfying this schema:\n{}",
                    self.0.schema
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> OutputSchema {
        OutputSchema::new(json!({
            "type": "object",
            "properties": {"product": {"type": "integer"}, "unit": {"type": "string"}},
            "required": ["product"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    #[test]
    fn a_valid_answer_is_its_json_value_even_inside_a_fence() {
        assert_eq!(
            schema().check(r#"{"product": 84}"#),
            Ok(json!({"product": 84}))
        );
        assert_eq!(
            schema().check("```json\n{\"product\": 84}\n```"),
            Ok(json!({"product": 84}))
        );
    }

    #[test]
    fn a_wrong_answer_names_the_field() {
        let problem = schema().check(r#"{"product": "84"}"#).unwrap_err();
        assert!(problem.contains("field `product`"), "{problem}");
        let problem = schema().check(r#"{"unit": "none"}"#).unwrap_err();
        assert!(
            problem.contains("missing required field `product`"),
            "{problem}"
        );
        let problem = schema().check("eighty-four").unwrap_err();
        assert!(problem.starts_with("the answer is not JSON"), "{problem}");
    }

    #[test]
    fn a_schema_derived_from_a_type_checks_its_fields() {
        #[derive(JsonSchema, serde::Deserialize)]
        struct Product {
            product: i64,
        }
        let schema = OutputSchema::of::<Product>().unwrap();
        let value = schema.check(r#"{"product": 84}"#).unwrap();
        assert_eq!(
            serde_json::from_value::<Product>(value).unwrap().product,
            84
        );
        assert!(schema.check(r#"{"product": 84, "extra": 1}"#).is_err());
    }
}
