//! The strategy work a driver has in flight: the tasks, and the key each runs.

use std::collections::HashMap;

use tokio::task::JoinSet;

use agent_core::strategy::WorkRecord;

/// Strategy work in flight, by key.
#[derive(Default)]
pub(super) struct WorkSet {
    pub(super) running: JoinSet<WorkRecord>,
    pub(super) keys: HashMap<tokio::task::Id, String>,
}

impl WorkSet {
    pub(super) fn is_running(&self, key: &str) -> bool {
        self.keys.values().any(|running| running == key)
    }
}
