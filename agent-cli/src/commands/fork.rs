//! `agent fork ID --at SEQ`: a new session whose log is a copy of ID's up to SEQ
//! (moved back to the start of the step SEQ falls in); resume it with other flags.

use agent::engine::fork_session;
use serde_json::json;

use crate::cli::ForkArgs;
use crate::error::CliError;
use crate::output::{print, print_json};
use crate::store;

/// Forks the session.
pub async fn fork(args: ForkArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.store.store, &args.session_id).await?;
    let fork = fork_session(store.as_ref(), &args.session_id, args.at).await?;
    if args.json {
        print_json(&json!({"session_id": fork.session_id, "parent": fork.parent, "at": fork.at}))?;
    } else {
        print(&format!(
            "forked {} at seq {} as {}\ncontinue it with: agent resume {} [--model …]",
            fork.parent, fork.at, fork.session_id, fork.session_id
        ))?;
    }
    Ok(0)
}
