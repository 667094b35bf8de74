//! A worker runs one claimed tool call, as the engine would in its own process:
//! with the tools of the session's configuration (and their layers), in a task
//! of its own (a panic is recorded), its layers' reports and its result appended
//! to the log with optimistic concurrency, published to the session's trace. A
//! call claimed again after an expiry (its worker died mid-call) is run again when
//! idempotent and otherwise reported `interrupted: outcome unknown`. When its
//! result completes the turn, the session is queued to be driven again.

use std::collections::HashMap;
use std::sync::Arc;

use agent_core::cancel::Cancellation;
use agent_core::event::{Event, EventKind};
use agent_core::state::SessionState;
use agent_core::store::queue::ActionClaim;
use agent_core::store::{Append, Durability, StoreError};
use agent_core::tool::Toolbox;
use agent_core::types::Observation;
use agent_engine::telemetry;
use agent_engine::{CallObserver, EngineError, INTERRUPTED, Timed, call_result_event, load_state};
use tokio::sync::Mutex;
use tracing::Instrument;

use super::Shared;
use super::drive::BROKEN_BACKOFF;
use super::retry::until_stored;
use crate::config::SessionConfig;
use crate::config::tools::SessionTools;
use crate::control::publish_to_trace;

/// Tries at appending a result while others write to the same session.
const APPEND_TRIES: usize = 20;

/// The tools of the sessions a worker served, by the configuration that built
/// them, with their MCP servers kept running until the worker stops.
#[derive(Default)]
pub(super) struct ToolCache {
    built: Mutex<HashMap<String, SessionTools>>,
}

impl ToolCache {
    /// The toolbox of `config`, built once.
    pub(super) async fn toolbox(
        &self,
        config: &SessionConfig,
        extra: &[Arc<dyn agent_core::tool::Tool>],
    ) -> Result<Toolbox, String> {
        let key = serde_json::json!({
            "tools": config.tools(), "allow_cmd": config.allow_cmd(), "mcp": config.mcp(),
            "mcp_timeout": config.mcp_timeout_secs(), "tool_timeout": config.tool_timeout_secs(),
            "tool_retries": config.tool_retries(),
        })
        .to_string();
        let mut built = self.built.lock().await;
        if let Some(tools) = built.get(&key) {
            return Ok(tools.toolbox.clone());
        }
        let tools = SessionTools::start(config, extra)
            .await
            .map_err(|err| err.to_string())?;
        let toolbox = tools.toolbox.clone();
        built.insert(key, tools);
        Ok(toolbox)
    }

    /// Stops every MCP server the cache started.
    pub(super) async fn shutdown(&self) {
        let built = std::mem::take(&mut *self.built.lock().await);
        for tools in built.into_values() {
            tools.shutdown().await;
        }
    }
}

/// Runs the call of `claim`, records its result and settles its queue entry.
/// A result the store cannot take for now is kept and retried until it can.
pub(super) async fn run(shared: &Shared, claim: ActionClaim) {
    let action = &claim.action;
    let what = format!(
        "{} [{}] of {}",
        action.call.tool_name, action.call.id, action.session_id
    );
    let settle = match serve(shared, &claim).await {
        Ok(Served::Recorded) => {
            shared.say(&format!("ran {what}"));
            Settle::Finish
        }
        Ok(Served::AlreadyDone) => Settle::Finish,
        Ok(Served::LacksTool(why)) => {
            shared.say(&format!(
                "leaves {what} to a worker that has the tool: {why}"
            ));
            tokio::time::sleep(BROKEN_BACKOFF).await;
            Settle::Release
        }
        Err(err) => {
            // An error waiting cannot mend (a damaged log): the claim goes
            // back with its attempt counted, so the call is reported, not
            // run twice.
            shared.say(&format!("cannot record {what} and gives it back: {err}"));
            Settle::Abandon
        }
    };
    let (session_id, call_id, store) = (&action.session_id, &action.call.id, &shared.store);
    let verb = match settle {
        Settle::Finish => "finish",
        Settle::Release | Settle::Abandon => "give back",
    };
    let settled = until_stored(shared, &format!("{verb} {what}"), || async {
        match settle {
            Settle::Finish => store.finish_action(session_id, call_id).await,
            Settle::Release => {
                store
                    .release_action(session_id, call_id, &shared.name)
                    .await
            }
            Settle::Abandon => {
                store
                    .abandon_action(session_id, call_id, &shared.name)
                    .await
            }
        }
    })
    .await;
    if let Err(err) = settled {
        shared.say(&format!("cannot {verb} {what}: {err}"));
    }
}

/// What becomes of a served call's queue entry.
#[derive(Clone, Copy)]
enum Settle {
    /// Its result is in the log: it leaves the queue.
    Finish,
    /// It never ran here: back to the queue, the attempt not counted.
    Release,
    /// It may have run: back to the queue, the attempt counted.
    Abandon,
}

/// How a claimed call was served.
enum Served {
    /// Its result (or interruption) is in the log now.
    Recorded,
    /// The log already had its result, or the session ended.
    AlreadyDone,
    /// This worker cannot run it.
    LacksTool(String),
}

async fn serve(shared: &Shared, claim: &ActionClaim) -> Result<Served, StoreError> {
    let action = &claim.action;
    let what = format!("read the log of {}", action.session_id);
    let state = until_stored(shared, &what, || load(shared, &action.session_id)).await?;
    if !in_flight(&state, &action.call.id) {
        queue_if_turn_done(shared, &state).await?;
        return Ok(Served::AlreadyDone);
    }
    let events = if claim.attempt > 1 && !action.idempotent {
        vec![Timed::now(EventKind::ActionCompleted {
            observation: Observation::error(&action.call, INTERRUPTED),
        })]
    } else {
        match call(shared, &state, claim).await {
            Ok(events) => events,
            Err(why) => return Ok(Served::LacksTool(why)),
        }
    };
    let what = format!(
        "record {} [{}] of {}",
        action.call.tool_name, action.call.id, action.session_id
    );
    until_stored(shared, &what, || record(shared, claim, &events)).await
}

/// Appends the events of a served call to its session's log (with optimistic
/// concurrency, tried again while others write) and queues the session when
/// its turn is complete.
async fn record(
    shared: &Shared,
    claim: &ActionClaim,
    events: &[Timed],
) -> Result<Served, StoreError> {
    let store = &shared.store;
    let action = &claim.action;
    for _ in 0..APPEND_TRIES {
        let state = load(shared, &action.session_id).await?;
        if !in_flight(&state, &action.call.id) {
            // Perhaps recorded by an earlier try whose answer was lost (the
            // store went away during its commit): the session may still need
            // queueing.
            queue_if_turn_done(shared, &state).await?;
            return Ok(Served::AlreadyDone);
        }
        let before = state.last_seq();
        let mut after = state;
        let mut batch = Vec::with_capacity(events.len());
        for timed in events {
            let mut event =
                Event::new(&action.session_id, after.last_seq() + 1, timed.kind.clone());
            event.at = timed.at;
            if after.apply(&event).is_err() {
                continue;
            }
            batch.push(event);
        }
        if batch.is_empty() {
            return Ok(Served::AlreadyDone);
        }
        match store
            .append(Append::after(&after, &batch, Durability::Full))
            .await
        {
            Ok(()) => {
                if let Err(err) = publish_to_trace(store.as_ref(), &action.session_id, before).await
                {
                    shared.say(&format!(
                        "cannot write the trace of {}: {err}",
                        action.session_id
                    ));
                }
                queue_if_turn_done(shared, &after).await?;
                return Ok(Served::Recorded);
            }
            Err(StoreError::Conflict { .. }) => {}
            Err(err) => return Err(err),
        }
    }
    Err(StoreError::Backend(format!(
        "the log of session `{}` kept moving; the call's result was not recorded yet",
        action.session_id
    )))
}

async fn load(shared: &Shared, session_id: &str) -> Result<SessionState, StoreError> {
    load_state(shared.store.as_ref(), session_id)
        .await
        .map_err(|err| match err {
            EngineError::Store(err) => err,
            other => StoreError::Corrupt(other.to_string()),
        })
}

fn in_flight(state: &SessionState, call_id: &str) -> bool {
    !state.status().is_terminal()
        && state
            .in_flight_calls()
            .iter()
            .any(|call| call.id == call_id)
}

/// Queues the session to be driven when its turn has all its results.
async fn queue_if_turn_done(shared: &Shared, state: &SessionState) -> Result<(), StoreError> {
    if !state.status().is_terminal() && state.in_flight_calls().is_empty() {
        shared.store.enqueue_session(state.session_id()).await?;
    }
    Ok(())
}

/// Runs the call with the session's tools; the events to record, or why this
/// worker cannot run it.
async fn call(
    shared: &Shared,
    state: &SessionState,
    claim: &ActionClaim,
) -> Result<Vec<Timed>, String> {
    let config = SessionConfig::recorded(state.config()).map_err(|err| err.to_string())?;
    let toolbox = shared.cache.toolbox(&config, &shared.extra_tools).await?;
    let call = &claim.action.call;
    let tool = toolbox
        .get(&call.tool_name)
        .cloned()
        .ok_or_else(|| format!("no tool `{}` in its configuration here", call.tool_name))?;
    let observer = CallObserver::new(call);
    let ctx = agent_core::tool::ToolContext {
        session_id: claim.action.session_id.clone(),
        call_id: call.id.clone(),
        attempt: claim.attempt,
        workspace: Arc::from(config.workspace()),
        observer: Arc::clone(&observer) as Arc<dyn agent_core::layer::LayerObserver>,
        cancel: Cancellation::new(),
    };
    let arguments = call.arguments.clone();
    // In a set of its own, so that a worker that gives up on the call (its drain
    // ran out) stops the tool too.
    let mut running = tokio::task::JoinSet::new();
    let content = config.full_content();
    let span = telemetry::tool_span(&claim.action.session_id, call, content);
    running.spawn(async move { tool.call(arguments, &ctx).await }.instrument(span.clone()));
    let Some(outcome) = running.join_next().await else {
        return Err("the call's task vanished".into());
    };
    let mut events = observer.take();
    let result = call_result_event(call, outcome);
    telemetry::record_tool_outcome(&span, &result, content);
    events.push(Timed::now(result));
    Ok(events)
}
