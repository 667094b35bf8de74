//! The summary a context policy asks for before a model call: the oldest turns
//! go to the model as one summary request (bounded like any wait), and its
//! answer is recorded as `context_compacted`; the driver then decides again, so
//! the next model call sees the compacted history and the summary is committed
//! before it. Nothing is recorded until the summary is in, so a crash during
//! the request simply asks again on resume.

use std::sync::Arc;

use super::driver::{Driver, internal_failure};
use crate::context::{Compaction, ContextInput, ContextPolicy, digest};
use crate::error::EngineError;
use crate::event::EventKind;
use crate::history::HistoryItem;
use crate::model::{CallPurpose, ModelError, ModelRequest, ModelResponse};
use crate::result::ExitReason;
use crate::types::{Action, Usage};

impl Driver<'_> {
    /// Makes and records the summary `compaction` asks for.
    pub(super) async fn compact(
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
        let aside = self
            .ask_aside(
                &request,
                self.state.steps_used(),
                CallPurpose::Summary {
                    index: self.state.compactions() + 1,
                },
                None,
            )
            .await;
        let Some(outcome) = self.settle(aside.outcome).await? else {
            return Ok(());
        };
        for report in aside.reports {
            self.record_timed(report)?;
        }
        let (summary, usage) = match outcome {
            Ok(response) => summary_of(response, &request.history),
            Err(ModelError::InvalidOutput { message, usage, .. }) => {
                (unusable(&message, &request.history), usage)
            }
            Err(err @ (ModelError::Transient { .. } | ModelError::Fatal { .. })) => {
                return self.record(EventKind::Failed {
                    exit_reason: ExitReason::ProviderError,
                    budget: None,
                    error: Some(format!("summary of the context: {err}")),
                });
            }
            Err(ModelError::Internal { message }) => return self.record(internal_failure(message)),
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
            usage,
        })
    }
}

/// The summary a response holds — its finish's answer, else its text — or the
/// runtime's digest when it holds none.
fn summary_of(response: ModelResponse, replaced: &[HistoryItem]) -> (String, Usage) {
    let answer = response
        .actions
        .into_iter()
        .find_map(|action| match action {
            Action::Finish(finish) => Some(finish.answer),
            _ => None,
        });
    let text = answer
        .or(response.text)
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty());
    let summary = text.unwrap_or_else(|| unusable("it held no text", replaced));
    (summary, response.usage)
}

/// The runtime's digest in place of a summary the model could not give.
fn unusable(why: &str, replaced: &[HistoryItem]) -> String {
    format!(
        "{} (The model's summary was unusable — {why} — so the runtime wrote this one.)",
        digest(replaced)
    )
}
