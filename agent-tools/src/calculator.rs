//! The `calculator` tool: one arithmetic operation on two numbers.

use agent_core::tool::{ToolContext, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

/// Computes `left <operation> right` for two numbers. operation is one of add, subtract, multiply, divide.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, crate::Derive)]
#[serde(deny_unknown_fields)]
#[tool(
    crate = "crate",
    idempotent,
    output = "the result as a number",
    errors = "division by zero, or a result too large to represent"
)]
pub struct Calculator {
    /// The left operand.
    pub left: f64,
    /// What to do with the operands.
    pub operation: Operation,
    /// The right operand.
    pub right: f64,
}

/// An arithmetic operation: `add` is `left + right`, `subtract` is `left - right`,
/// `multiply` is `left * right`, `divide` is `left / right` (dividing by zero is an
/// error). The variants carry no doc comments of their own, so that the schema
/// the model sees is a plain `enum` of these four names.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Add,
    Subtract,
    Multiply,
    Divide,
}

impl Calculator {
    /// The result, or the reason there is none.
    pub fn evaluate(self) -> Result<f64, ToolError> {
        let value = match self.operation {
            Operation::Add => self.left + self.right,
            Operation::Subtract => self.left - self.right,
            Operation::Multiply => self.left * self.right,
            Operation::Divide if self.right == 0.0 => {
                return Err(ToolError::failed("division by zero"));
            }
            Operation::Divide => self.left / self.right,
        };
        if value.is_finite() {
            Ok(value)
        } else {
            Err(ToolError::failed("the result is too large to represent"))
        }
    }

    async fn run(self, _ctx: &ToolContext) -> Result<String, ToolError> {
        self.evaluate().map(format_number)
    }
}

/// Formats a number the way a person writes it: `84`, not `84.0`.
pub fn format_number(value: f64) -> String {
    const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;
    if value.fract() == 0.0 && value.abs() < EXACT_INTEGER_LIMIT {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::TypedTool;

    #[test]
    fn the_schema_requires_all_three_fields_and_nothing_else() {
        let schema = &Calculator::spec().input_schema;
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        let mut required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["left", "operation", "right"]);
        assert_eq!(schema["properties"]["left"]["type"], "number");
        assert_eq!(
            schema["properties"]["operation"]["enum"],
            json!(["add", "subtract", "multiply", "divide"])
        );
        assert!(schema.get("$schema").is_none());
        assert!(!schema.to_string().contains("$ref"));
    }

    #[test]
    fn every_operation_in_the_schema_is_accepted_by_the_handler() {
        let operations = Calculator::spec().input_schema["properties"]["operation"]["enum"].clone();
        for operation in operations.as_array().unwrap() {
            let args: Calculator =
                serde_json::from_value(json!({"left": 6, "operation": operation, "right": 3}))
                    .unwrap();
            assert!(args.evaluate().is_ok(), "{operation}");
        }
    }

    #[test]
    fn arithmetic_and_its_errors() {
        let eval = |left: f64, operation, right: f64| {
            Calculator {
                left,
                operation,
                right,
            }
            .evaluate()
        };
        assert_eq!(
            format_number(eval(12.0, Operation::Multiply, 7.0).unwrap()),
            "84"
        );
        assert_eq!(
            format_number(eval(1.0, Operation::Divide, 4.0).unwrap()),
            "0.25"
        );
        assert_eq!(
            format_number(eval(2.0, Operation::Subtract, 5.0).unwrap()),
            "-3"
        );
        assert_eq!(
            eval(1.0, Operation::Divide, 0.0),
            Err(ToolError::failed("division by zero"))
        );
        assert!(eval(f64::MAX, Operation::Multiply, 10.0).is_err());
    }
}
