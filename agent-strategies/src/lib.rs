//! Execution strategies for the agent runtime, each behind a feature of its name.
//!
//! - `react`: [`ReAct`], think → act → observe with concurrent tool calls.

#[cfg(feature = "react")]
mod react;

#[cfg(feature = "react")]
pub use react::{REACT_INSTRUCTIONS, ReAct};
