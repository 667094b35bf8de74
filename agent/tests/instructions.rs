//! The agent's instructions (`EngineBuilder::instructions`) reach every request
//! ahead of the strategy's own: ReAct, Plan-and-Execute (plan, steps and the
//! final answer), Human-in-the-Loop wrapping either, and a workflow's model nodes.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::{Arc, Mutex};

use agent::model::{ModelContext, ModelError, ModelRequest, ModelResponse};
use agent::prelude::*;
use agent::strategies::{ApprovalPolicy, Hitl};
use agent::strategy::ExecutionStrategy;
use async_trait::async_trait;
use serde_json::{Value, json};

const INSTRUCTIONS: &str = "You work for ACME. Be brief.";

/// Answers from a script and keeps each request's instructions.
struct Recording {
    inner: ScriptedModel,
    seen: Mutex<Vec<String>>,
}

#[async_trait]
impl Model for Recording {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        self.seen.lock().unwrap().push(request.instructions.clone());
        self.inner.complete(request, ctx).await
    }
}

async fn instructions_seen(
    strategy: Arc<dyn ExecutionStrategy>,
    script: Vec<Value>,
) -> Vec<String> {
    let model = Arc::new(Recording {
        inner: ScriptedModel::from_values(script).unwrap(),
        seen: Mutex::new(Vec::new()),
    });
    let mut tools = ToolRegistry::new();
    tools.register_typed::<Calculator>().unwrap();
    let engine = Engine::builder(model.clone(), strategy)
        .tools(tools.into_toolbox())
        .instructions(INSTRUCTIONS)
        .build();
    let result = engine.run("add 1 and 2", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished, "{result:?}");
    model.seen.lock().unwrap().clone()
}

fn assert_all_start_with_the_agents(seen: &[String]) {
    assert!(!seen.is_empty());
    for instructions in seen {
        assert!(
            instructions.starts_with(INSTRUCTIONS) && instructions.len() > INSTRUCTIONS.len(),
            "the agent's instructions, then the strategy's: {instructions}"
        );
    }
}

#[tokio::test]
async fn every_strategys_requests_carry_the_agents_instructions_first() {
    let add = json!({"type": "tool_call", "tool_name": "calculator",
        "arguments": {"left": 1, "operation": "add", "right": 2}});
    let finish = json!({"type": "finish", "answer": "3"});
    let react = instructions_seen(Arc::new(ReAct::new()), vec![add.clone(), finish.clone()]).await;
    assert_all_start_with_the_agents(&react);
    let hitl = instructions_seen(
        Arc::new(Hitl::new(ReAct::new(), ApprovalPolicy::new())),
        vec![add.clone(), finish.clone()],
    )
    .await;
    assert_all_start_with_the_agents(&hitl);
    let plan = instructions_seen(
        Arc::new(PlanExecute::new()),
        vec![
            json!({"type": "plan", "steps": [{"goal": "add"}]}),
            add,
            json!({"type": "finish", "answer": "added"}),
            finish,
        ],
    )
    .await;
    assert_eq!(plan.len(), 4);
    assert_all_start_with_the_agents(&plan);
    let workflow = DagBuilder::new("ask")
        .node("answer", Node::model("Add 1 and 2."))
        .output("answer")
        .build()
        .unwrap();
    let dag = instructions_seen(
        Arc::new(workflow),
        vec![json!({"type": "finish", "answer": "3"})],
    )
    .await;
    assert_all_start_with_the_agents(&dag);
}
