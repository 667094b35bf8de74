//! What a step costs does not grow with the session: the history a model request
//! carries is the session's own, grown in place, never copied per step.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::{Arc, Mutex};

use agent::model::{ModelContext, ModelError, ModelRequest, ModelResponse};
use agent::prelude::*;
use agent::types::{Action, ToolCall};
use async_trait::async_trait;
use serde_json::json;

/// Calls the calculator `calls` times, then finishes; remembers where each
/// request's history lives and how long it is, and keeps nothing else.
struct Counting {
    calls: u32,
    seen: Mutex<Vec<(usize, usize)>>,
}

#[async_trait]
impl Model for Counting {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let at = Arc::as_ptr(&request.history) as usize;
        self.seen.lock().unwrap().push((at, request.history.len()));
        let action = if ctx.step <= self.calls {
            Action::ToolCall(ToolCall {
                id: format!("call_{}", ctx.step),
                tool_name: "calculator".into(),
                arguments: json!({"left": ctx.step, "operation": "add", "right": 1}),
            })
        } else {
            Action::Finish(agent::types::Finish {
                answer: "done".into(),
            })
        };
        Ok(ModelResponse {
            actions: vec![action],
            usage: agent::types::Usage::default(),
            text: None,
            model: None,
        })
    }
}

#[tokio::test]
async fn every_step_sends_the_same_growing_history_without_copying_it() {
    let model = Arc::new(Counting {
        calls: 300,
        seen: Mutex::new(Vec::new()),
    });
    let mut tools = ToolRegistry::new();
    tools.register_typed::<Calculator>().unwrap();
    let engine = Engine::builder(Arc::clone(&model) as Arc<dyn Model>, Arc::new(ReAct::new()))
        .tools(tools.into_toolbox())
        .budgets(Budgets {
            max_steps: 400,
            ..Budgets::default()
        })
        .build();
    let result = engine.run("count", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let seen = model.seen.lock().unwrap();
    assert_eq!(seen.len(), 301);
    let (first, _) = seen[0];
    for (step, (at, len)) in seen.iter().enumerate() {
        assert_eq!(
            *len,
            step * 2,
            "step {}: the history holds every turn",
            step + 1
        );
        assert_eq!(*at, first, "step {}: the history was copied", step + 1);
    }
}
