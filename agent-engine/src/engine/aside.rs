//! Model calls outside the step sequence — a context summary, a reflection,
//! the last answer after a limit: one request with its own purpose, made and
//! traced like a step's call, whose layers' reports (retries, fallbacks) the
//! caller records before the answer; [`outcome`](super::outcome) reads it.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::driver::{Bounded, Driver};
use super::outcome::{Reply, failure_event, record_chat};
use super::reports::{ModelReports, Reports};
use crate::call::Timed;
use crate::error::EngineError;
use crate::telemetry;
use agent_core::cancel::Cancellation;
use agent_core::model::{CallPurpose, ModelContext, ModelError, ModelRequest, ModelResponse};

/// How an aside call ended, and what the layers reported meanwhile.
pub(super) struct Aside {
    pub(super) outcome: Bounded<Result<ModelResponse, ModelError>>,
    pub(super) reports: Vec<Timed>,
}

impl Driver<'_> {
    /// The context of a model call for `purpose` at `step`, whose layers
    /// report to `reports`. A step's answer and a last answer (the run's
    /// answer) are streamed as they come; summaries and reflections are
    /// bookkeeping.
    pub(super) fn model_context(
        &self,
        step: u32,
        purpose: CallPurpose,
        reports: &Arc<Reports>,
    ) -> ModelContext {
        ModelContext {
            session_id: self.state.session_id().to_owned(),
            step,
            observer: Arc::new(ModelReports(Arc::clone(reports))),
            cancel: Cancellation::new(),
            purpose,
            deltas: self
                .engine
                .deltas
                .clone()
                .filter(|_| matches!(purpose, CallPurpose::Step | CallPurpose::LastAnswer)),
        }
    }

    /// Asks the model `request` for `purpose` at `step`, bounded by the run's
    /// deadline and the log moving, records the layers' reports and reads the
    /// reply. `None` when the step is over without one: the deadline's event
    /// or the failure of `what` was recorded, or the log moved and was
    /// reloaded.
    pub(super) async fn side_reply(
        &mut self,
        request: &ModelRequest,
        step: u32,
        purpose: CallPurpose,
        what: &str,
    ) -> Result<Option<Reply>, EngineError> {
        let aside = self.ask_aside(request, step, purpose, None).await;
        let Some(outcome) = self.settle(aside.outcome).await? else {
            return Ok(None);
        };
        for report in aside.reports {
            self.record_timed(report)?;
        }
        match Reply::read(outcome) {
            Ok(reply) => Ok(Some(reply)),
            Err(err) => {
                self.record(failure_event(err, what))?;
                Ok(None)
            }
        }
    }

    /// Asks the model `request` for `purpose` at `step`, bounded by the run's
    /// deadline — or, with `limit`, by that instead (the last answer, asked
    /// after the deadline passed) — and by the log moving.
    pub(super) async fn ask_aside(
        &self,
        request: &ModelRequest,
        step: u32,
        purpose: CallPurpose,
        limit: Option<Duration>,
    ) -> Aside {
        let engine = self.engine;
        let reports = Arc::new(Reports::default());
        let ctx = self.model_context(step, purpose, &reports);
        let span = telemetry::chat_span(self.state.session_id(), step, &engine.model.identity());
        let call = engine
            .model
            .complete(request, &ctx)
            .instrument(span.clone());
        let outcome = match limit {
            Some(limit) => self.bounds.wait_at_most(limit, call).await,
            None => self.bounds.wait(call).await,
        };
        ctx.cancel.cancel();
        record_chat(&span, &outcome, engine.record_content);
        Aside {
            outcome,
            reports: reports.take(),
        }
    }
}
