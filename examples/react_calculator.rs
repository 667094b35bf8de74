//! ReAct on a scripted model with the calculator: the model asks for 12 × 7, reads
//! the observation and finishes. Prints the RunResult and the JSONL trace.
//!
//! `cargo run -p examples --example react_calculator`

use std::sync::Arc;

use agent::prelude::*;
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let model = ScriptedModel::from_values(vec![
        json!({"type": "tool_call", "tool_name": "calculator",
               "arguments": {"left": 12, "operation": "multiply", "right": 7}}),
        json!({"type": "finish", "answer": "12 times 7 is 84, which is above 80."}),
    ])
    .map_err(anyhow::Error::msg)?;

    let mut tools = ToolRegistry::new();
    tools.register_typed::<Calculator>()?;

    let trace_path =
        std::env::temp_dir().join(format!("react_calculator-{}.jsonl", std::process::id()));
    let trace = JsonlTrace::open(&trace_path, ContentMode::Full)?;

    let engine = Engine::builder(Arc::new(model), Arc::new(ReAct::new()))
        .tools(tools.into_toolbox())
        .sink(Arc::new(trace))
        .build();
    let result = engine
        .run("What is 12 times 7, and is it above 80?", json!({}))
        .await?;

    println!("{}", serde_json::to_string_pretty(&result)?);
    println!("\ntrace ({}):", trace_path.display());
    print!("{}", std::fs::read_to_string(&trace_path)?);
    std::fs::remove_file(&trace_path)?;
    anyhow::ensure!(
        result.exit_reason == ExitReason::Finished,
        "the run did not finish"
    );
    Ok(())
}
