//! The `EventSink` trait: observers of committed events (traces, consoles, metrics).

use crate::event::Event;

/// A sink could not record an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event sink failed: {0}")]
pub struct SinkError(pub String);

/// Receives every event after it is committed to the store, in log order.
pub trait EventSink: Send + Sync {
    /// Records one event. `step` is the session's step count once the event applied.
    fn publish(&self, event: &Event, step: u32) -> Result<(), SinkError>;
}
