//! `agent show ID`: a session's status, task, context policy (with how many
//! summaries it made), conversation turns (each message and how it ended) and
//! timeline — seq, event, status transition, tool calls and results, summaries.

use agent::event::{Event, EventKind};
use agent::state::SessionState;
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
    let mut turns = Vec::new();
    for event in &events {
        let before = state.status();
        state.apply(event).map_err(inconsistent)?;
        follow_turns(&mut turns, event, &state);
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
    let field = |name: &str| {
        state
            .config()
            .get(name)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let (agent, digest) = (field("agent"), field("definition_digest"));
    if args.json {
        print_json(&json!({
            "session_id": args.session_id,
            "status": state.public_status(),
            "task": state.task(),
            "agent": agent,
            "definition_digest": digest,
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
        let agent_line = agent
            .as_ref()
            .map(|agent| {
                format!(
                    "agent: {agent} (definition {}{})\n",
                    digest.as_deref().unwrap_or("?"),
                    definition_now(agent, digest.as_deref())
                )
            })
            .unwrap_or_default();
        print(&format!(
            "session {}\nstatus: {}\ntask: {}\n{agent_line}context: {context}{compactions}\n",
            args.session_id,
            state.public_status(),
            state.task()
        ))?;
        if turns.len() > 1 {
            print(&format!("turns: {}", turns.len()))?;
            for turn in &turns {
                print(&turn.line())?;
            }
            print("")?;
        }
        for line in lines {
            print(line.trim_end())?;
        }
    }
    Ok(0)
}

/// How the definition of `agent` in the agents file here compares with the
/// one the session recorded.
fn definition_now(agent: &str, recorded: Option<&str>) -> &'static str {
    let Ok(cwd) = std::env::current_dir() else {
        return "";
    };
    match agent_runtime::Agents::find(None, &cwd) {
        Ok(agents) if agents.path.is_some() => match agents.get(agent) {
            Ok(now) if Some(now.digest().as_str()) == recorded => {
                "; the agents file here holds it unchanged"
            }
            Ok(_) => "; the agents file here holds a changed definition",
            Err(_) => "; the agents file here does not declare it",
        },
        _ => "",
    }
}

/// One conversation turn: the message that opened it and how it ended.
#[derive(Debug)]
struct Turn {
    turn: u32,
    message: String,
    exit_reason: Option<agent::result::ExitReason>,
    answer: Option<String>,
}

impl Turn {
    fn line(&self) -> String {
        let ended = match (&self.answer, self.exit_reason) {
            (Some(answer), _) => answer.clone(),
            (None, Some(reason)) => format!("({reason})"),
            (None, None) => "(running)".to_owned(),
        };
        format!("{:>4}. {} -> {ended}", self.turn, self.message)
    }
}

/// Opens a turn at the session's start and at each follow-up message, and
/// closes the current one when the session's state has a result.
fn follow_turns(turns: &mut Vec<Turn>, event: &Event, state: &SessionState) {
    let message = match &event.kind {
        EventKind::SessionStarted { task, .. } => Some(task),
        EventKind::UserMessage { text, .. } => Some(text),
        _ => None,
    };
    if let Some(message) = message {
        turns.push(Turn {
            turn: state.turn(),
            message: message.clone(),
            exit_reason: None,
            answer: None,
        });
    }
    if let (Some(result), Some(turn)) = (state.run_result(), turns.last_mut()) {
        turn.exit_reason = Some(result.exit_reason);
        turn.answer = result.answer;
    }
}
