//! `agent pause ID`: stop a running session after its current step. The
//! process driving it pauses it at its next step boundary, prints its RunResult
//! with `exit_reason` `paused` and exits 11; a session whose process died is
//! paused at once. `agent resume ID` continues it.

use agent::engine::pause_session;
use agent::state::PublicStatus;
use serde_json::json;

use crate::cli::SessionArgs;
use crate::error::CliError;
use crate::output::{print, print_json};
use crate::store;

/// Pauses the session, or asks the process driving it to.
pub async fn pause(args: SessionArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.store.store, &args.session_id).await?;
    let state = pause_session(store.as_ref(), &args.session_id, "agent pause").await?;
    let status = state.public_status();
    let requested = status != PublicStatus::Paused;
    if args.json {
        print_json(&json!({
            "session_id": args.session_id,
            "status": status,
            "pause_requested": requested,
        }))?;
    } else if requested {
        print(&format!(
            "session {} pauses after its current step (the process driving it exits 11); continue it with: agent resume {}",
            args.session_id, args.session_id
        ))?;
    } else {
        print(&format!(
            "session {} is paused; continue it with: agent resume {}",
            args.session_id, args.session_id
        ))?;
    }
    Ok(0)
}
