//! The work step: strategy work (a workflow's ready nodes) runs concurrently, at
//! most `limit` at once, in a set the driver keeps across decisions. Each time the
//! strategy asks for work, items not yet running are guarded and started, the
//! driver waits for the next one to complete, records and commits its result, and
//! hands control back to the loop, which asks the strategy again — so newly ready
//! work starts while other work runs, and a strategy error ends the run like any
//! other.

use std::collections::HashMap;

use tokio::task::JoinSet;

use super::driver::{Driver, internal_failure};
use crate::call::panic_message;
use crate::error::EngineError;
use crate::event::EventKind;
use crate::guard::Checkpoint;
use crate::store::Durability;
use crate::strategy::{Work, WorkContext, WorkRecord};

/// Strategy work in flight, by key.
#[derive(Default)]
pub(super) struct WorkSet {
    running: JoinSet<WorkRecord>,
    keys: HashMap<tokio::task::Id, String>,
}

impl WorkSet {
    fn is_running(&self, key: &str) -> bool {
        self.keys.values().any(|running| running == key)
    }
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
            if !self.guarded(Checkpoint::Work(&item.key)).await? {
                return Ok(());
            }
            let ctx = self.work_context();
            let job = item.job;
            let handle = self
                .work
                .running
                .spawn(async move { job.perform(&ctx).await });
            self.work.keys.insert(handle.id(), item.key);
        }
        let mut work = std::mem::take(&mut self.work);
        let joined = self.bounds.wait(work.running.join_next_with_id()).await;
        self.work = work;
        let Some(Some(joined)) = self.settle(joined).await? else {
            return Ok(());
        };
        let kind = match joined {
            Ok((id, record)) => {
                self.work.keys.remove(&id);
                EventKind::Strategy {
                    strategy: self.engine.strategy.name().to_owned(),
                    name: record.name,
                    data: record.data,
                    usage: record.usage,
                }
            }
            Err(err) => {
                let key = self.work.keys.remove(&err.id()).unwrap_or_default();
                internal_failure(format!("work `{key}` panicked: {}", panic_message(err)))
            }
        };
        self.record(kind)?;
        if !self.state.status().is_terminal() {
            self.flush(Durability::Full).await?;
        }
        Ok(())
    }

    fn work_context(&self) -> WorkContext {
        WorkContext {
            session_id: self.state.session_id().to_owned(),
            task: self.state.task().to_owned(),
            model: std::sync::Arc::clone(&self.engine.model),
            tools: self.engine.tools.clone(),
            workspace: std::sync::Arc::clone(&self.engine.workspace),
            max_output_tokens: self.engine.max_output_tokens,
        }
    }
}
