//! The work step: strategy work (a workflow's ready nodes) runs concurrently, at
//! most `limit` at once, in a set the driver keeps across decisions. Each time the
//! strategy asks for work, items not yet running are guarded and started, the
//! driver waits for the next one to complete, records and commits its result, and
//! hands control back to the loop, which asks the strategy again — so newly ready
//! work starts while other work runs, and a strategy error ends the run like any
//! other.

use super::driver::{Driver, internal_failure};
use crate::call::panic_message;
use crate::error::EngineError;
use agent_core::event::{ApprovalDecision, EventKind};
use agent_core::guard::Checkpoint;
use agent_core::store::Durability;
use agent_core::strategy::{Work, WorkContext, WorkRecord};
use agent_core::types::ToolCall;

/// Where a piece of work stands as far as approval goes.
enum WorkApproval {
    /// It makes no call that needs a decision.
    Free,
    /// Its call waits for a decision.
    Undecided(ToolCall),
    /// Its call was approved, perhaps with these arguments.
    Approved(Option<serde_json::Value>),
    /// Its call was denied for this reason.
    Denied(String),
}

impl Driver<'_> {
    /// Starts what of `work` is not running yet (within `limit`), then records the
    /// next piece to complete.
    pub(super) async fn run_work(
        &mut self,
        work: Vec<Work>,
        limit: usize,
    ) -> Result<(), EngineError> {
        if work.is_empty() && self.work.keys.is_empty() {
            return self.record(internal_failure(format!(
                "strategy `{}` asked to run no work",
                self.engine.strategy.name()
            )));
        }
        for item in work {
            if self.work.keys.len() >= limit.max(1) {
                break;
            }
            if self.work.is_running(&item.key) {
                continue;
            }
            let mut ctx = self.work_context();
            match self.work_approval(&item, &ctx) {
                WorkApproval::Free => {}
                WorkApproval::Approved(arguments) => ctx.approved_arguments = arguments,
                WorkApproval::Denied(reason) => {
                    let record = item.job.denied(&reason);
                    return self.record_work(record).await;
                }
                WorkApproval::Undecided(call) if self.work.keys.is_empty() => {
                    return self.record(EventKind::ApprovalRequested { calls: vec![call] });
                }
                // Asked for once the work in flight is done, since a session
                // that waits for a human runs nothing.
                WorkApproval::Undecided(_) => continue,
            }
            if !self.guarded(Checkpoint::Work(&item.key)).await? {
                return Ok(());
            }
            let job = item.job;
            let handle = self
                .work
                .running
                .spawn(async move { job.perform(&ctx).await });
            self.work.keys.insert(handle.id(), item.key);
        }
        if self.work.keys.is_empty() {
            return Ok(());
        }
        let mut work = std::mem::take(&mut self.work);
        let joined = self.bounds.wait(work.running.join_next_with_id()).await;
        self.work = work;
        let Some(Some(joined)) = self.settle(joined).await? else {
            return Ok(());
        };
        match joined {
            Ok((id, record)) => {
                self.work.keys.remove(&id);
                self.record_work(record).await
            }
            Err(err) => {
                let key = self.work.keys.remove(&err.id()).unwrap_or_default();
                self.record(internal_failure(format!(
                    "work `{key}` panicked: {}",
                    panic_message(err)
                )))
            }
        }
    }

    /// Records the result of a piece of work and commits it.
    async fn record_work(&mut self, record: WorkRecord) -> Result<(), EngineError> {
        self.record(EventKind::Strategy {
            strategy: self.engine.strategy.name().to_owned(),
            name: record.name,
            data: record.data,
            usage: record.usage,
        })?;
        if !self.state.status().is_terminal() {
            self.flush(Durability::Full).await?;
        }
        Ok(())
    }

    /// Whether `item` may start as far as approval goes.
    fn work_approval(&self, item: &Work, ctx: &WorkContext) -> WorkApproval {
        let Some(call) = item.job.tool_call(ctx) else {
            return WorkApproval::Free;
        };
        if !self.tool_needs_approval(&call.tool_name) {
            return WorkApproval::Free;
        }
        match self.state.work_decision(&call.id) {
            None => WorkApproval::Undecided(call),
            Some(ApprovalDecision::Approved { arguments }) => {
                WorkApproval::Approved(arguments.clone())
            }
            Some(ApprovalDecision::Denied { reason }) => WorkApproval::Denied(reason.clone()),
        }
    }

    fn work_context(&self) -> WorkContext {
        WorkContext {
            session_id: self.state.session_id().to_owned(),
            task: self.state.task().to_owned(),
            model: std::sync::Arc::clone(&self.engine.model),
            tools: self.engine.tools.clone(),
            workspace: std::sync::Arc::clone(&self.engine.workspace),
            max_output_tokens: self.engine.max_output_tokens,
            approved_arguments: None,
            instructions: self.engine.instructions.clone(),
        }
    }
}
