//! Snapshots: the folded state of a session every N events, so a long session loads
//! from one snapshot and the events after it. A snapshot is only a cache; one that
//! cannot be used is ignored and the whole log is folded instead.

use serde_json::{Value, json};

use crate::error::EngineError;
use agent_core::state::SessionState;
use agent_core::store::EventStore;

/// Events between snapshots when none is configured.
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 100;

/// Layout version of snapshot JSON; a snapshot of another version is ignored.
const SNAPSHOT_VERSION: u64 = 4;

/// The snapshot JSON of `state`.
pub fn snapshot_of(state: &SessionState) -> Result<Value, serde_json::Error> {
    Ok(json!({"version": SNAPSHOT_VERSION, "state": serde_json::to_value(state)?}))
}

/// The state a snapshot holds, if it is one this build wrote for `session_id` at `seq`.
fn state_from(snapshot: &Value, session_id: &str, seq: u64) -> Option<SessionState> {
    if snapshot.get("version")?.as_u64()? != SNAPSHOT_VERSION {
        return None;
    }
    let state: SessionState = serde_json::from_value(snapshot.get("state")?.clone()).ok()?;
    (state.session_id() == session_id && state.last_seq() == seq).then_some(state)
}

/// The current state of a stored session: the newest usable snapshot plus the
/// events after it, or the whole log folded when there is no usable snapshot.
pub async fn load_state(
    store: &dyn EventStore,
    session_id: &str,
) -> Result<SessionState, EngineError> {
    if let Some((seq, snapshot)) = store.load_snapshot(session_id).await?
        && let Some(mut state) = state_from(&snapshot, session_id, seq)
    {
        let rest = store.load_after(session_id, seq).await?;
        if rest.iter().try_for_each(|event| state.apply(event)).is_ok() {
            return Ok(state);
        }
    }
    let events = store.load(session_id).await?;
    Ok(SessionState::from_events(session_id, &events)?)
}
