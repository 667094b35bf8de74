//! Why an event could not be applied to a session's state.

use super::Status;

/// Why an event could not be applied. The state is unchanged when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The event is not allowed in the current status.
    #[error("event `{event}` is not allowed in status `{status}`")]
    IllegalTransition {
        /// The rejected event's kind.
        event: &'static str,
        /// The status the session was in.
        status: Status,
    },
    /// The event's seq does not follow the last applied one.
    #[error("event seq {got} does not follow seq {last}")]
    OutOfOrder {
        /// Last applied seq.
        last: u64,
        /// Seq of the rejected event.
        got: u64,
    },
    /// The event belongs to another session.
    #[error("event of session `{got}` applied to session `{expected}`")]
    WrongSession {
        /// This state's session.
        expected: String,
        /// The event's session.
        got: String,
    },
    /// A dispatch or completion names a call that is not pending.
    #[error("event `{event}` names call `{call_id}`, which is not pending in this turn")]
    UnexpectedCall {
        /// The rejected event's kind.
        event: &'static str,
        /// The call id it named.
        call_id: String,
    },
    /// A compaction names a seq range that is not whole turns of the history.
    #[error("context_compacted names seqs {from_seq}..={to_seq}, which {reason}")]
    BadCompaction {
        /// The first seq it names.
        from_seq: u64,
        /// The last seq it names.
        to_seq: u64,
        /// What is wrong with the range.
        reason: &'static str,
    },
    /// A follow-up message where none may open a turn, or numbered wrongly.
    #[error("user_message cannot open turn {turn}: the session {reason}")]
    FollowUp {
        /// The turn the message named.
        turn: u32,
        /// Why it may not.
        reason: String,
    },
}
