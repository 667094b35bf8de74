//! The text of responses being written, fanned out by session within one
//! process: workers report to a [`DeltaHub`], and whoever follows a session
//! live (the server's event streams) subscribes to it. Nothing is kept: a delta
//! nobody listens to is dropped, and a listener that falls behind loses the
//! oldest ones (the stored response is complete either way).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agent_core::delta::{DeltaSink, ModelDelta};
use tokio::sync::broadcast;

/// How many deltas a slow listener may be behind before it loses some.
const BACKLOG: usize = 1024;

/// A delta of one session's response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDelta {
    /// The step the response is for.
    pub step: u32,
    /// What arrived.
    pub delta: ModelDelta,
}

/// Deltas by session, for every listener in this process.
#[derive(Clone, Default)]
pub struct DeltaHub {
    channels: Arc<Mutex<HashMap<String, broadcast::Sender<SessionDelta>>>>,
}

impl std::fmt::Debug for DeltaHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaHub")
            .field("sessions", &self.listened())
            .finish()
    }
}

impl DeltaHub {
    /// A hub nobody listens to yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The deltas of `session_id` from now on.
    pub fn subscribe(&self, session_id: &str) -> broadcast::Receiver<SessionDelta> {
        let mut channels = self.lock();
        channels.retain(|_, sender| sender.receiver_count() > 0);
        channels
            .entry(session_id.to_owned())
            .or_insert_with(|| broadcast::channel(BACKLOG).0)
            .subscribe()
    }

    /// How many sessions have listeners now.
    pub fn listened(&self) -> usize {
        self.lock()
            .values()
            .filter(|sender| sender.receiver_count() > 0)
            .count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, broadcast::Sender<SessionDelta>>> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl DeltaSink for DeltaHub {
    fn delta(&self, session_id: &str, step: u32, delta: ModelDelta) {
        let mut channels = self.lock();
        let Some(sender) = channels.get(session_id) else {
            return;
        };
        if sender.send(SessionDelta { step, delta }).is_err() {
            channels.remove(session_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_get_their_sessions_deltas_and_nobody_else_keeps_any() {
        let hub = DeltaHub::new();
        hub.delta("s1", 1, ModelDelta::Text("lost".into()));
        let mut first = hub.subscribe("s1");
        let mut other = hub.subscribe("s2");
        hub.delta("s1", 2, ModelDelta::Started);
        hub.delta("s1", 2, ModelDelta::Text("84".into()));
        assert_eq!(first.try_recv().unwrap().delta, ModelDelta::Started);
        assert_eq!(
            first.try_recv().unwrap(),
            SessionDelta {
                step: 2,
                delta: ModelDelta::Text("84".into())
            }
        );
        assert!(first.try_recv().is_err());
        assert!(other.try_recv().is_err());
        drop(first);
        drop(other);
        hub.delta("s1", 3, ModelDelta::Text("nobody".into()));
        assert_eq!(hub.listened(), 0);
    }
}
