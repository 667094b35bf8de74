//! Tools for the agent runtime: a registry that validates every call's arguments
//! against the tool's JSON Schema before its handler runs, and the built-in tools.

mod builtin;
pub mod calculator;
mod durability;
mod registry;
mod validate;
mod workspace;

pub use builtin::{BUILTIN_TOOLS, builtin_tool};
pub use calculator::Calculator;
pub use durability::{AppendLine, MAX_SLEEP_SECONDS, Sleep};
pub use registry::{RegistryError, ToolRegistry, Validated};
pub use validate::{ArgumentValidator, InvalidSchema};
pub use workspace::resolve_in_workspace;
