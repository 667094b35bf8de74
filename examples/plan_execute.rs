//! Plan-and-Execute on a scripted model: the model writes a two-step plan, each
//! step runs as a small ReAct loop whose finish is the step's result, and a last
//! call composes the answer. The plan and step results are events in the log.
//!
//! `cargo run -p examples --example plan_execute`

use std::sync::Arc;

use agent::event::EventKind;
use agent::prelude::*;
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let model = ScriptedModel::from_values(vec![
        json!({"type": "plan", "steps": [
            {"goal": "multiply 12 by 7", "tool": "calculator"},
            {"goal": "check whether the product is above 80", "tool": "calculator"}]}),
        json!({"type": "tool_call", "tool_name": "calculator",
               "arguments": {"left": 12, "operation": "multiply", "right": 7}}),
        json!({"type": "finish", "answer": "84"}),
        json!({"type": "tool_call", "tool_name": "calculator",
               "arguments": {"left": 84, "operation": "subtract", "right": 80}}),
        json!({"type": "finish", "answer": "84 - 80 = 4 > 0, so it is above 80"}),
        json!({"type": "finish", "answer": "12 × 7 = 84, which is above 80."}),
    ])
    .map_err(anyhow::Error::msg)?;
    let mut tools = ToolRegistry::new();
    tools.register_typed::<Calculator>()?;
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::builder(Arc::new(model), Arc::new(PlanExecute::new()))
        .tools(tools.into_toolbox())
        .store(store.clone())
        .build();
    let result = engine
        .run("What is 12 times 7, and is it above 80?", json!({}))
        .await?;

    for event in store.load(&result.session_id).await? {
        if let EventKind::Strategy { name, data, .. } = event.kind {
            println!("{name}: {data}");
        }
    }
    println!("answer: {}", result.answer.as_deref().unwrap_or(""));
    anyhow::ensure!(
        result.exit_reason == ExitReason::Finished,
        "the plan did not finish"
    );
    Ok(())
}
