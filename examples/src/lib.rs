//! Runnable examples of the agent runtime; see the example targets.
