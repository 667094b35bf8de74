//! The work queue: an index over the logs of sessions waiting for a worker and
//! of tool calls waiting to run, so that workers on any machine claim work
//! without scanning logs. It is never a second truth: a queue entry lost or
//! repeated changes no result, because the log's seq and the session's lease
//! decide who writes, and a worker checks the log before it acts.
//!
//! A claim has an expiry (renewed by [`WorkQueue::heartbeat`]); a worker that dies
//! stops renewing, and its claims go to others when they expire. An action
//! claimed again after an expiry carries its attempt number, so a non-idempotent
//! call whose outcome is unknown is reported instead of run twice.

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;
use crate::types::ToolCall;

/// A tool call waiting to run.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedAction {
    /// Its session.
    pub session_id: String,
    /// The call, as dispatched.
    pub call: ToolCall,
    /// Whether running it twice is harmless (then an interrupted attempt is run again).
    pub idempotent: bool,
}

/// A session a worker claimed to drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionClaim {
    /// The session.
    pub session_id: String,
    /// How many times it had been queued when it was claimed; a queueing after the
    /// claim keeps it queued when the claim is finished.
    pub generation: u64,
}

/// An action a worker claimed to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionClaim {
    /// The action.
    pub action: QueuedAction,
    /// 1 for the first claim; more when earlier claims expired (their workers died).
    pub attempt: u32,
}

/// A queued session, for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedSessionView {
    /// The session.
    pub session_id: String,
    /// When it was queued, in Unix milliseconds.
    pub queued_at: u64,
    /// The worker driving it, if one claimed it.
    pub claimed_by: Option<String>,
}

/// A queued action, for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedActionView {
    /// Its session.
    pub session_id: String,
    /// The call.
    pub call_id: String,
    /// Its tool.
    pub tool_name: String,
    /// Claims so far.
    pub attempts: u32,
    /// The worker running it, if one claimed it.
    pub claimed_by: Option<String>,
    /// How long ago the current claim was taken or renewed, in milliseconds.
    pub lease_age_ms: Option<u64>,
}

/// What waits in the queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueView {
    /// Sessions waiting for a worker or being driven, oldest first.
    pub sessions: Vec<QueuedSessionView>,
    /// Tool calls waiting or running, oldest first.
    pub actions: Vec<QueuedActionView>,
}

/// The queue of sessions to drive and tool calls to run.
#[async_trait]
pub trait WorkQueue: Send + Sync {
    /// Queues `session_id` for a worker to drive (again, if it is queued already:
    /// a claim of it then stays queued when finished).
    async fn enqueue_session(&self, session_id: &str) -> Result<(), StoreError>;

    /// Claims the oldest queued session no live worker holds, for `ttl`.
    async fn claim_session(
        &self,
        worker: &str,
        ttl: Duration,
    ) -> Result<Option<SessionClaim>, StoreError>;

    /// Ends `worker`'s claim: the session leaves the queue, unless it was queued
    /// again since the claim, when it is left for the next claim.
    async fn finish_session(&self, claim: &SessionClaim, worker: &str) -> Result<(), StoreError>;

    /// Gives a claimed session back to the queue undriven.
    async fn release_session(&self, session_id: &str, worker: &str) -> Result<(), StoreError>;

    /// Queues tool calls to run; a call queued already is left as it is.
    async fn enqueue_actions(&self, actions: &[QueuedAction]) -> Result<(), StoreError>;

    /// Claims the oldest queued action no live worker holds, for `ttl` — only of
    /// `tools`, when given (a worker runs only the tools it has).
    async fn claim_action(
        &self,
        worker: &str,
        tools: Option<&[String]>,
        ttl: Duration,
    ) -> Result<Option<ActionClaim>, StoreError>;

    /// Removes an action whose result is in the log.
    async fn finish_action(&self, session_id: &str, call_id: &str) -> Result<(), StoreError>;

    /// Gives a claimed action back to the queue unrun (its attempt not counted).
    async fn release_action(
        &self,
        session_id: &str,
        call_id: &str,
        worker: &str,
    ) -> Result<(), StoreError>;

    /// Gives a claimed action back to the queue after its call may have started
    /// (a stopping worker gave up on it, or could not record its result): its
    /// attempt stays counted, so the next claim re-runs an idempotent call and
    /// reports any other as interrupted, never running it twice.
    async fn abandon_action(
        &self,
        session_id: &str,
        call_id: &str,
        worker: &str,
    ) -> Result<(), StoreError>;

    /// Extends every claim of `worker` by `ttl`.
    async fn heartbeat(&self, worker: &str, ttl: Duration) -> Result<(), StoreError>;

    /// Waits until work may have arrived (a notification, or `timeout`).
    async fn wait_for_work(&self, timeout: Duration);

    /// What waits and what runs, for people.
    async fn queue_view(&self) -> Result<QueueView, StoreError>;
}
