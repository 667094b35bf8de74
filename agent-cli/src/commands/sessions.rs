//! `agent sessions [--status S]`: the stored sessions, newest first.

use agent::state::PublicStatus;
use serde_json::json;

use crate::cli::SessionsArgs;
use crate::error::CliError;
use crate::output::{print, print_json, timestamp};
use crate::store;

/// Lists sessions; a store that does not exist yet holds none.
pub async fn sessions(args: SessionsArgs) -> Result<u8, CliError> {
    let filter: Option<PublicStatus> = args
        .status
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(|err| CliError::Usage(format!("--status: {err}")))?;
    let summaries = match store::open_existing(&args.store.store).await? {
        Some(store) => store.sessions().await?,
        None => Vec::new(),
    };
    let summaries: Vec<_> = summaries
        .into_iter()
        .filter(|summary| filter.is_none_or(|status| summary.status == status))
        .collect();
    if args.json {
        let rows: Vec<_> = summaries
            .iter()
            .map(|s| {
                json!({
                    "session_id": s.session_id,
                    "status": s.status,
                    "task": s.task,
                    "created_at": timestamp(s.created_at),
                    "updated_at": timestamp(s.updated_at),
                })
            })
            .collect();
        print_json(&rows)?;
    } else if summaries.is_empty() {
        print("no sessions")?;
    } else {
        for s in &summaries {
            print(&format!(
                "{}  {:<10}  {}  {}",
                s.session_id,
                s.status.as_str(),
                timestamp(s.updated_at),
                s.task
            ))?;
        }
    }
    Ok(0)
}
