//! Built-in tools by name, as `--tools a,b,c` selects them.

use std::sync::Arc;

use agent_core::Tool;

use crate::calculator::Calculator;
use crate::durability::{AppendLine, Sleep};

/// Names of every built-in tool, sorted.
pub const BUILTIN_TOOLS: &[&str] = &["append_line", "calculator", "sleep"];

/// The built-in tool called `name`.
pub fn builtin_tool(name: &str) -> Option<Arc<dyn Tool>> {
    match name {
        "append_line" => Some(Arc::new(AppendLine)),
        "calculator" => Some(Arc::new(Calculator)),
        "sleep" => Some(Arc::new(Sleep)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_is_a_tool_of_that_name() {
        for name in BUILTIN_TOOLS {
            assert_eq!(builtin_tool(name).unwrap().spec().name, *name);
        }
        assert!(builtin_tool("nope").is_none());
    }
}
