//! `agent queue`: the sessions waiting for a worker or being driven, the tool
//! calls waiting or running (with their worker and how old its claim is), and
//! how much each worker holds.

use std::collections::BTreeMap;

use agent::store::queue::QueueView;
use serde_json::{Value, json};

use crate::cli::QueueArgs;
use crate::error::CliError;
use crate::output::{print, print_json, timestamp};
use crate::store;

/// Prints the queue; a store that does not exist yet has an empty one.
pub async fn queue(args: QueueArgs) -> Result<u8, CliError> {
    let view = match store::open_existing(&args.store.store).await? {
        Some(store) => store.queue_view().await?,
        None => QueueView::default(),
    };
    let workers = per_worker(&view);
    if args.json {
        print_json(&as_json(&view, &workers))?;
    } else {
        print(&as_text(&view, &workers))?;
    }
    Ok(0)
}

/// Sessions and tool calls each worker holds, by name.
fn per_worker(view: &QueueView) -> BTreeMap<&str, (usize, usize)> {
    let mut workers: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for worker in view.sessions.iter().filter_map(|s| s.claimed_by.as_deref()) {
        workers.entry(worker).or_default().0 += 1;
    }
    for worker in view.actions.iter().filter_map(|a| a.claimed_by.as_deref()) {
        workers.entry(worker).or_default().1 += 1;
    }
    workers
}

fn as_json(view: &QueueView, workers: &BTreeMap<&str, (usize, usize)>) -> Value {
    json!({
        "sessions": view.sessions.iter().map(|s| json!({
            "session_id": s.session_id,
            "queued_at": timestamp(s.queued_at),
            "claimed_by": s.claimed_by,
        })).collect::<Vec<_>>(),
        "actions": view.actions.iter().map(|a| json!({
            "session_id": a.session_id,
            "call_id": a.call_id,
            "tool_name": a.tool_name,
            "attempts": a.attempts,
            "claimed_by": a.claimed_by,
            "lease_age_ms": a.lease_age_ms,
        })).collect::<Vec<_>>(),
        "workers": workers.iter().map(|(name, (sessions, actions))| json!({
            "name": name, "sessions": sessions, "actions": actions,
        })).collect::<Vec<_>>(),
    })
}

fn as_text(view: &QueueView, workers: &BTreeMap<&str, (usize, usize)>) -> String {
    let mut lines = vec![format!("sessions: {}", view.sessions.len())];
    for s in &view.sessions {
        let state = s.claimed_by.as_deref().map_or_else(
            || "waiting".to_owned(),
            |worker| format!("driven by {worker}"),
        );
        lines.push(format!(
            "  {}  queued {}  {state}",
            s.session_id,
            timestamp(s.queued_at)
        ));
    }
    lines.push(format!("tool calls: {}", view.actions.len()));
    for a in &view.actions {
        let state = match (&a.claimed_by, a.lease_age_ms) {
            (Some(worker), Some(age)) => format!("run by {worker}, claim renewed {age} ms ago"),
            (Some(worker), None) => format!("run by {worker}"),
            (None, _) => "waiting".to_owned(),
        };
        lines.push(format!(
            "  {} [{}] {}  attempts {}  {state}",
            a.session_id, a.call_id, a.tool_name, a.attempts
        ));
    }
    lines.push(format!("workers: {}", workers.len()));
    for (name, (sessions, actions)) in workers {
        lines.push(format!(
            "  {name}  {sessions} session(s), {actions} tool call(s)"
        ));
    }
    lines.join("\n")
}
