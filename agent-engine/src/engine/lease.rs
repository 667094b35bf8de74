//! The lease keeper: one engine drives a session at a time. The lease is taken
//! before the first write, renewed by a timer task (never by the driver, which may
//! be busy in a long call), and given up when the run ends. Each renewal also
//! returns the log's last seq, so the keeper notices writes by others — a cancel,
//! an approval, a conflicting writer — and wakes the driver.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::Engine;
use crate::error::EngineError;
use agent_core::event::EventKind;
use agent_core::id::new_session_id;
use agent_core::store::{EventStore, StoreError};

/// What the lease keeper tells the driver.
#[derive(Debug, Default)]
pub(super) struct LeaseSignal {
    /// Woken when the log moved under the driver or the lease was lost.
    pub(super) wake: Notify,
    /// The last seq the driver committed.
    pub(super) committed: AtomicU64,
    /// Set when another owner took the lease.
    pub(super) lost: AtomicBool,
    /// Woken when a message that interrupts arrived: a model call in flight
    /// is abandoned for it (nothing else is).
    pub(super) interrupt: Notify,
}

impl LeaseSignal {
    /// Records that the log is known to end at `seq`.
    pub(super) fn committed_up_to(&self, seq: u64) {
        self.committed.store(seq, Ordering::Release);
    }

    /// The last seq known to be committed by the driver.
    pub(super) fn last_committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// Whether another owner took the lease.
    pub(super) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }
}

/// A held lease and the timer task that renews it.
pub(super) struct Lease {
    session_id: String,
    owner: String,
    keeper: JoinHandle<()>,
}

impl Lease {
    /// Takes the lease on `session_id` and starts renewing it, telling the driver
    /// through `signal`; fails with [`StoreError::Leased`] while another live
    /// engine holds it.
    pub(super) async fn acquire(
        engine: &Engine,
        session_id: &str,
        signal: Arc<LeaseSignal>,
    ) -> Result<Self, EngineError> {
        let owner = new_session_id();
        engine
            .store
            .acquire_lease(session_id, &owner, engine.lease_ttl)
            .await?;
        let keeper = tokio::spawn(renew(
            Arc::clone(&engine.store),
            session_id.to_owned(),
            owner.clone(),
            engine.lease_ttl,
            engine.lease_renewal,
            signal,
        ));
        Ok(Self {
            session_id: session_id.to_owned(),
            owner,
            keeper,
        })
    }

    /// Stops renewing and gives the lease up. A failed release only delays the
    /// next owner until the lease expires, so it is not an error.
    pub(super) async fn release(self, engine: &Engine) {
        self.keeper.abort();
        let _ = engine
            .store
            .release_lease(&self.session_id, &self.owner)
            .await;
    }
}

impl Drop for Lease {
    /// A lease dropped without a release (its run was abandoned) stops renewing and
    /// expires.
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// What others wrote after the driver's last commit.
enum Foreign {
    /// Only events that leave the driver's work valid (a pause request, a
    /// queued message): its next commit places its events after them.
    Commuting,
    /// Such events, one of them a message that abandons a model call in flight.
    Interrupting,
    /// Anything else (a cancel, a decision, another writer), or a log that
    /// cannot be read: the driver reloads.
    Other,
}

async fn foreign_writes(store: &dyn EventStore, session_id: &str, committed: u64) -> Foreign {
    let Ok(events) = store.load_after(session_id, committed).await else {
        return Foreign::Other;
    };
    let interrupts = |event: &agent_core::event::Event| {
        matches!(
            event.kind,
            agent_core::event::EventKind::MessageQueued {
                interrupt: true,
                ..
            }
        )
    };
    if events.is_empty() || !events.iter().all(|event| commutes(&event.kind)) {
        Foreign::Other
    } else if events.iter().any(interrupts) {
        Foreign::Interrupting
    } else {
        Foreign::Commuting
    }
}

/// Renews the lease every `period`, waking the driver when the log holds events
/// it did not write (other than a pause request or a queued message) or the
/// lease was lost to another owner; a message that interrupts wakes a model
/// call in flight. A failed renewal is retried next period.
async fn renew(
    store: Arc<dyn EventStore>,
    session_id: String,
    owner: String,
    ttl: Duration,
    period: Duration,
    signal: Arc<LeaseSignal>,
) {
    loop {
        tokio::time::sleep(period).await;
        match store.renew_lease(&session_id, &owner, ttl).await {
            Ok(last_seq) => {
                let committed = signal.last_committed();
                if last_seq > committed {
                    match foreign_writes(store.as_ref(), &session_id, committed).await {
                        Foreign::Commuting => {}
                        Foreign::Interrupting => signal.interrupt.notify_waiters(),
                        Foreign::Other => signal.wake.notify_one(),
                    }
                }
            }
            // A lease that is gone without another owner (a PostgreSQL server
            // that crashed empties its unlogged lease table; a lease that
            // expired while the store was away) is taken again: the log's seq
            // still stops any write that another driver made stale.
            Err(StoreError::LeaseLost(_)) => {
                match store.acquire_lease(&session_id, &owner, ttl).await {
                    Ok(()) => tracing::info!(session_id, "lease taken again after it was gone"),
                    Err(StoreError::Leased { .. }) => {
                        signal.lost.store(true, Ordering::Release);
                        signal.wake.notify_one();
                        return;
                    }
                    Err(_) => {}
                }
            }
            Err(_) => {}
        }
    }
}

/// Whether an event another process appended while a driver works leaves
/// that work valid, so the driver's events may simply follow it: a pause
/// request or a queued message, which change no status and which the driver
/// acts on at its next step boundary.
pub(super) fn commutes(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::PauseRequested { .. } | EventKind::MessageQueued { .. }
    )
}
