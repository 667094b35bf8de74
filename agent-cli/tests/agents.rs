//! Declared agents: one definition in an agents file runs the same from
//! `agent run --agent`, from `POST /v1/sessions {"agent"}` and from the
//! library's `Agent`, recording the same digest; `agent resume` and a worker
//! continue sessions started by any of them; a server without `--allow-adhoc`
//! runs declared agents only (403 `adhoc_refused` otherwise).

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;
mod server;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Scratch, json_stdout, scratch, stderr, stdout};
use crate::server::{Server, TOKEN};

/// An agents file with `calc` (the calculator, approval of its calls) and
/// `slow` (a sleep, then an append: for resumes and workers) in `scratch`.
fn agents_file(scratch: &Scratch) {
    scratch.script(
        "calc.json",
        json!([
            {"type": "tool_call", "tool_name": "calculator",
             "arguments": {"left": 12, "operation": "multiply", "right": 7}},
            {"type": "finish", "answer": "84"}
        ]),
    );
    scratch.script(
        "slow.json",
        json!([
            {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": 0.3}},
            {"type": "tool_call", "tool_name": "append_line", "arguments": {"path": "out.txt", "line": "done"}},
            {"type": "finish", "answer": "appended"}
        ]),
    );
    std::fs::write(
        scratch.path("agents.toml"),
        r#"
[agents.calc]
description = "Multiplies."
instructions = "You are a careful calculator."
model = "scripted:calc.json"
tools = ["calculator"]
max_steps = 6
overridable = ["trace_content"]

[agents.slow]
model = "scripted:slow.json"
tools = ["sleep", "append_line"]
"#,
    )
    .unwrap();
}

/// `agent serve` with an agents file, on a new SQLite store, with `extra` flags.
fn serve_agents(name: &str, extra: &[&str]) -> Server {
    let scratch = scratch(name);
    agents_file(&scratch);
    let store = format!("sqlite://{}", scratch.path("agent.db").display());
    let mut command = scratch.command();
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--store", &store])
        .args(extra)
        .env("AGENT_API_TOKENS", TOKEN);
    Server::spawn(scratch, store, command)
}

fn recorded(scratch: &Scratch, id: &str, store: &str) -> Value {
    let shown = scratch.run(&["show", id, "--store", store, "--json"]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    json_stdout(&shown)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_the_api_run_one_definition_and_record_its_digest() {
    let scratch = scratch("agents-same");
    agents_file(&scratch);
    let store = format!("sqlite://{}", scratch.path("agent.db").display());
    let listed = json_stdout(&scratch.run(&["agents", "list", "--json"]));
    assert_eq!(listed[0]["name"], "calc");
    let digest = listed[0]["digest"].as_str().unwrap().to_owned();
    let run = scratch.run(&[
        "run",
        "What is 12 times 7?",
        "--agent",
        "calc",
        "--store",
        &store,
        "--json",
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let from_cli = json_stdout(&run)["session_id"].as_str().unwrap().to_owned();
    let shown = recorded(&scratch, &from_cli, &store);
    assert_eq!(shown["agent"], "calc");
    assert_eq!(shown["definition_digest"], digest.as_str());
    assert_eq!(
        shown["events"][0]["kind"]["config"]["instructions"],
        "You are a careful calculator."
    );

    let mut command = scratch.command();
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--store", &store])
        .env("AGENT_API_TOKENS", TOKEN);
    let server = Server::spawn(
        crate::common::scratch("agents-same-server"),
        store.clone(),
        command,
    );
    let (status, agents) = server.get("/v1/agents").await;
    assert_eq!(status, 200);
    assert_eq!(agents["agents"][0]["digest"], digest.as_str());
    let (status, calc) = server.get("/v1/agents/calc").await;
    assert_eq!(status, 200);
    assert_eq!(calc["definition"]["max_steps"], 6);
    let (status, missing) = server.get("/v1/agents/nope").await;
    assert_eq!(status, 404, "{missing}");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("calc")
    );
    let (status, created) = server
        .post(
            "/v1/sessions",
            json!({"agent": "calc", "task": "What is 12 times 7?", "max_steps": 5, "trace_content": "full"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let from_api = created["session_id"].as_str().unwrap().to_owned();
    let done = server.wait_for(&from_api, "finished").await;
    assert_eq!(done["result"]["answer"], "84");
    let shown = recorded(&scratch, &from_api, &store);
    assert_eq!(shown["definition_digest"], digest.as_str());
    assert_eq!(shown["events"][0]["kind"]["config"]["max_steps"], 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_allow_adhoc_runs_declared_agents_only() {
    let server = serve_agents("agents-adhoc", &["--workers", "0"]);
    let refused = [
        json!({"agent": "calc", "task": "t", "mcp": ["sh -c id"]}),
        json!({"agent": "calc", "task": "t", "allow_cmd": ["sh"]}),
        json!({"agent": "calc", "task": "t", "workspace": "/"}),
        json!({"agent": "calc", "task": "t", "model": "openai:m@http://127.0.0.1:9/v1"}),
        json!({"agent": "calc", "task": "t", "tools": ["run_command"]}),
        json!({"agent": "calc", "task": "t", "max_steps": 7}),
        json!({"task": "t", "model": "scripted:calc.json"}),
    ];
    for body in refused {
        let (status, error) = server.post("/v1/sessions", body.clone()).await;
        assert_eq!(status, 403, "{body} -> {error}");
        assert_eq!(error["error"]["code"], "adhoc_refused", "{error}");
    }
    let (status, error) = server
        .post("/v1/sessions", json!({"agent": "nope", "task": "t"}))
        .await;
    assert_eq!(status, 400, "{error}");
    let (status, created) = server
        .post(
            "/v1/sessions",
            json!({"agent": "calc", "task": "t", "max_steps": 2}),
        )
        .await;
    assert_eq!(status, 201, "lowering a budget is allowed: {created}");

    let server = serve_agents("agents-adhoc-allowed", &["--workers", "0", "--allow-adhoc"]);
    for body in [
        json!({"agent": "calc", "task": "t", "max_steps": 7}),
        json!({"task": "t", "model": "scripted:calc.json"}),
    ] {
        let (status, created) = server.post("/v1/sessions", body.clone()).await;
        assert_eq!(status, 201, "{body} -> {created}");
    }
}

#[test]
fn sessions_of_an_agent_resume_and_go_to_workers() {
    let scratch = scratch("agents-continue");
    agents_file(&scratch);
    let store = format!("sqlite://{}", scratch.path("agent.db").display());
    let mut child = scratch
        .command()
        .args([
            "run", "append", "--agent", "slow", "--store", &store, "--json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let db = scratch.path("agent.db");
    let deadline = Instant::now() + Duration::from_secs(30);
    let id = loop {
        let in_sleep = rusqlite::Connection::open(&db).ok().and_then(|conn| {
            conn.query_row(
                "SELECT session_id FROM events WHERE kind = 'action_dispatched' LIMIT 1",
                [],
                |row| row.get::<_, String>(0),
            )
            .ok()
        });
        if let Some(id) = in_sleep {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "the run never dispatched its sleep"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    common::kill_hard(&mut child);
    let resumed = scratch.run(&["resume", &id, "--store", &store, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(json_stdout(&resumed)["answer"], "appended");
    let refused = scratch.run(&["resume", &id, "--agent", "calc", "--store", &store]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("agent send --agent calc"),
        "{}",
        stderr(&refused)
    );

    let submitted = scratch.run(&[
        "submit", "append", "--agent", "slow", "--store", &store, "--json",
    ]);
    assert_eq!(submitted.status.code(), Some(0), "{}", stderr(&submitted));
    let queued = json_stdout(&submitted)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut worker = scratch
        .command()
        .args(["worker", "--store", &store])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let waited = scratch.run(&[
        "wait",
        &queued,
        "--store",
        &store,
        "--json",
        "--timeout",
        "60",
    ]);
    common::kill_hard(&mut worker);
    assert_eq!(waited.status.code(), Some(0), "{}", stdout(&waited));
    assert_eq!(json_stdout(&waited)["answer"], "appended");
    assert_eq!(recorded(&scratch, &queued, &store)["agent"], "slow");
}

#[test]
fn a_bad_agents_file_names_the_line_and_the_field() {
    let scratch = scratch("agents-bad");
    std::fs::write(
        scratch.path("agents.toml"),
        "[agents.calc]\nmodel = \"scripted:x.json\"\nmax_stepz = 3\n",
    )
    .unwrap();
    let output = scratch.run(&["run", "t", "--agent", "calc"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("agents.toml")
            && message.contains("line 1")
            && message.contains("max_stepz"),
        "{message}"
    );
    let missing = scratch.run(&["agents", "show", "calc", "--agents", "nope.toml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("nope.toml"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_agent_records_the_same_definition_and_the_cli_and_a_worker_continue_it() {
    use agent_runtime::{Agent, Agents};
    let scratch = scratch("agents-library");
    agents_file(&scratch);
    let store_url = format!("sqlite://{}", scratch.path("agent.db").display());
    let store = agent::store::open_url(&store_url, true).await.unwrap();
    let agents = Agents::read(&scratch.path("agents.toml")).unwrap();
    let declared = agents.get("calc").unwrap();
    // The same definition written in code has the same digest.
    let in_code = Agent::builder("calc")
        .description("Multiplies.")
        .instructions("You are a careful calculator.")
        .model("scripted:calc.json")
        .builtin_tools(["calculator"])
        .settings(serde_json::from_value(json!({"max_steps": 6})).unwrap())
        .overridable(["trace_content"])
        .store(store.clone());
    let built = in_code.build().await.unwrap();
    assert_eq!(built.definition().digest(), declared.digest());

    // A session the library starts waits for approval (the file's agent with
    // an approval added in code); the CLI approves it, a worker finishes it.
    let approving = Agent::declared(declared)
        .settings(serde_json::from_value(json!({"approve_tools": ["calculator"]})).unwrap())
        .store(store.clone())
        .build()
        .await
        .unwrap();
    let paused = approving.run("What is 12 times 7?").await.unwrap();
    assert_eq!(
        paused.exit_reason,
        agent::result::ExitReason::AwaitingApproval,
        "{paused:?}"
    );
    let id = paused.session_id.clone();
    let shown = recorded(&scratch, &id, &store_url);
    assert_eq!(shown["agent"], "calc");
    let approved = scratch.run(&["approve", &id, "--store", &store_url, "--json"]);
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    let detached = scratch.run(&["resume", &id, "--detach", "--store", &store_url, "--json"]);
    assert_eq!(detached.status.code(), Some(0), "{}", stderr(&detached));
    let mut worker = scratch
        .command()
        .args(["worker", "--store", &store_url])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let waited = scratch.run(&[
        "wait",
        &id,
        "--store",
        &store_url,
        "--json",
        "--timeout",
        "60",
    ]);
    common::kill_hard(&mut worker);
    assert_eq!(waited.status.code(), Some(0), "{}", stdout(&waited));
    assert_eq!(json_stdout(&waited)["answer"], "84");

    // And `agent resume` continues one it started and left waiting.
    let again = approving.run("What is 12 times 7?").await.unwrap();
    approving
        .approve(&again.session_id, None, None)
        .await
        .unwrap();
    let resumed = scratch.run(&["resume", &again.session_id, "--store", &store_url, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(json_stdout(&resumed)["answer"], "84");
    let typed: u32 = Agent::builder("typed")
        .model(format!(
            "scripted:{}",
            scratch
                .script("typed.json", json!([{"type": "finish", "answer": "84"}]))
                .display()
        ))
        .store(store)
        .build()
        .await
        .unwrap()
        .run_typed("How much is 12 times 7?")
        .await
        .unwrap();
    assert_eq!(typed, 84);
}
