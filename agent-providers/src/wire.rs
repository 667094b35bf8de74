//! The action wire format: one JSON object per model response, parsed strictly.
//!
//! ```json
//! {"type":"tool_call","tool_name":"calculator","arguments":{"left":1,"operation":"add","right":2}}
//! {"type":"tool_calls","calls":[{"tool_name":"calculator","arguments":{}}, …]}
//! {"type":"finish","answer":"…"}
//! {"type":"plan","steps":[{"goal":"…","tool":"calculator"}, …]}   (planning strategies; `tool` optional)
//! ```
//!
//! Unknown, missing or mistyped fields, an unknown `type`, repeated keys and
//! non-JSON text are all rejected with a message saying exactly what is wrong.

use agent_core::strict_json;
use agent_core::types::{Action, Finish, PlanStep, ToolCall};
use serde::Deserialize;
use serde_json::{Map, Value};

/// What the model is reminded of after output that does not parse.
pub const WIRE_FORMAT_HINT: &str = "answer with exactly one JSON object: \
{\"type\":\"tool_call\",\"tool_name\":NAME,\"arguments\":{...}}, \
{\"type\":\"tool_calls\",\"calls\":[{\"tool_name\":NAME,\"arguments\":{...}}, ...]} or \
{\"type\":\"finish\",\"answer\":TEXT}";

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum WireAction {
    ToolCall {
        tool_name: String,
        arguments: Map<String, Value>,
    },
    ToolCalls {
        calls: Vec<WireCall>,
    },
    Finish {
        answer: String,
    },
    Plan {
        steps: Vec<WirePlanStep>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePlanStep {
    goal: String,
    #[serde(default)]
    tool: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireCall {
    tool_name: String,
    arguments: Map<String, Value>,
}

/// Parses one response in the wire format. Tool calls get the ids
/// `call_<step>_<n>`, n counting from 1 in the order written.
pub fn parse_actions(text: &str, step: u32) -> Result<Vec<Action>, String> {
    let value = strict_json::from_str(text.trim())
        .map_err(|err| format!("the output is not valid JSON ({err}); {WIRE_FORMAT_HINT}"))?;
    if !value.is_object() {
        return Err(format!(
            "the output is JSON but not an object; {WIRE_FORMAT_HINT}"
        ));
    }
    let action: WireAction = serde_json::from_value(value)
        .map_err(|err| format!("the action is not valid: {err}; {WIRE_FORMAT_HINT}"))?;
    let calls = match action {
        WireAction::Finish { answer } => return Ok(vec![Action::Finish(Finish { answer })]),
        WireAction::Plan { steps } => {
            if steps.is_empty() {
                return Err("a plan needs at least one step in `steps`".into());
            }
            if let Some(index) = steps.iter().position(|step| step.goal.trim().is_empty()) {
                return Err(format!(
                    "step {} of the plan has an empty `goal`",
                    index + 1
                ));
            }
            let steps = steps
                .into_iter()
                .map(|step| PlanStep {
                    goal: step.goal,
                    tool: step.tool,
                })
                .collect();
            return Ok(vec![Action::Plan { steps }]);
        }
        WireAction::ToolCall {
            tool_name,
            arguments,
        } => vec![WireCall {
            tool_name,
            arguments,
        }],
        WireAction::ToolCalls { calls } if calls.is_empty() => {
            return Err(format!(
                "`tool_calls` needs at least one call in `calls`; {WIRE_FORMAT_HINT}"
            ));
        }
        WireAction::ToolCalls { calls } => calls,
    };
    calls
        .into_iter()
        .enumerate()
        .map(|(index, call)| {
            if call.tool_name.trim().is_empty() {
                return Err(format!("call {} has an empty `tool_name`", index + 1));
            }
            Ok(Action::ToolCall(ToolCall {
                id: format!("call_{step}_{}", index + 1),
                tool_name: call.tool_name,
                arguments: Value::Object(call.arguments),
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parses_each_action_type() {
        let actions = parse_actions(
            r#"{"type":"tool_call","tool_name":"calculator","arguments":{"left":1}}"#,
            3,
        )
        .unwrap();
        assert_eq!(
            actions,
            [Action::ToolCall(ToolCall {
                id: "call_3_1".into(),
                tool_name: "calculator".into(),
                arguments: json!({"left": 1}),
            })]
        );
        let actions = parse_actions(
            r#"{"type":"tool_calls","calls":[{"tool_name":"a","arguments":{}},{"tool_name":"b","arguments":{}}]}"#,
            1,
        )
        .unwrap();
        assert_eq!(actions.len(), 2);
        assert_eq!(
            parse_actions(r#" {"type":"finish","answer":"42"} "#, 1).unwrap(),
            [Action::Finish(Finish {
                answer: "42".into()
            })]
        );
    }

    fn error_of(text: &str) -> String {
        parse_actions(text, 1).unwrap_err()
    }

    #[test]
    fn says_exactly_what_is_wrong() {
        assert!(error_of("I think 84").contains("not valid JSON"));
        assert!(error_of("[1]").contains("not an object"));
        assert!(error_of(r#"{"type":"finsh","answer":"x"}"#).contains("unknown variant `finsh`"));
        assert!(error_of(r#"{"answer":"x"}"#).contains("missing field `type`"));
        assert!(error_of(r#"{"type":"finish"}"#).contains("missing field `answer`"));
        assert!(
            error_of(r#"{"type":"finish","answer":"x","why":1}"#).contains("unknown field `why`")
        );
        assert!(error_of(r#"{"type":"finish","answer":7}"#).contains("invalid type: integer `7`"));
        assert!(
            error_of(r#"{"type":"tool_call","tool_name":"c","arguments":"{}"}"#)
                .contains("invalid type: string")
        );
        assert!(
            error_of(r#"{"type":"tool_call","tool_name":"c","arguments":{"a":1,"a":2}}"#)
                .contains("duplicate key `a`")
        );
        assert!(error_of(r#"{"type":"tool_calls","calls":[]}"#).contains("at least one call"));
        assert!(error_of(r#"{"type":"plan","steps":[]}"#).contains("at least one step"));
        assert!(error_of(r#"{"type":"plan","steps":[{"goal":" "}]}"#).contains("empty `goal`"));
        assert!(
            error_of(r#"{"type":"plan","steps":[{"goal":"a","how":"b"}]}"#)
                .contains("unknown field `how`")
        );
        assert!(
            error_of(r#"{"type":"tool_calls","calls":[{"tool_name":"a","arguments":{},"x":1}]}"#)
                .contains("unknown field `x`")
        );
        assert!(
            error_of(r#"{"type":"tool_call","tool_name":" ","arguments":{}}"#)
                .contains("empty `tool_name`")
        );
    }
}
