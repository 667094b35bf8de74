//! `agent approve` and `agent deny`: decide calls that wait for a human. The
//! session continues with `agent resume`, or on a worker when it was submitted.

use agent::strict_json;
use agent_runtime::control;
use serde_json::json;

use crate::cli::{ApproveArgs, DenyArgs};
use crate::error::CliError;
use crate::output::{print, print_json};
use crate::store;

/// Who the log records as the decider.
fn decider() -> String {
    std::env::var("USER")
        .ok()
        .filter(|user| !user.is_empty())
        .map_or_else(|| "agent approve".into(), |user| format!("{user} (cli)"))
}

/// Approves waiting calls, optionally with edited arguments.
pub async fn approve(args: ApproveArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.store.store, &args.session_id).await?;
    let arguments = match &args.args {
        None => None,
        Some(text) => Some(
            strict_json::from_str(text)
                .map_err(|err| CliError::Usage(format!("--args is not valid JSON: {err}")))?,
        ),
    };
    let decided = control::approve(
        store.as_ref(),
        &args.session_id,
        args.call.as_deref(),
        arguments,
        &decider(),
    )
    .await?;
    report(&args.session_id, &decided, "approved", args.json)
}

/// Denies waiting calls; the model receives the reason.
pub async fn deny(args: DenyArgs) -> Result<u8, CliError> {
    let store = store::open_for(&args.store.store, &args.session_id).await?;
    let decided = control::deny(
        store.as_ref(),
        &args.session_id,
        args.call.as_deref(),
        &args.reason,
        &decider(),
    )
    .await?;
    report(&args.session_id, &decided, "denied", args.json)
}

fn report(
    session_id: &str,
    decided: &control::Decided,
    what: &str,
    json: bool,
) -> Result<u8, CliError> {
    if json {
        print_json(&json!({"session_id": session_id, "decided": decided.calls}))?;
    } else if decided.queued {
        print(&format!(
            "{what}: {}\nqueued for a worker; follow it with: agent wait {session_id}",
            decided.calls.join(", ")
        ))?;
    } else {
        print(&format!(
            "{what}: {}\ncontinue with: agent resume {session_id}",
            decided.calls.join(", ")
        ))?;
    }
    Ok(0)
}
