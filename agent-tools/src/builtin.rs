//! Built-in tools by name, as `--tools a,b,c` selects them.

use std::sync::Arc;

use agent_core::tool::Tool;

use crate::calculator::Calculator;
use crate::code::{CommandPolicy, EditFile, ListDir, ReadFile, RunCommand, Search, WriteFile};
use crate::confine::ChildPolicy;
use crate::durability::{AppendLine, Sleep};
use crate::typed::Typed;

/// Names of every built-in tool, sorted.
pub const BUILTIN_TOOLS: &[&str] = &[
    "append_line",
    "calculator",
    "edit_file",
    "list_dir",
    "read_file",
    "run_command",
    "search",
    "sleep",
    "write_file",
];

/// Settings some built-in tools need.
#[derive(Debug, Clone, Default)]
pub struct BuiltinOptions {
    /// Programs `run_command` may start (`--allow-cmd`).
    pub allowed_commands: Vec<String>,
    /// How `run_command` starts them.
    pub child: ChildPolicy,
}

/// The built-in tool called `name`.
pub fn builtin_tool(name: &str, options: &BuiltinOptions) -> Option<Arc<dyn Tool>> {
    Some(match name {
        "append_line" => Arc::new(Typed::<AppendLine>::new()),
        "calculator" => Arc::new(Typed::<Calculator>::new()),
        "edit_file" => Arc::new(Typed::<EditFile>::new()),
        "list_dir" => Arc::new(Typed::<ListDir>::new()),
        "read_file" => Arc::new(Typed::<ReadFile>::new()),
        "run_command" => Arc::new(Typed::<RunCommand>::with_state(CommandPolicy {
            allowed: options.allowed_commands.clone(),
            child: options.child.clone(),
        })),
        "search" => Arc::new(Typed::<Search>::new()),
        "sleep" => Arc::new(Typed::<Sleep>::new()),
        "write_file" => Arc::new(Typed::<WriteFile>::new()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_is_a_tool_of_that_name() {
        for name in BUILTIN_TOOLS {
            assert_eq!(
                builtin_tool(name, &BuiltinOptions::default())
                    .unwrap()
                    .spec()
                    .name,
                *name
            );
        }
        assert!(builtin_tool("nope", &BuiltinOptions::default()).is_none());
    }
}
