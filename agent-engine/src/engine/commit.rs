//! Commit and publish: new events are applied to the state at once, queued, and
//! committed to the store in one append when the driver reaches a commit point;
//! only then are they published to the sinks. A conflicting append (another
//! writer got there first) drops what was queued and folds the log again —
//! unless what the other writer added leaves the driver's work valid (a pause
//! request, a queued message): then the queued events are placed after it and
//! committed.

use super::driver::{Driver, internal_failure};
use super::lease::commutes;
use crate::call::Timed;
use crate::error::EngineError;
use crate::snapshot::{load_state, snapshot_of};
use agent_core::event::{Event, EventKind};
use agent_core::state::StateError;
use agent_core::store::{Append, Durability, StoreError};
use agent_core::telemetry;

impl Driver<'_> {
    /// Applies a new event to the state and queues it for the next commit. An event
    /// the state machine refuses is a bug: the session fails with `internal_error`.
    pub(super) fn record(&mut self, kind: EventKind) -> Result<(), EngineError> {
        self.record_timed(Timed::now(kind))
    }

    /// [`Driver::record`] of an event that happened earlier (a layer's report),
    /// keeping the moment it happened.
    pub(super) fn record_timed(&mut self, event: Timed) -> Result<(), EngineError> {
        let at = event.at;
        match self.apply_new(event) {
            Ok(()) => Ok(()),
            Err(err) if !self.state.status().is_terminal() => Ok(self.apply_new(Timed {
                kind: internal_failure(format!("the engine produced an illegal event: {err}")),
                at,
            })?),
            Err(err) => Err(err.into()),
        }
    }

    fn apply_new(&mut self, timed: Timed) -> Result<(), StateError> {
        let mut event = Event::new(
            self.state.session_id(),
            self.state.last_seq() + 1,
            timed.kind,
        );
        event.at = timed.at;
        self.state.apply(&event)?;
        log_event(&event);
        self.log.unflushed.push(event);
        self.log.unflushed_steps.push(self.state.steps_used());
        Ok(())
    }

    /// Commits queued events, then publishes them to the sinks. Returns `false`
    /// when another writer got there first: the state was reloaded from the log
    /// (or a finish withdrawn for a message the model has not seen) and the
    /// caller must abandon what it was doing.
    pub(super) async fn flush(&mut self, durability: Durability) -> Result<bool, EngineError> {
        let Some(first) = self.log.unflushed.first() else {
            return Ok(true);
        };
        let mut expected = first.seq - 1;
        let mut rebased = Vec::new();
        let mut finish_withdrawn = false;
        let mut outage = Outage::default();
        while !self.log.unflushed.is_empty() {
            // Announced before the append, so the lease keeper never mistakes our
            // own commit for a write by someone else.
            self.signal().committed_up_to(self.state.last_seq());
            let appended = self
                .engine
                .store
                .append(Append::after(&self.state, &self.log.unflushed, durability))
                .await;
            match appended {
                Ok(()) => {
                    if durability == Durability::Full {
                        self.log.durable_at = std::time::Instant::now();
                    }
                    break;
                }
                Err(StoreError::Conflict { .. }) => {
                    self.signal().committed_up_to(expected);
                    match self.rebase(expected).await? {
                        Some((foreign, withdrawn)) => {
                            expected += foreign.len() as u64;
                            rebased.extend(foreign);
                            finish_withdrawn |= withdrawn;
                        }
                        None => {
                            self.reload().await?;
                            return Ok(false);
                        }
                    }
                }
                Err(err) if err.is_transient() => {
                    if !outage.wait(self.engine.store_patience, &err).await {
                        return Err(err.into());
                    }
                }
                Err(err) => return Err(err.into()),
            }
        }
        outage.over();
        for event in &rebased {
            for sink in &self.engine.sinks {
                sink.publish(event, self.state.steps_used())?;
            }
        }
        self.maybe_snapshot(expected).await;
        let events = std::mem::take(&mut self.log.unflushed);
        let steps = std::mem::take(&mut self.log.unflushed_steps);
        for (event, step) in events.iter().zip(steps) {
            for sink in &self.engine.sinks {
                sink.publish(event, step)?;
            }
        }
        Ok(!finish_withdrawn)
    }

    /// Saves a snapshot when the commit that followed seq `before` crossed a
    /// multiple of the snapshot interval and at least half of the log came
    /// after this driver's previous snapshot. A snapshot costs the size of the
    /// state, so spacing them in proportion to the log keeps their cost per event
    /// constant however long the session runs; loading stays linear in the log
    /// (the snapshot itself, then at most half of it). A failed save is
    /// ignored: snapshots are a cache.
    async fn maybe_snapshot(&mut self, before: u64) {
        let Some(every) = self.engine.snapshot_every else {
            return;
        };
        let last = self.state.last_seq();
        if last / every == before / every || last - self.log.snapshot_at < last / SNAPSHOT_SPREAD {
            return;
        }
        if let Ok(snapshot) = snapshot_of(&self.state) {
            let saved = self
                .engine
                .store
                .save_snapshot(self.state.session_id(), last, &snapshot)
                .await;
            if saved.is_ok() {
                self.log.snapshot_at = last;
            }
        }
    }

    /// After a conflicting append at `expected`: when every event another writer
    /// added since then leaves this driver's work valid ([`commutes`]), folds
    /// the log again with them, places the uncommitted events after them and
    /// returns them; `None` when any of them does not (the caller reloads).
    /// A finish among the uncommitted events is withdrawn (with what follows
    /// it) when a message came that the model has not seen, so the message is
    /// answered; the flag says so.
    async fn rebase(&mut self, expected: u64) -> Result<Option<(Vec<Event>, bool)>, EngineError> {
        let session_id = self.state.session_id().to_owned();
        let foreign = self.engine.store.load_after(&session_id, expected).await?;
        if foreign.is_empty() || !foreign.iter().all(|event| commutes(&event.kind)) {
            return Ok(None);
        }
        let mut state = load_state(self.engine.store.as_ref(), &session_id).await?;
        if state.last_seq() != expected + foreign.len() as u64 {
            return Ok(None);
        }
        let message = foreign
            .iter()
            .any(|event| matches!(event.kind, EventKind::MessageQueued { .. }));
        let mut placed = Vec::with_capacity(self.log.unflushed.len());
        let mut withdrawn = false;
        for event in &self.log.unflushed {
            if message && matches!(event.kind, EventKind::Finished { .. }) {
                withdrawn = true;
                break;
            }
            let event = Event {
                seq: state.last_seq() + 1,
                ..event.clone()
            };
            if state.apply(&event).is_err() {
                return Ok(None);
            }
            placed.push(event);
        }
        self.state = state;
        self.log.unflushed_steps.truncate(placed.len());
        self.log.unflushed = placed;
        Ok(Some((foreign, withdrawn)))
    }

    /// Drops uncommitted events and folds the log again, after a write by another
    /// process (a cancel, a conflict); the events this driver did not write are
    /// published to its sinks. Work in flight is abandoned. Fails if the lease was
    /// lost.
    pub(super) async fn reload(&mut self) -> Result<(), EngineError> {
        if self.signal().is_lost() {
            return Err(StoreError::LeaseLost(self.state.session_id().to_owned()).into());
        }
        let committed = self.signal().last_committed();
        let state = load_state(self.engine.store.as_ref(), self.state.session_id()).await?;
        let foreign = self
            .engine
            .store
            .load_after(self.state.session_id(), committed)
            .await?;
        for event in foreign.iter().filter(|event| event.seq <= state.last_seq()) {
            for sink in &self.engine.sinks {
                sink.publish(event, state.steps_used())?;
            }
        }
        self.state = state;
        self.signal().committed_up_to(self.state.last_seq());
        self.log.unflushed.clear();
        self.log.unflushed_steps.clear();
        self.work = Default::default();
        self.needs_recovery = true;
        Ok(())
    }
}

/// A store that cannot take a commit for now, while the driver waits it out.
#[derive(Default)]
struct Outage {
    since: Option<std::time::Instant>,
    delay: std::time::Duration,
}

impl Outage {
    /// Longest wait between two tries.
    const MAX_DELAY: std::time::Duration = std::time::Duration::from_secs(2);

    /// Waits before the next try (doubling, from 50 ms to 2 s); `false` once
    /// `patience` has passed since the first failure.
    async fn wait(&mut self, patience: std::time::Duration, err: &StoreError) -> bool {
        let since = *self.since.get_or_insert_with(|| {
            tracing::warn!(error = %err, "the store cannot take a commit; retrying");
            std::time::Instant::now()
        });
        if since.elapsed() >= patience {
            return false;
        }
        self.delay = (self.delay * 2).clamp(std::time::Duration::from_millis(50), Self::MAX_DELAY);
        tokio::time::sleep(self.delay).await;
        true
    }

    /// Says so when a commit went through after failures.
    fn over(&self) {
        if let Some(since) = self.since {
            tracing::warn!(
                waited_ms = since.elapsed().as_millis() as u64,
                "the store takes commits again"
            );
        }
    }
}

/// A snapshot follows the previous one after at least `1 / SNAPSHOT_SPREAD` of
/// the log.
const SNAPSHOT_SPREAD: u64 = 2;

/// Says on the `tracing` log what an event records: retries and breaker
/// transitions at info (the metrics count them), every other event at debug.
fn log_event(event: &Event) {
    match &event.kind {
        EventKind::ModelRetried {
            attempt,
            error,
            delay_ms,
        } => tracing::info!(
            target: telemetry::RETRY_TARGET,
            kind = "model",
            attempt,
            delay_ms,
            error = error.as_str(),
            "model call retried"
        ),
        EventKind::ActionAttemptFailed {
            tool_name,
            attempt,
            error,
            delay_ms,
            ..
        } => tracing::info!(
            target: telemetry::RETRY_TARGET,
            kind = "tool",
            tool = tool_name.as_str(),
            attempt,
            delay_ms,
            error = error.as_str(),
            "tool call retried"
        ),
        EventKind::CircuitChanged { tool_name, state } => tracing::info!(
            target: telemetry::CIRCUIT_TARGET,
            tool = tool_name.as_str(),
            state = ?state,
            "circuit breaker changed state"
        ),
        kind => tracing::debug!(seq = event.seq, kind = kind.name(), "event recorded"),
    }
}
