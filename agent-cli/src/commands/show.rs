//! `agent show ID`: a session's status, task, context policy (with how many
//! summaries it made) and timeline — seq, event, status transition, tool calls
//! and results, summaries.

use agent::SessionState;
use agent::trace::describe;
use serde_json::json;

use crate::cli::SessionArgs;
use crate::error::{CliError, inconsistent};
use crate::output::{print, print_json, timestamp};
use crate::store;

/// Shows the session.
pub async fn show(args: SessionArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.store.store, &args.session_id).await?;
    let events = store.load(&args.session_id).await?;
    let mut state = SessionState::new(&args.session_id);
    let mut lines = Vec::new();
    for event in &events {
        let before = state.status();
        state.apply(event).map_err(inconsistent)?;
        let transition = if before == state.status() {
            String::new()
        } else {
            format!("{before} -> {}", state.status())
        };
        lines.push(format!(
            "{:>4}  {}  {:<22} {:<32} {}",
            event.seq,
            timestamp(event.at),
            event.kind.name(),
            transition,
            describe(&event.kind)
        ));
    }
    if args.json {
        print_json(&json!({
            "session_id": args.session_id,
            "status": state.public_status(),
            "task": state.task(),
            "events": events,
        }))?;
    } else {
        let context = state
            .config()
            .get("context")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("keep-all");
        let compactions = match state.compactions() {
            0 => String::new(),
            1 => ", 1 compaction".to_owned(),
            n => format!(", {n} compactions"),
        };
        print(&format!(
            "session {}\nstatus: {}\ntask: {}\ncontext: {context}{compactions}\n",
            args.session_id,
            state.public_status(),
            state.task()
        ))?;
        for line in lines {
            print(line.trim_end())?;
        }
    }
    Ok(0)
}
