//! Human approval in the library: `append_line` needs approval, so the session
//! pauses durably with the call pending; the code approves it (as a person would
//! with `agent approve`) and resumes; the call runs and the session finishes.
//!
//! `cargo run -p examples --example approval`

use std::sync::Arc;

use agent::prelude::*;
use agent::tools::AppendLine;
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let workspace = std::env::temp_dir().join(format!("approval-example-{}", std::process::id()));
    std::fs::create_dir_all(&workspace)?;
    let model = ScriptedModel::from_values(vec![
        json!({"type": "tool_call", "tool_name": "append_line",
               "arguments": {"path": "journal.txt", "line": "approved by a human"}}),
        json!({"type": "finish", "answer": "The line is in journal.txt."}),
    ])
    .map_err(anyhow::Error::msg)?;
    let mut tools = ToolRegistry::new();
    tools.register_typed::<AppendLine>()?;
    let policy = ApprovalPolicy::new().tools(["append_line"]);
    let engine = Engine::builder(Arc::new(model), Arc::new(Hitl::new(ReAct::new(), policy)))
        .tools(tools.into_toolbox())
        .workspace(&workspace)
        .build();

    let paused = engine
        .run("Note that a human approved this.", json!({}))
        .await?;
    println!("{:?}, pending: {:?}", paused.exit_reason, paused.pending);
    anyhow::ensure!(
        paused.exit_reason == ExitReason::AwaitingApproval,
        "expected a pause"
    );
    anyhow::ensure!(
        !workspace.join("journal.txt").exists(),
        "nothing may run before approval"
    );

    let decided = engine
        .approve(&paused.session_id, None, None, "example")
        .await?;
    println!("approved: {decided:?}");
    let finished = engine.resume(&paused.session_id).await?;
    println!(
        "{:?}: {}",
        finished.exit_reason,
        finished.answer.as_deref().unwrap_or("")
    );
    print!(
        "journal.txt: {}",
        std::fs::read_to_string(workspace.join("journal.txt"))?
    );
    std::fs::remove_dir_all(&workspace)?;
    anyhow::ensure!(
        finished.exit_reason == ExitReason::Finished,
        "the session did not finish"
    );
    Ok(())
}
