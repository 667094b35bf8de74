//! Approval is a property of a tool, not of a strategy: a call of a tool whose
//! spec sets `needs_approval` waits for a human decision under every strategy
//! and policy — a model's tool call before it is dispatched (run here or handed
//! to a worker), a workflow's tool node before its work starts — unless the
//! session's recorded configuration waives it for that tool by name.

use serde_json::Value;

use super::driver::Driver;
use agent_core::types::ToolCall;

/// The key of the session configuration (`SessionStarted.config`) that lists
/// the tools whose `needs_approval` flag the session waives: an array of tool
/// names. It is read from the recorded configuration, so a resume, a worker on
/// another machine and a fork all obey what the session started with.
pub const WAIVE_APPROVAL: &str = "waive_approval";

/// Whether the recorded configuration `config` waives approval of `tool`.
pub fn approval_waived(config: &Value, tool: &str) -> bool {
    config
        .get(WAIVE_APPROVAL)
        .and_then(Value::as_array)
        .is_some_and(|tools| tools.iter().any(|name| name.as_str() == Some(tool)))
}

impl Driver<'_> {
    /// Whether a call of `tool` must wait for a human: its spec asks for that
    /// and the session does not waive it.
    pub(super) fn tool_needs_approval(&self, tool: &str) -> bool {
        self.engine
            .tools
            .get(tool)
            .is_some_and(|tool| tool.spec().needs_approval)
            && !approval_waived(self.state.config(), tool)
    }

    /// The calls among `calls` (of the current turn, about to be dispatched)
    /// that need a decision and have none yet.
    pub(super) fn awaiting_decision(&self, calls: &[ToolCall]) -> Vec<ToolCall> {
        calls
            .iter()
            .filter(|call| !self.state.is_decided(&call.id))
            .filter(|call| self.tool_needs_approval(&call.tool_name))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_tools_named_in_the_recorded_list_are_waived() {
        let config = json!({"waive_approval": ["deploy"]});
        assert!(approval_waived(&config, "deploy"));
        assert!(!approval_waived(&config, "delete"));
        assert!(!approval_waived(
            &json!({"waive_approval": "deploy"}),
            "deploy"
        ));
        assert!(!approval_waived(&Value::Null, "deploy"));
    }
}
