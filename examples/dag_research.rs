//! A research workflow as a DAG: fan out over three sub-questions (model nodes
//! that run concurrently), join, summarise. Runs are durable sessions in SQLite.
//!
//! ```sh
//! cargo run -p examples --example dag_research                      # a fresh run to the end
//! cargo run -p examples --example dag_research -- --crash-after-two # SIGKILLs itself after 2 of 3 answers
//! cargo run -p examples --example dag_research -- --resume SESSION  # runs only what is left
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent::event::{Event, EventKind};
use agent::prelude::*;
use agent::sink::{EventSink, SinkError};
use serde_json::json;

/// Prints the session id, and with `--crash-after-two` kills the process once two
/// sub-questions are answered and committed.
struct Crasher {
    crash: bool,
    answered: AtomicUsize,
}

impl EventSink for Crasher {
    fn publish(&self, event: &Event, _step: u32) -> Result<(), SinkError> {
        match &event.kind {
            EventKind::SessionStarted { .. } => println!("session {}", event.session_id),
            EventKind::Strategy { name, data, .. } if name == "node_completed" => {
                println!("completed {}", data["node"].as_str().unwrap_or("?"));
                let asked = data["node"]
                    .as_str()
                    .is_some_and(|node| node.starts_with("ask."));
                if self.crash && asked && self.answered.fetch_add(1, Ordering::SeqCst) + 1 == 2 {
                    println!("crashing after two answers");
                    let _ = rustix::process::kill_process(
                        rustix::process::getpid(),
                        rustix::process::Signal::KILL,
                    );
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let resume = args
        .iter()
        .position(|a| a == "--resume")
        .and_then(|i| args.get(i + 1));
    let dir = std::env::temp_dir();
    let model = ScriptedModel::from_values(vec![
        json!({"type": "finish", "answer": "Ownership frees memory without a garbage collector."}),
        json!({"type": "finish", "answer": "The borrow checker rules out data races at compile time."}),
        json!({"type": "finish", "answer": "Zero-cost abstractions keep high-level code fast."}),
        json!({"type": "finish", "answer": "Rust is memory-safe, race-free and fast without a GC."}),
    ])
    .map_err(anyhow::Error::msg)?;
    let questions = ["memory management", "concurrency", "performance"];
    let dag = DagBuilder::new("research")
        .fan_out("ask", None, questions, |topic| {
            Node::model(format!("What does {{{{task}}}} offer for {topic}?"))
        })
        .join(
            "summary",
            "ask",
            Node::model("Summarise in one sentence:\n{{ask.*}}"),
        )
        .output("summary")
        .build()?;
    let crasher = Crasher {
        crash: args.iter().any(|a| a == "--crash-after-two"),
        answered: AtomicUsize::new(0),
    };
    let engine = Engine::builder(Arc::new(model), Arc::new(dag))
        .store(Arc::new(SqliteStore::open(
            dir.join("agent-dag-research.db"),
        )?))
        .sink(Arc::new(JsonlTrace::open(
            dir.join("agent-dag-research.jsonl"),
            ContentMode::Summary,
        )?))
        .sink(Arc::new(crasher))
        .build();
    let result = match resume {
        Some(id) => engine.resume(id).await?,
        None => engine.run("Rust", json!({})).await?,
    };
    println!(
        "{:?}: {}",
        result.exit_reason,
        result.answer.as_deref().unwrap_or("")
    );
    anyhow::ensure!(
        result.exit_reason == ExitReason::Finished,
        "the workflow did not finish"
    );
    Ok(())
}
