//! Model adapters for the agent runtime.
//!
//! - [`wire`]: the strict JSON action format shared by text-based models.
//! - `scripted` (feature `scripted`): [`ScriptedModel`], answers written in advance.
//! - `replay` (feature `replay`): [`ReplayModel`], the responses of a recorded session.

pub mod wire;

#[cfg(feature = "scripted")]
mod scripted;

#[cfg(feature = "scripted")]
pub use scripted::{ScriptError, ScriptedModel};

#[cfg(feature = "replay")]
mod replay;

#[cfg(feature = "replay")]
pub use replay::ReplayModel;
