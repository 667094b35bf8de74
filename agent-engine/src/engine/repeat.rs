//! The repeated-call guard: a call identical to an earlier one (same tool, same
//! arguments) of an idempotent tool whose successful result is already in the
//! history is not run again. Its observation quotes the earlier result and asks
//! the model to finish or change course, so a small model that keeps repeating
//! itself is steered instead of burning its step budget.

use agent_core::history::NOT_RUN_AGAIN;
use agent_core::types::ToolCall;

/// The longest part of an earlier result quoted back, in characters.
const QUOTED_CHARS: usize = 2000;

/// What the model is told instead of running `call` again.
pub(super) fn repeat_message(call: &ToolCall, earlier_id: &str, result: &str) -> String {
    let quoted: String = result.chars().take(QUOTED_CHARS).collect();
    let cut = if quoted.len() < result.len() {
        " …"
    } else {
        ""
    };
    format!(
        "{NOT_RUN_AGAIN}`{}` was already called with exactly these arguments ({earlier_id}) and returned: {quoted}{cut}\nUse that result. If it answers the task, finish now with the answer; otherwise call a different tool or change the arguments.",
        call.tool_name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, left: i64) -> ToolCall {
        ToolCall {
            id: id.into(),
            tool_name: "calculator".into(),
            arguments: json!({"left": left, "operation": "multiply", "right": 7}),
        }
    }

    #[test]
    fn the_message_quotes_the_result_and_says_what_to_do() {
        let message = repeat_message(&call("call_2_1", 12), "call_1_1", "84");
        assert!(message.contains("(call_1_1) and returned: 84"), "{message}");
        assert!(message.contains("finish now"), "{message}");
        let long = "x".repeat(QUOTED_CHARS + 10);
        assert!(repeat_message(&call("c", 1), "b", &long).contains("x …"));
    }
}
