//! Tools for the agent runtime: a registry that validates every call's arguments
//! against the tool's JSON Schema before its handler runs, and the built-in tools.

mod builtin;
pub mod calculator;
mod registry;
mod validate;

pub use builtin::{BUILTIN_TOOLS, builtin_tool};
pub use calculator::Calculator;
pub use registry::{RegistryError, ToolRegistry, Validated};
pub use validate::{ArgumentValidator, InvalidSchema};
