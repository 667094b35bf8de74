//! Text a model produces while it is still producing it, for a person watching:
//! a streaming provider reports each piece to the call's [`DeltaSink`]. Deltas
//! are never recorded — only the complete response is an event — so durability
//! and replay do not depend on them, and a call without a sink is not streamed.

use std::sync::Arc;

/// A piece of a response as it is generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelDelta {
    /// A new attempt at the response began: a retry, or a fallback model,
    /// starts the response over, so text shown for an earlier attempt of the
    /// same step is superseded (a watcher that already showed it should not
    /// show it twice).
    Started,
    /// The next piece of the response's text.
    Text(String),
}

/// Where a streaming call reports its deltas. Called from the task making the
/// call, so it must not block for long.
pub trait DeltaSink: Send + Sync {
    /// `delta` of the response the model is giving `session_id` for `step`.
    fn delta(&self, session_id: &str, step: u32, delta: ModelDelta);
}

/// A sink that drops every delta, for callers who want streaming requests
/// (`--stream --json`) without showing their text.
#[derive(Debug, Clone, Copy, Default)]
pub struct IgnoreDeltas;

impl DeltaSink for IgnoreDeltas {
    fn delta(&self, _session_id: &str, _step: u32, _delta: ModelDelta) {}
}

/// Every sink in a list gets every delta.
impl DeltaSink for Vec<Arc<dyn DeltaSink>> {
    fn delta(&self, session_id: &str, step: u32, delta: ModelDelta) {
        for sink in self {
            sink.delta(session_id, step, delta.clone());
        }
    }
}
