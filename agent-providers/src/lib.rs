//! Model adapters for the agent runtime.
//!
//! - [`wire`]: the strict JSON action format shared by text-based models.
//! - `scripted` (feature `scripted`): [`ScriptedModel`], answers written in advance.

pub mod wire;

#[cfg(feature = "scripted")]
mod scripted;

#[cfg(feature = "scripted")]
pub use scripted::{ScriptError, ScriptedModel};
