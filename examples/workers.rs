//! The work queue in code: twenty sessions submitted to a SQLite store and run by
//! three workers, which share the sessions' model steps and tool calls between
//! them (each session sleeps, then appends its line to a journal). Each worker
//! prints what it did; every line is in the journal exactly once.
//!
//! `cargo run -p examples --example workers`

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agent::cancel::Cancellation;
use agent::state::PublicStatus;
use agent::store::Store;
use agent_runtime::{AgentSpec, SessionConfig, Worker};
use serde_json::json;

const SESSIONS: usize = 20;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("workers-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let url = format!("sqlite://{}", dir.join("agent.db").display());
    let store: Arc<dyn Store> = agent::store::open_url(&url, true).await?;

    let mut ids = Vec::new();
    for n in 0..SESSIONS {
        let script = dir.join(format!("script-{n}.json"));
        std::fs::write(
            &script,
            json!([
                {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": 0.2}},
                {"type": "tool_call", "tool_name": "append_line",
                 "arguments": {"path": "journal.txt", "line": format!("session {n}")}},
                {"type": "finish", "answer": format!("session {n} is in the journal")}
            ])
            .to_string(),
        )?;
        let options = AgentSpec {
            model: Some(format!("scripted:{}", script.display())),
            tools: Some(vec!["sleep".into(), "append_line".into()]),
            workspace: Some(dir.clone()),
            ..AgentSpec::default()
        };
        let config = SessionConfig::resolve(&options, None, &dir)?;
        ids.push(
            agent_runtime::submit(&config, store.clone(), format!("journal entry {n}")).await?,
        );
    }
    println!("submitted {} sessions", ids.len());

    let shutdown = Cancellation::new();
    let workers: Vec<_> = ["first", "second", "third"]
        .into_iter()
        .map(|name| {
            let worker = Worker::builder(store.clone())
                .name(name)
                .concurrency(8)
                .shutdown(shutdown.clone())
                .log(Arc::new(|_line: &str| {}))
                .build();
            (name, tokio::spawn(worker.run()))
        })
        .collect();

    loop {
        let sessions = store.sessions().await?;
        let finished = sessions
            .iter()
            .filter(|summary| summary.status == PublicStatus::Finished)
            .count();
        if finished == SESSIONS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    shutdown.cancel();
    for (name, worker) in workers {
        let report = worker.await?;
        println!(
            "worker {name}: {} drive(s), {} tool call(s)",
            report.drives, report.actions
        );
    }

    let journal = std::fs::read_to_string(dir.join("journal.txt"))?;
    let lines: Vec<&str> = journal.lines().collect();
    let unique: BTreeSet<&str> = lines.iter().copied().collect();
    println!(
        "journal: {} line(s), {} distinct",
        lines.len(),
        unique.len()
    );
    anyhow::ensure!(
        lines.len() == SESSIONS && unique.len() == SESSIONS,
        "every session writes its line once"
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
