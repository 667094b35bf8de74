//! Reflection (`reflect_every`): every N steps, before the next decision, the
//! model is asked in a separate request — the history it would see, no tools —
//! whether it is closer to the goal or going in circles. Its answer is recorded
//! as a `reflection` event, whose note enters the history, so the next decision
//! sees it. Nothing is recorded until the answer is in.

use std::sync::Arc;

use async_trait::async_trait;

use super::{HookPoint, Hooked, StepHook};
use crate::engine::driver::Driver;
use crate::error::EngineError;
use agent_core::context::reflection_digest;
use agent_core::event::EventKind;
use agent_core::history::HistoryItem;
use agent_core::model::{CallPurpose, ModelRequest};

/// What the reflection request asks.
const REFLECT: &str = "Do not call a tool now. Look back over the steps so far: are you getting closer to answering the task, or going in circles (calling the same tools with the same arguments, getting the same results)? In two or three sentences, say what you have learned and what you will do next; if you have enough, say that you will finish.";

/// The hook: before a model call, once every `reflect_every` steps answered.
pub(super) struct Reflection;

#[async_trait]
impl StepHook for Reflection {
    async fn consult(
        &self,
        driver: &mut Driver<'_>,
        point: &HookPoint<'_>,
    ) -> Result<Hooked, EngineError> {
        let HookPoint::ModelCall { call, view } = point else {
            return Ok(Hooked::Pass);
        };
        let Some(every) = driver.engine.reflect_every else {
            return Ok(Hooked::Pass);
        };
        let answered = driver.state.steps_used();
        if answered == 0
            || !answered.is_multiple_of(every)
            || driver.state.reflected_at() >= answered
        {
            return Ok(Hooked::Pass);
        }
        driver.reflect(&call.instructions, Arc::clone(view)).await?;
        Ok(Hooked::Took)
    }
}

impl Driver<'_> {
    /// Asks for and records the reflection after the steps answered so far.
    async fn reflect(
        &mut self,
        instructions: &str,
        history: Arc<Vec<HistoryItem>>,
    ) -> Result<(), EngineError> {
        let engine = self.engine;
        let step = self.state.steps_used();
        let request = ModelRequest {
            instructions: format!("{instructions}\n\n{REFLECT}"),
            task: self.state.task().to_owned(),
            history,
            tools: Arc::new(Vec::new()),
            max_output_tokens: engine.max_output_tokens,
            output_schema: None,
        };
        let every = engine.reflect_every.unwrap_or(1).max(1);
        let purpose = CallPurpose::Reflection {
            index: step / every,
        };
        let what = format!("reflection after step {step}");
        let Some(reply) = self.side_reply(&request, step, purpose, &what).await? else {
            return Ok(());
        };
        let note = reply.text.unwrap_or_else(|| {
            format!(
                "{} (The model's reflection held no text, so the runtime wrote this one.)",
                reflection_digest(&request.history)
            )
        });
        self.record(EventKind::Reflection {
            step,
            note,
            usage: reply.usage,
        })
    }
}
