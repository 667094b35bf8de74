//! `agent submit TASK`: record a session as `agent run` does, queue it for a
//! worker and return at once.

use agent_runtime::SubmitError;
use serde_json::json;

use crate::cli::RunArgs;
use crate::error::CliError;
use crate::output::{print, print_json};
use crate::run_setup::current_dir;
use crate::store;

/// Submits the task; prints the new session's id.
pub async fn submit(args: RunArgs) -> Result<u8, CliError> {
    let config = crate::run_setup::new_session_config(&args.flags, &current_dir()?)?;
    let store = store::open(&args.flags.store.store).await?;
    let session_id = agent_runtime::submit(&config, store, args.task)
        .await
        .map_err(|err| match err {
            SubmitError::Config(err) => CliError::from(err),
            SubmitError::Engine(err) => CliError::from(err),
        })?;
    if args.flags.json {
        print_json(&json!({"session_id": session_id, "status": "queued"}))?;
    } else {
        print(&format!(
            "session {session_id} queued\nfollow it with: agent wait {session_id}"
        ))?;
    }
    Ok(0)
}
