//! Statuses: the internal states of the status machine, and the public status
//! users and scripts see (`CONTRACT.md` maps one onto the other).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The internal status of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// No event yet.
    New,
    /// Started; no step taken.
    Idle,
    /// A model call is under way, or its finish awaits acceptance.
    Thinking,
    /// The model proposed tool calls that are not all dispatched.
    ActionPending,
    /// Tool calls are running.
    ActionExecuting,
    /// All calls of the last turn have results.
    Observing,
    /// Calls wait for a human decision.
    AwaitingApproval,
    /// Stopped on request (`agent pause`) until a resume continues it.
    Paused,
    /// Ended with an answer.
    Finished,
    /// Ended without an answer.
    Error,
    /// Ended by cancellation.
    Cancelled,
}

impl Status {
    /// The status users and scripts see.
    pub fn public(self) -> PublicStatus {
        match self {
            Self::Finished => PublicStatus::Finished,
            Self::Error => PublicStatus::Failed,
            Self::Cancelled => PublicStatus::Cancelled,
            Self::AwaitingApproval => PublicStatus::AwaitingApproval,
            Self::Paused => PublicStatus::Paused,
            Self::New
            | Self::Idle
            | Self::Thinking
            | Self::ActionPending
            | Self::ActionExecuting
            | Self::Observing => PublicStatus::Running,
        }
    }

    /// Whether the session is between steps (nothing half done), where a fork may end.
    pub fn is_step_boundary(self) -> bool {
        matches!(self, Self::Idle | Self::Observing)
    }

    /// Whether no event may follow.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Finished | Self::Error | Self::Cancelled)
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Idle => "idle",
            Self::Thinking => "thinking",
            Self::ActionPending => "action_pending",
            Self::ActionExecuting => "action_executing",
            Self::Observing => "observing",
            Self::Finished => "finished",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Paused => "paused",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The status shown by `agent sessions` and `agent show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PublicStatus {
    /// Submitted, waiting in the work queue for a worker.
    Queued,
    /// In progress, or its driving process died.
    Running,
    /// Paused until a human decides on its pending calls.
    AwaitingApproval,
    /// Stopped on request (`agent pause`) until a resume continues it.
    Paused,
    /// Ended with an answer.
    Finished,
    /// Ended with an error exit reason.
    Failed,
    /// Ended by cancellation.
    Cancelled,
}

impl PublicStatus {
    /// Every public status, in the order lists and filters show them.
    pub const ALL: [Self; 7] = [
        Self::Running,
        Self::Queued,
        Self::AwaitingApproval,
        Self::Paused,
        Self::Finished,
        Self::Failed,
        Self::Cancelled,
    ];

    /// Whether the session's run has ended (`finished`, `failed`,
    /// `cancelled`): nothing runs until a new message opens another turn.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Finished | Self::Failed | Self::Cancelled)
    }

    /// The snake_case name shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Paused => "paused",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for PublicStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status name that is not a public status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown status `{0}`: expected queued, running, awaiting_approval, paused, finished, failed or cancelled"
)]
pub struct UnknownStatus(pub String);

impl std::str::FromStr for PublicStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "queued" => Ok(Self::Queued),
            "running" => Ok(Self::Running),
            "awaiting_approval" => Ok(Self::AwaitingApproval),
            "paused" => Ok(Self::Paused),
            "finished" => Ok(Self::Finished),
            "failed" => Ok(Self::Failed),
            "cancelled" => Ok(Self::Cancelled),
            other => Err(UnknownStatus(other.to_owned())),
        }
    }
}
