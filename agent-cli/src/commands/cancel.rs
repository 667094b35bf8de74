//! `agent cancel ID`: stop a session that has not ended, also one whose process
//! died. The process driving it notices within a lease renewal and exits 6.

use agent::engine::cancel_session;
use serde_json::json;

use crate::cli::SessionArgs;
use crate::error::CliError;
use crate::output::{print, print_json};
use crate::store;

/// Cancels the session.
pub async fn cancel(args: SessionArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.store.store, &args.session_id).await?;
    let state = cancel_session(
        store.as_ref(),
        &args.session_id,
        "cancelled by agent cancel",
    )
    .await?;
    let status = state.public_status();
    if args.json {
        print_json(&json!({"session_id": args.session_id, "status": status}))?;
    } else {
        print(&format!("session {} is {status}", args.session_id))?;
    }
    Ok(0)
}
