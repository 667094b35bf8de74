//! Helpers for black-box tests that run the built `agent` binary.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

/// A scratch directory removed when dropped.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "agent-cli-{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes a script file of model responses and returns its path.
    pub fn script(&self, name: &str, responses: Value) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, serde_json::to_string_pretty(&responses).unwrap()).unwrap();
        path
    }

    /// Runs `agent ARGS` in this directory.
    pub fn agent(&self, args: &[&str]) -> Output {
        agent_command(&self.dir).args(args).output().unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `Command` for the built binary, run in `dir` with a clean environment.
pub fn agent_command(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent"));
    command
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("AGENT_STORE");
    command
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// The single JSON value on stdout.
pub fn json_stdout(output: &Output) -> Value {
    let text = stdout(output);
    serde_json::from_str(text.trim())
        .unwrap_or_else(|err| panic!("stdout is not one JSON value ({err}): {text}"))
}

/// The lines of a JSONL trace file.
pub fn trace_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

pub fn event_types(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|line| line["event_type"].as_str().unwrap().to_owned())
        .collect()
}

pub fn calculator_script() -> Value {
    serde_json::json!([
        {"type": "tool_call", "tool_name": "calculator",
         "arguments": {"left": 12, "operation": "multiply", "right": 7}},
        {"type": "finish", "answer": "12 times 7 is 84, which is above 80."}
    ])
}

/// Polls the default store of `dir` until `done` holds for the first session's log.
pub async fn wait_for_log(
    dir: &Path,
    what: &str,
    done: impl Fn(&[agent::Event]) -> bool,
) -> (String, Vec<agent::Event>) {
    use agent::EventStore;
    let db = dir.join(".agent/agent.db");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(store) = agent::store::SqliteStore::open_existing(&db)
            && let Ok(sessions) = store.sessions().await
            && let Some(first) = sessions.first()
            && let Ok(events) = store.load(&first.session_id).await
            && done(&events)
        {
            return (first.session_id.clone(), events);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The stored log of a session in the default store of `dir`.
pub async fn load_log(dir: &Path, session_id: &str) -> Vec<agent::Event> {
    use agent::EventStore;
    let store = agent::store::SqliteStore::open_existing(dir.join(".agent/agent.db")).unwrap();
    store.load(session_id).await.unwrap()
}

/// Whether the last event is the dispatch of a call to `tool`.
pub fn last_is_dispatch_of(events: &[agent::Event], tool: &str) -> bool {
    matches!(
        events.last().map(|e| &e.kind),
        Some(agent::EventKind::ActionDispatched { call }) if call.tool_name == tool
    )
}

/// Kills `child` with SIGKILL and reaps it.
pub fn kill_hard(child: &mut std::process::Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The calculator task of the README.
pub const CALCULATOR_TASK: &str = "What is 12 times 7, and is it above 80?";

/// Runs the calculator task with the scripted model and the calculator, with
/// `extra` flags and `--json`.
pub fn run_calculator(scratch: &Scratch, extra: &[&str]) -> Output {
    let script = scratch.script("calc.json", calculator_script());
    let model = format!("scripted:{}", script.display());
    let mut args = vec![
        "run",
        CALCULATOR_TASK,
        "--model",
        &model,
        "--tools",
        "calculator",
        "--json",
    ];
    args.extend_from_slice(extra);
    scratch.agent(&args)
}
