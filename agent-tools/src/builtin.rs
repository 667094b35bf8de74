//! Built-in tools by name, as `--tools a,b,c` selects them.

use std::sync::Arc;

use agent_core::Tool;

use crate::calculator::Calculator;

/// Names of every built-in tool, sorted.
pub const BUILTIN_TOOLS: &[&str] = &["calculator"];

/// The built-in tool called `name`.
pub fn builtin_tool(name: &str) -> Option<Arc<dyn Tool>> {
    match name {
        "calculator" => Some(Arc::new(Calculator)),
        _ => None,
    }
}
