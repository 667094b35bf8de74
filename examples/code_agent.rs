//! A code agent fixes a failing test: it reads the fixture crate, tries to finish
//! early (the completion gate runs `cargo test`, which fails, and the model gets
//! the output), edits the bug, and finishes once the tests pass.
//!
//! `cargo run -p examples --example code_agent`

use std::path::Path;
use std::sync::Arc;

use agent::prelude::*;
use agent::tools::code::{EditFile, ReadFile};
use agent::tools::{CommandGate, DEFAULT_GATE_TIMEOUT};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let workspace = std::env::temp_dir().join(format!("code-agent-{}", std::process::id()));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/buggy_crate");
    std::fs::create_dir_all(workspace.join("src"))?;
    for file in ["Cargo.toml", "src/lib.rs"] {
        std::fs::copy(fixture.join(file), workspace.join(file))?;
    }

    let model = ScriptedModel::from_values(vec![
        json!({"type": "tool_call", "tool_name": "read_file", "arguments": {"path": "src/lib.rs"}}),
        json!({"type": "finish", "answer": "Looks fine to me."}),
        json!({"type": "tool_call", "tool_name": "edit_file",
               "arguments": {"path": "src/lib.rs", "old": "a - b", "new": "a + b"}}),
        json!({"type": "finish", "answer": "`add` subtracted; it adds now and the test passes."}),
    ])
    .map_err(anyhow::Error::msg)?;
    let mut tools = ToolRegistry::new();
    tools
        .register_typed::<ReadFile>()?
        .register_typed::<EditFile>()?;
    let gate = CommandGate::new(
        "cargo test --offline --quiet --target-dir target",
        DEFAULT_GATE_TIMEOUT,
    )
    .map_err(anyhow::Error::msg)?;
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::builder(Arc::new(model), Arc::new(ReAct::new()))
        .tools(tools.into_toolbox())
        .completion_gate(Arc::new(gate))
        .workspace(&workspace)
        .store(store.clone())
        .build();
    let result = engine
        .run("Make the tests of this crate pass.", json!({}))
        .await?;

    for event in store.load(&result.session_id).await? {
        match event.kind {
            agent::event::EventKind::ActionCompleted { observation } => {
                println!(
                    "{}: {}",
                    observation.tool_name,
                    observation.content.lines().next().unwrap_or("")
                );
            }
            agent::event::EventKind::FinishRejected { reason, .. } => println!("gate: {reason}"),
            _ => {}
        }
    }
    println!(
        "{:?}: {}",
        result.exit_reason,
        result.answer.as_deref().unwrap_or("")
    );
    std::fs::remove_dir_all(&workspace)?;
    anyhow::ensure!(
        result.exit_reason == ExitReason::Finished,
        "the agent did not fix the crate"
    );
    Ok(())
}
