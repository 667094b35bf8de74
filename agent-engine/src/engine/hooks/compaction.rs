//! The summary a context policy asks for before a model call: the oldest turns
//! go to the model as one summary request (bounded like any wait), and its
//! answer is recorded as `context_compacted`; the driver then decides again, so
//! the next model call sees the compacted history and the summary is committed
//! before it. Nothing is recorded until the summary is in, so a crash during
//! the request simply asks again on resume.

use std::sync::Arc;

use async_trait::async_trait;

use super::{HookPoint, Hooked, StepHook};
use crate::engine::driver::{Driver, internal_failure};
use crate::error::EngineError;
use agent_core::context::{Compaction, ContextInput, ContextPolicy, digest};
use agent_core::event::EventKind;
use agent_core::history::HistoryItem;
use agent_core::model::{CallPurpose, ModelRequest};

/// The hook: before a model call that would send the whole history, asks the
/// engine's context policy whether to summarise its oldest turns.
pub(super) struct ContextCompaction;

#[async_trait]
impl StepHook for ContextCompaction {
    async fn consult(
        &self,
        driver: &mut Driver<'_>,
        point: &HookPoint<'_>,
    ) -> Result<Hooked, EngineError> {
        let HookPoint::ModelCall { call, .. } = point else {
            return Ok(Hooked::Pass);
        };
        let engine = driver.engine;
        let Some(policy) = &engine.context else {
            return Ok(Hooked::Pass);
        };
        if !driver.state.is_whole_history(&call.history) {
            return Ok(Hooked::Pass);
        }
        let tools = engine.tools.specs();
        let task = driver.state.task().to_owned();
        let input = ContextInput {
            instructions: &call.instructions,
            task: &task,
            tools: &tools,
            history: &call.history,
        };
        let Some(compaction) = policy.compaction(&input) else {
            return Ok(Hooked::Pass);
        };
        driver.compact(policy.as_ref(), &input, compaction).await?;
        Ok(Hooked::Took)
    }
}

impl Driver<'_> {
    /// Makes and records the summary `compaction` asks for.
    async fn compact(
        &mut self,
        policy: &dyn ContextPolicy,
        input: &ContextInput<'_>,
        compaction: Compaction,
    ) -> Result<(), EngineError> {
        let (replaced, kept) = input
            .history
            .split_at(compaction.items.min(input.history.len()));
        let Some((from_seq, to_seq)) = self.state.seqs_of_leading(replaced.len()) else {
            return self.record(internal_failure(format!(
                "the context policy `{}` asked to summarise {} history items of {}",
                policy.spec(),
                compaction.items,
                input.history.len()
            )));
        };
        let request = ModelRequest {
            instructions: compaction.instructions,
            task: input.task.to_owned(),
            history: Arc::new(replaced.to_vec()),
            tools: Arc::new(Vec::new()),
            max_output_tokens: Some(compaction.max_output_tokens),
            output_schema: None,
        };
        let purpose = CallPurpose::Summary {
            index: self.state.compactions() + 1,
        };
        let step = self.state.steps_used();
        let Some(reply) = self
            .side_reply(&request, step, purpose, "summary of the context")
            .await?
        else {
            return Ok(());
        };
        let summary = match (reply.invalid, reply.text) {
            (Some(why), _) => unusable(&why, &request.history),
            (None, Some(text)) => text,
            (None, None) => unusable("it held no text", &request.history),
        };
        let mut compacted = Vec::with_capacity(kept.len() + 1);
        compacted.push(HistoryItem::Summary {
            text: summary.clone(),
        });
        compacted.extend_from_slice(kept);
        let compacted = Arc::new(compacted);
        let counter = policy.counter();
        self.record(EventKind::ContextCompacted {
            from_seq,
            to_seq,
            summary,
            tokens_before: input.tokens(counter),
            tokens_after: input.with_history(&compacted).tokens(counter),
            usage: reply.usage,
        })
    }
}

/// The runtime's digest in place of a summary the model could not give.
fn unusable(why: &str, replaced: &[HistoryItem]) -> String {
    format!(
        "{} (The model's summary was unusable — {why} — so the runtime wrote this one.)",
        digest(replaced)
    )
}
