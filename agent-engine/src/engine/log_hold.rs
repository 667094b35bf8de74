//! The driver's hold on its session's log, one value: the lease keeper's
//! signal (the seq this driver has written up to, whether others wrote after
//! it, whether the lease was lost) and the commit state — what was recorded
//! and not yet written, and where this driver last saved a snapshot and
//! fsynced.

use std::sync::Arc;
use std::time::Instant;

use super::lease::LeaseSignal;
use agent_core::event::Event;

/// What the driver holds of its session's log.
pub(super) struct LogHold {
    /// Shared with the lease keeper.
    pub(super) signal: Arc<LeaseSignal>,
    /// Events applied to the state and waiting for the next commit.
    pub(super) unflushed: Vec<Event>,
    /// The steps used when each of `unflushed` was recorded.
    pub(super) unflushed_steps: Vec<u32>,
    /// Seq of the last snapshot this driver saved (0 before its first).
    pub(super) snapshot_at: u64,
    /// When this driver's last commit with fsync went through (its start
    /// before the first).
    pub(super) durable_at: Instant,
}

impl LogHold {
    /// The hold of a driver starting at `last_seq`, at `started`.
    pub(super) fn new(signal: Arc<LeaseSignal>, last_seq: u64, started: Instant) -> Self {
        signal.committed_up_to(last_seq);
        Self {
            signal,
            unflushed: Vec::new(),
            unflushed_steps: Vec::new(),
            snapshot_at: 0,
            durable_at: started,
        }
    }
}
