//! `GET /v1/sessions/{id}/events`: the log as JSON, or, with `Accept:
//! text/event-stream`, a Server-Sent Events stream of it — every event as `id:
//! SEQ`, `event: KIND`, `data: JSON`, live as it is committed by any process,
//! each carrying what it means for the session ([`EventView`]: the public
//! status after it and its one-line description, so no client re-implements
//! the status machine or the describer),
//! resuming after `Last-Event-ID` (or `?after=`), ending after the session's
//! final event, with a keep-alive comment every 15 s. Between the stored events
//! come `event: delta` messages (no `id`, never stored): the text of the step's
//! response as this process's workers see it written, `{"step", "text",
//! "restart"}`; `restart: true` says the response starts over (a retry), so
//! the text shown for that step is superseded.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};
use utoipa::{IntoParams, ToSchema};

use agent_core::delta::ModelDelta;
use agent_core::event::Event;
use agent_core::state::{PublicStatus, SessionState};
use agent_runtime::SessionDelta;

use crate::error::{ApiError, ErrorBody};
use crate::state::{ServerState, StreamGuard};
use crate::tail::POLL;

/// The longest a stream waits without reading the log itself, in case an
/// announcement was missed.
const RECHECK: Duration = Duration::from_secs(1);

/// Where the events start.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only events after this seq (for a stream, `Last-Event-ID` wins over it).
    pub after: Option<u64>,
}

/// A session's events.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventList {
    /// The session.
    pub session_id: String,
    /// Its events after `after`, in seq order: each stored event's fields
    /// plus `status`, `ended`, `description` and `problem`.
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<EventView>,
}

/// An event as the API sends it: the stored event's fields, and what it means
/// for its session, computed by the server from the same fold and describer
/// the CLI uses.
#[derive(Debug, Clone, Serialize)]
pub struct EventView {
    /// The stored event.
    #[serde(flatten)]
    pub event: Event,
    /// The session's public status once this event is applied.
    pub status: PublicStatus,
    /// Whether that status ends the run (`finished`, `failed`, `cancelled`).
    pub ended: bool,
    /// The event in one line, as `agent show` and `agent run` print it.
    pub description: String,
    /// Whether the event reports something that went wrong (a failure, a
    /// refused response, a failed attempt, an error result).
    pub problem: bool,
}

impl EventView {
    /// `event`, read against `session` — the fold that includes it.
    fn new(event: Event, session: &SessionState) -> Self {
        let status = session.public_status();
        Self {
            status,
            ended: status.is_final(),
            description: agent_trace::describe(&event.kind),
            problem: agent_trace::is_problem(&event.kind),
            event,
        }
    }
}

/// Folds `events` and returns the views of those after seq `after`.
fn views_after(
    session: &mut SessionState,
    events: Vec<Event>,
    after: u64,
) -> Result<Vec<EventView>, agent_core::state::StateError> {
    let mut views = Vec::new();
    for event in events {
        session.apply(&event)?;
        if event.seq > after {
            views.push(EventView::new(event, session));
        }
    }
    Ok(views)
}

/// The log as JSON, or a live Server-Sent Events stream of it.
#[utoipa::path(
    get,
    path = "/v1/sessions/{id}/events",
    tag = "sessions",
    params(
        ("id" = String, Path, description = "The session id"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume a stream after this seq"),
        EventsQuery
    ),
    responses(
        (status = 200, body = EventList, description = "The events (JSON), each with `status` (the public status after it), `ended`, `description` (one line) and `problem`; or with `Accept: text/event-stream` a stream: `id: SEQ`, `event: KIND`, `data: EVENT JSON` (the same objects) per event, until the final one, with `event: delta` messages (`{session_id, step, text, restart}`, not stored) carrying the text of a response while this server's workers see it written"),
        (status = 400, body = ErrorBody, description = "`Last-Event-ID` is not a seq, or is beyond the session's last event"),
        (status = 404, body = ErrorBody, description = "No session has this id")
    )
)]
pub async fn events(
    State(state): State<ServerState>,
    Path(id): Path<String>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let wants_stream = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("text/event-stream"));
    if !wants_stream {
        let events = state.store.load(&id).await?;
        let mut session = SessionState::new(id.as_str());
        let events = views_after(&mut session, events, query.after.unwrap_or(0))
            .map_err(agent_engine::ControlError::from)?;
        return Ok(Json(EventList {
            session_id: id,
            events,
        })
        .into_response());
    }
    let after = match headers.get("last-event-id") {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .ok_or_else(|| ApiError::bad_request("`Last-Event-ID` must be the seq of an event"))?,
        None => query.after.unwrap_or(0),
    };
    let keep_alive = state.keep_alive;
    let follow = Follow::start(state, id, after).await?;
    Ok(Sse::new(follow.into_stream())
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response())
}

/// One stream's place in a session's log.
struct Follow {
    state: ServerState,
    session_id: String,
    /// The fold of every event read, to know when the session has ended.
    session: SessionState,
    /// Events read and not yet sent.
    unsent: VecDeque<EventView>,
    /// Events up to this seq are not sent (the client has them).
    after: u64,
    /// Whether the last event has been read (or the stream must end).
    ended: bool,
    changes: watch::Receiver<u64>,
    /// The text being written for the session, and the step whose text was
    /// last sent.
    deltas: broadcast::Receiver<SessionDelta>,
    texted: Option<u32>,
    _open: StreamGuard,
}

impl Follow {
    async fn start(state: ServerState, session_id: String, after: u64) -> Result<Self, ApiError> {
        let changes = state.tails.follow(&session_id, 0);
        let deltas = state.deltas.subscribe(&session_id);
        let events = state.store.load(&session_id).await?;
        let mut session = SessionState::new(session_id.as_str());
        let unsent =
            views_after(&mut session, events, after).map_err(agent_engine::ControlError::from)?;
        if after > session.last_seq() {
            // A client that claims events the log does not hold has the wrong
            // session or a stale id: a stream of nothing would hide that.
            return Err(ApiError::bad_request(format!(
                "`Last-Event-ID` {after} is beyond the last event of this session ({}); resume from an id the stream sent, or from 0",
                session.last_seq()
            )));
        }
        let ended = session.run_result().is_some();
        Ok(Self {
            _open: StreamGuard::open(&state),
            unsent: unsent.into(),
            state,
            session_id,
            session,
            after,
            ended,
            changes,
            deltas,
            texted: None,
        })
    }

    fn into_stream(self) -> impl Stream<Item = Result<SseEvent, Infallible>> {
        futures_util::stream::unfold(self, |mut follow| async move {
            let next = follow.next().await?;
            Some((Ok(next), follow))
        })
    }

    /// The next thing to send; `None` ends the stream.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(event) = self.unsent.pop_front() {
                return Some(sse_event(&event));
            }
            if self.ended || self.state.shutdown.is_cancelled() {
                return None;
            }
            match self
                .state
                .store
                .load_after(&self.session_id, self.session.last_seq())
                .await
            {
                Ok(events) if !events.is_empty() => {
                    match views_after(&mut self.session, events, self.after) {
                        Ok(views) => self.unsent.extend(views),
                        Err(err) => {
                            self.ended = true;
                            return Some(error_event(&ApiError::from(
                                agent_engine::ControlError::from(err),
                            )));
                        }
                    }
                    self.ended = self.session.run_result().is_some();
                    continue;
                }
                Ok(_) => {}
                Err(err) => {
                    self.ended = true;
                    return Some(error_event(&ApiError::from(err)));
                }
            }
            tokio::select! {
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep(POLL).await;
                    }
                }
                delta = self.deltas.recv() => match delta {
                    Ok(delta) => {
                        if let Some(event) = self.delta_event(delta) {
                            return Some(event);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => {
                        self.deltas = self.state.deltas.subscribe(&self.session_id);
                    }
                },
                () = tokio::time::sleep(RECHECK) => {}
                () = self.state.shutdown.cancelled() => {}
            }
        }
    }
}

impl Follow {
    /// The `delta` message for `delta`, if it says anything to a client: a
    /// new attempt matters only once text of the step was sent.
    fn delta_event(&mut self, delta: SessionDelta) -> Option<SseEvent> {
        let (text, restart) = match delta.delta {
            ModelDelta::Started if self.texted == Some(delta.step) => (String::new(), true),
            ModelDelta::Started => return None,
            ModelDelta::Text(text) => (text, false),
        };
        self.texted = Some(delta.step);
        let data = serde_json::json!({
            "session_id": self.session_id,
            "step": delta.step,
            "text": text,
            "restart": restart,
        });
        Some(SseEvent::default().event("delta").data(data.to_string()))
    }
}

/// An event of the log as an SSE event.
fn sse_event(view: &EventView) -> SseEvent {
    let data = serde_json::to_string(view).unwrap_or_else(|err| {
        serde_json::json!({"error": {"code": "internal", "message": err.to_string()}}).to_string()
    });
    SseEvent::default()
        .id(view.event.seq.to_string())
        .event(view.event.kind.name())
        .data(data)
}

/// A failure that ends a stream, as an `error` event.
fn error_event(err: &ApiError) -> SseEvent {
    let data = serde_json::json!({"error": {"code": err.code, "message": err.message}});
    SseEvent::default().event("error").data(data.to_string())
}
