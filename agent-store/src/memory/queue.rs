//! The work queue of a [`MemoryStore`]: rows in memory, expiry by this process's
//! clock, wake-ups through a `Notify`.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;

use crate::support::ttl_millis;
use agent_core::event::now_millis;
use agent_core::store::StoreError;
use agent_core::store::queue::{
    ActionClaim, QueueView, QueuedAction, QueuedActionView, QueuedSessionView, SessionClaim,
    WorkQueue,
};

use super::{MemoryStore, locked};

/// A claim: the worker and when it expires, in Unix milliseconds.
#[derive(Debug, Clone)]
struct Claim {
    worker: String,
    expires: u64,
    renewed: u64,
}

impl Claim {
    fn live(&self, now: u64) -> bool {
        self.expires > now
    }
}

#[derive(Debug)]
struct SessionRow {
    generation: u64,
    queued_at: u64,
    claim: Option<(Claim, u64)>,
}

#[derive(Debug)]
struct ActionRow {
    action: QueuedAction,
    attempts: u32,
    queued_at: u64,
    claim: Option<Claim>,
}

/// The rows of the queue.
#[derive(Debug, Default)]
pub(super) struct MemoryQueue {
    sessions: HashMap<String, SessionRow>,
    actions: HashMap<(String, String), ActionRow>,
}

fn claim(worker: &str, ttl: Duration, now: u64) -> Claim {
    Claim {
        worker: worker.to_owned(),
        expires: now + ttl_millis(ttl),
        renewed: now,
    }
}

impl MemoryStore {
    /// Ends `worker`'s claim of an action; `uncount` takes its attempt back
    /// (the call never started).
    fn give_back_action(
        &self,
        session_id: &str,
        call_id: &str,
        worker: &str,
        uncount: bool,
    ) -> Result<(), StoreError> {
        let mut queue = locked(&self.queue)?;
        if let Some(row) = queue
            .actions
            .get_mut(&(session_id.to_owned(), call_id.to_owned()))
            && row
                .claim
                .as_ref()
                .is_some_and(|claim| claim.worker == worker)
        {
            row.claim = None;
            if uncount {
                row.attempts = row.attempts.saturating_sub(1);
            }
        }
        drop(queue);
        self.work.notify_waiters();
        Ok(())
    }
}

#[async_trait]
impl WorkQueue for MemoryStore {
    async fn enqueue_session(&self, session_id: &str) -> Result<(), StoreError> {
        {
            let mut queue = locked(&self.queue)?;
            let row = queue
                .sessions
                .entry(session_id.to_owned())
                .or_insert_with(|| SessionRow {
                    generation: 0,
                    queued_at: now_millis(),
                    claim: None,
                });
            row.generation += 1;
        }
        self.work.notify_waiters();
        Ok(())
    }

    async fn claim_session(
        &self,
        worker: &str,
        ttl: Duration,
    ) -> Result<Option<SessionClaim>, StoreError> {
        let now = now_millis();
        let mut queue = locked(&self.queue)?;
        let Some((session_id, row)) = queue
            .sessions
            .iter_mut()
            .filter(|(_, row)| row.claim.as_ref().is_none_or(|(claim, _)| !claim.live(now)))
            .min_by_key(|(id, row)| (row.queued_at, (*id).clone()))
        else {
            return Ok(None);
        };
        row.claim = Some((claim(worker, ttl, now), row.generation));
        Ok(Some(SessionClaim {
            session_id: session_id.clone(),
            generation: row.generation,
        }))
    }

    async fn finish_session(&self, claim: &SessionClaim, worker: &str) -> Result<(), StoreError> {
        let mut queue = locked(&self.queue)?;
        let Some(row) = queue.sessions.get_mut(&claim.session_id) else {
            return Ok(());
        };
        if row
            .claim
            .as_ref()
            .is_some_and(|(held, _)| held.worker == worker)
        {
            if row.generation == claim.generation {
                queue.sessions.remove(&claim.session_id);
            } else {
                row.claim = None;
                drop(queue);
                self.work.notify_waiters();
            }
        }
        Ok(())
    }

    async fn release_session(&self, session_id: &str, worker: &str) -> Result<(), StoreError> {
        let mut queue = locked(&self.queue)?;
        if let Some(row) = queue.sessions.get_mut(session_id)
            && row
                .claim
                .as_ref()
                .is_some_and(|(held, _)| held.worker == worker)
        {
            row.claim = None;
        }
        drop(queue);
        self.work.notify_waiters();
        Ok(())
    }

    async fn enqueue_actions(&self, actions: &[QueuedAction]) -> Result<(), StoreError> {
        {
            let mut queue = locked(&self.queue)?;
            let now = now_millis();
            for action in actions {
                queue
                    .actions
                    .entry((action.session_id.clone(), action.call.id.clone()))
                    .or_insert_with(|| ActionRow {
                        action: action.clone(),
                        attempts: 0,
                        queued_at: now,
                        claim: None,
                    });
            }
        }
        self.work.notify_waiters();
        Ok(())
    }

    async fn claim_action(
        &self,
        worker: &str,
        tools: Option<&[String]>,
        ttl: Duration,
    ) -> Result<Option<ActionClaim>, StoreError> {
        let now = now_millis();
        let mut queue = locked(&self.queue)?;
        let Some(row) = queue
            .actions
            .values_mut()
            .filter(|row| row.claim.as_ref().is_none_or(|claim| !claim.live(now)))
            .filter(|row| tools.is_none_or(|tools| tools.contains(&row.action.call.tool_name)))
            .min_by_key(|row| (row.queued_at, row.action.call.id.clone()))
        else {
            return Ok(None);
        };
        row.attempts += 1;
        row.claim = Some(claim(worker, ttl, now));
        Ok(Some(ActionClaim {
            action: row.action.clone(),
            attempt: row.attempts,
        }))
    }

    async fn finish_action(&self, session_id: &str, call_id: &str) -> Result<(), StoreError> {
        locked(&self.queue)?
            .actions
            .remove(&(session_id.to_owned(), call_id.to_owned()));
        Ok(())
    }

    async fn release_action(
        &self,
        session_id: &str,
        call_id: &str,
        worker: &str,
    ) -> Result<(), StoreError> {
        self.give_back_action(session_id, call_id, worker, true)
    }

    async fn abandon_action(
        &self,
        session_id: &str,
        call_id: &str,
        worker: &str,
    ) -> Result<(), StoreError> {
        self.give_back_action(session_id, call_id, worker, false)
    }

    async fn heartbeat(&self, worker: &str, ttl: Duration) -> Result<(), StoreError> {
        let now = now_millis();
        let mut queue = locked(&self.queue)?;
        let fresh = claim(worker, ttl, now);
        for row in queue.sessions.values_mut() {
            if let Some((held, _)) = &mut row.claim
                && held.worker == worker
            {
                *held = fresh.clone();
            }
        }
        for row in queue.actions.values_mut() {
            if let Some(held) = &mut row.claim
                && held.worker == worker
            {
                *held = fresh.clone();
            }
        }
        Ok(())
    }

    async fn wait_for_work(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.work.notified()).await;
    }

    async fn queue_view(&self) -> Result<QueueView, StoreError> {
        let now = now_millis();
        let queue = locked(&self.queue)?;
        let mut sessions: Vec<QueuedSessionView> = queue
            .sessions
            .iter()
            .map(|(session_id, row)| QueuedSessionView {
                session_id: session_id.clone(),
                queued_at: row.queued_at,
                claimed_by: row
                    .claim
                    .as_ref()
                    .filter(|(claim, _)| claim.live(now))
                    .map(|(claim, _)| claim.worker.clone()),
            })
            .collect();
        sessions.sort_by(|a, b| (a.queued_at, &a.session_id).cmp(&(b.queued_at, &b.session_id)));
        let mut actions: Vec<(u64, QueuedActionView)> = queue
            .actions
            .values()
            .map(|row| {
                let live = row.claim.as_ref().filter(|claim| claim.live(now));
                (
                    row.queued_at,
                    QueuedActionView {
                        session_id: row.action.session_id.clone(),
                        call_id: row.action.call.id.clone(),
                        tool_name: row.action.call.tool_name.clone(),
                        attempts: row.attempts,
                        claimed_by: live.map(|claim| claim.worker.clone()),
                        lease_age_ms: live.map(|claim| now.saturating_sub(claim.renewed)),
                    },
                )
            })
            .collect();
        actions.sort_by(|a, b| (a.0, &a.1.call_id).cmp(&(b.0, &b.1.call_id)));
        Ok(QueueView {
            sessions,
            actions: actions.into_iter().map(|(_, view)| view).collect(),
        })
    }
}
