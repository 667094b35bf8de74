//! `agent serve` as a user runs it: a real server process on a free loopback
//! port, driven over HTTP with reqwest.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;
mod server;

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{json_stdout, scratch};
use crate::server::{Server, TOKEN};

/// Create, follow the events live over SSE until the end, read the result; the
/// session is the one `agent sessions` lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_created_over_http_streams_to_its_end_and_is_the_clis_session() {
    let server = Server::start("serve-lifecycle", &[]);
    let id = server.create(json!({})).await;
    let events = server.stream(&id, None).await.rest().await;
    let seqs: Vec<u64> = events.iter().map(|event| event.id.unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "every event once, in order"
    );
    let kinds: Vec<&str> = events.iter().map(|event| event.event.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"session_started"));
    assert_eq!(kinds.last(), Some(&"finished"), "{kinds:?}");
    assert!(kinds.contains(&"action_completed"), "{kinds:?}");
    for event in &events {
        assert_eq!(event.data["seq"].as_u64(), event.id);
        assert_eq!(event.data["kind"]["type"], event.event.as_str());
    }
    let (status, session) = server.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(session["status"], "finished");
    assert_eq!(session["task"], "What is 12 times 7?");
    assert_eq!(session["result"]["exit_reason"], "finished");
    assert_eq!(
        session["result"]["answer"],
        "12 times 7 is 84, which is above 80."
    );
    let (_, log) = server.get(&format!("/v1/sessions/{id}/events")).await;
    assert_eq!(log["events"].as_array().unwrap().len(), events.len());
    let listed = server
        .scratch
        .run(&["sessions", "--json", "--store", &server.store]);
    let listed = json_stdout(&listed);
    assert_eq!(listed[0]["session_id"], id.as_str());
    assert_eq!(listed[0]["status"], "finished");
    let (_, page) = server.get("/v1/sessions?status=finished").await;
    assert_eq!(page["sessions"][0]["session_id"], id.as_str());
    assert_eq!(server.stop(), 0);
}

/// A call that waits for approval is decided over HTTP while a stream follows
/// the session; bad edits are a 422, a second decision a 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_round_trip_over_http() {
    let server = Server::start("serve-approval", &[]);
    let id = server
        .create(json!({"approve_tools": ["calculator"]}))
        .await;
    let mut stream = server.stream(&id, None).await;
    loop {
        let event = stream
            .next()
            .await
            .expect("the stream ended before the approval");
        if event.event == "approval_requested" {
            break;
        }
    }
    let session = server.wait_for(&id, "awaiting_approval").await;
    let call = session["pending"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(session["pending"][0]["tool_name"], "calculator");
    let path = format!("/v1/sessions/{id}/approve");
    let (status, refused) = server
        .post(
            &path,
            json!({"call": call, "arguments": {"left": "twelve"}}),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid_arguments");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("left"),
        "{refused}"
    );
    let (status, denied) = server
        .post(&format!("/v1/sessions/{id}/deny"), json!({"reason": " "}))
        .await;
    assert_eq!(status, 400, "{denied}");
    let edited = json!({"left": 12, "operation": "add", "right": 30});
    let (status, approved) = server
        .post(&path, json!({"call": call, "arguments": edited}))
        .await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["decided"], json!([call]));
    assert_eq!(approved["queued"], true);
    let rest = stream.rest().await;
    let completed = rest
        .iter()
        .find(|event| event.event == "action_completed")
        .expect("the approved call ran");
    assert_eq!(completed.data["kind"]["observation"]["content"], "42");
    assert_eq!(rest.last().unwrap().event, "finished");
    let (status, again) = server.post(&path, json!({})).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "not_pending");
    let (status, cancelled) = server
        .post(&format!("/v1/sessions/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 409, "{cancelled}");
}

/// A stream resumed with `Last-Event-ID` starts right after it; a fork over
/// HTTP makes a session that resumes to its own end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_resume_after_last_event_id_and_forks_continue() {
    let server = Server::start("serve-resume", &[]);
    let id = server.create(json!({})).await;
    let all = server.stream(&id, None).await.rest().await;
    let resumed = server.stream(&id, Some(4)).await.rest().await;
    let ids: Vec<u64> = resumed.iter().map(|event| event.id.unwrap()).collect();
    assert_eq!(ids, (5..=all.len() as u64).collect::<Vec<_>>());
    let last = all.len() as u64;
    assert!(server.stream(&id, Some(last)).await.rest().await.is_empty());
    let (status, fork) = server
        .post(&format!("/v1/sessions/{id}/fork"), json!({"at": 4}))
        .await;
    assert_eq!(status, 201, "{fork}");
    let fork_id = fork["session_id"].as_str().unwrap().to_owned();
    assert_eq!(fork["parent"], id.as_str());
    let (status, queued) = server
        .post(&format!("/v1/sessions/{fork_id}/resume"), json!({}))
        .await;
    assert_eq!(status, 202, "{queued}");
    let done = server.wait_for(&fork_id, "finished").await;
    assert_eq!(
        done["result"]["answer"],
        "12 times 7 is 84, which is above 80."
    );
    let (status, again) = server
        .post(&format!("/v1/sessions/{fork_id}/resume"), json!({}))
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["result"]["exit_reason"], "finished");
    let (status, past) = server
        .post(&format!("/v1/sessions/{id}/fork"), json!({"at": 999}))
        .await;
    assert_eq!(status, 400, "{past}");
}

/// A follow-up message over HTTP opens turn 2 of a finished session, a worker
/// runs it, and the stream resumed after turn 1 carries it to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_http_runs_the_next_turn() {
    let server = Server::start("serve-messages", &[]);
    let script = server.scratch.script(
        "chat.json",
        json!([
            {"type": "tool_call", "tool_name": "calculator",
             "arguments": {"left": 12, "operation": "multiply", "right": 7}},
            {"type": "finish", "answer": "84"},
            {"type": "tool_call", "tool_name": "calculator",
             "arguments": {"left": 84, "operation": "multiply", "right": 2}},
            {"type": "finish", "answer": "168"}
        ]),
    );
    let id = server
        .create(json!({"model": format!("scripted:{}", script.display())}))
        .await;
    let first = server.wait_for(&id, "finished").await;
    assert_eq!(first["result"]["turn"], 1);
    let turn_one = server.stream(&id, None).await.rest().await;
    let last = turn_one.last().and_then(|event| event.id).unwrap();

    let (status, opened) = server
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"text": "And doubled?"}),
        )
        .await;
    assert_eq!(status, 202, "{opened}");
    assert_eq!(
        opened,
        json!({"session_id": id, "turn": 2, "status": "queued"})
    );
    let turn_two = server.stream(&id, Some(last)).await.rest().await;
    let kinds: Vec<&str> = turn_two.iter().map(|event| event.event.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"user_message"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"finished"), "{kinds:?}");
    let done = server.wait_for(&id, "finished").await;
    assert_eq!(done["result"]["turn"], 2);
    assert_eq!(done["result"]["answer"], "168");

    let (status, empty) = server
        .post(&format!("/v1/sessions/{id}/messages"), json!({"text": " "}))
        .await;
    assert_eq!(status, 400, "{empty}");
    let (status, unknown) = server
        .post("/v1/sessions/nope/messages", json!({"text": "hi"}))
        .await;
    assert_eq!(status, 404, "{unknown}");
    let (status, _) = server
        .post(&format!("/v1/sessions/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 409, "an ended session cannot be cancelled");
    let waiting = server
        .create(json!({"approve_tools": ["calculator"]}))
        .await;
    server.wait_for(&waiting, "awaiting_approval").await;
    let (status, refused) = server
        .post(
            &format!("/v1/sessions/{waiting}/messages"),
            json!({"text": "hurry"}),
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "follow_up_refused");
    assert_eq!(server.stop(), 0);
}

/// A pause over HTTP stops a worker's session after its step; a resume over
/// HTTP finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_over_http_stops_after_the_step_and_resume_finishes() {
    let server = Server::start("serve-pause", &[]);
    let script = server.scratch.script(
        "slow.json",
        json!([
            {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": 1.0}},
            {"type": "finish", "answer": "rested"}
        ]),
    );
    let id = server
        .create(json!({"model": format!("scripted:{}", script.display()), "tools": ["sleep"]}))
        .await;
    server.wait_for(&id, "running").await;
    let (status, sent) = server
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"text": "and then?"}),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    assert_eq!(
        sent["status"], "running",
        "a running session takes it as it runs"
    );
    assert_eq!(sent["turn"], 1);
    let (status, paused) = server
        .post(&format!("/v1/sessions/{id}/pause"), json!({}))
        .await;
    assert_eq!(status, 200, "{paused}");
    let session = server.wait_for(&id, "paused").await;
    assert!(session["steps_used"].as_u64().unwrap() <= 1, "{session}");
    let (status, queued) = server
        .post(&format!("/v1/sessions/{id}/resume"), json!({}))
        .await;
    assert_eq!(status, 202, "{queued}");
    let done = server.wait_for(&id, "finished").await;
    assert_eq!(done["result"]["answer"], "rested");
    let (status, ended) = server
        .post(&format!("/v1/sessions/{id}/pause"), json!({}))
        .await;
    assert_eq!(status, 409, "{ended}");
    assert_eq!(server.stop(), 0);
}

/// Every documented route answers 401 without a token or with a wrong one;
/// `/healthz` answers anyone; no token ever reaches the server's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_route_answers_without_a_valid_token_and_tokens_are_never_logged() {
    let server = Server::start("serve-auth", &[]);
    let id = server.create(json!({})).await;
    let (_, document) = server.get("/v1/openapi.json").await;
    let mut checked = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let path = path.replace("{id}", &id);
            for token in [None, Some("wrong-token-0123456789abcdef")] {
                let mut request = server.client.request(method.clone(), server.url(&path));
                if let Some(token) = token {
                    request = request.bearer_auth(token);
                }
                let response = request.body("{}").send().await.unwrap();
                if path == "/healthz" {
                    assert_eq!(response.status().as_u16(), 200);
                    continue;
                }
                assert_eq!(response.status().as_u16(), 401, "{method} {path}");
                let challenge = response.headers()["www-authenticate"].to_str().unwrap();
                assert!(challenge.starts_with("Bearer"), "{challenge}");
                let body: Value = response.json().await.unwrap();
                assert_eq!(body["error"]["code"], "unauthorized");
                checked += 1;
            }
        }
    }
    assert!(checked >= 22, "only {checked} route checks");
    let unknown = server
        .client
        .get(server.url("/v1/nothing"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        unknown.status().as_u16(),
        401,
        "unknown paths need a token too"
    );
    let log = server.log();
    assert!(log.contains("http: GET /v1/openapi.json -> 200"), "{log}");
    assert!(!log.contains(TOKEN), "the token is in the log:\n{log}");
    assert!(
        !log.contains("wrong-token"),
        "a presented token is in the log:\n{log}"
    );
}

/// Bodies over 1 MiB are a 413; bad JSON, unknown fields, a missing model and
/// bad settings are 400s; unknown ids 404s — all in the one error shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_right_status_and_one_error_shape() {
    let server = Server::start("serve-errors", &[]);
    let huge = json!({"task": "x".repeat(1_100_000), "model": "scripted:calc.json"});
    for _ in 0..10 {
        let (status, body) = server.post("/v1/sessions", huge.clone()).await;
        assert_eq!(status, 413, "{body}");
        assert_eq!(body["error"]["code"], "payload_too_large");
    }
    let cases = [
        (json!({"model": "scripted:calc.json"}), "task"),
        (json!({"task": "t"}), "model"),
        (
            json!({"task": "t", "model": "scripted:calc.json", "modle": 1}),
            "modle",
        ),
        (
            json!({"task": "t", "model": "scripted:calc.json", "max_steps": 0}),
            "max-steps",
        ),
        (
            json!({"task": "t", "model": "scripted:calc.json", "tools": ["nope"]}),
            "nope",
        ),
        (
            json!({"task": "t", "model": "scripted:missing.json"}),
            "missing.json",
        ),
    ];
    for (body, named) in cases {
        let (status, error) = server.post("/v1/sessions", body.clone()).await;
        assert_eq!(status, 400, "{body} -> {error}");
        assert_eq!(error["error"]["code"], "invalid_request", "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{body}: {message}");
    }
    let response = server
        .request(Method::POST, "/v1/sessions")
        .body(r#"{"task": "t", "task": "u", "model": "scripted:calc.json"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "invalid_json", "{error}");
    for path in ["/v1/sessions/nope", "/v1/sessions/nope/events"] {
        let (status, error) = server.get(path).await;
        assert_eq!(status, 404, "{path}: {error}");
        assert_eq!(error["error"]["code"], "not_found");
    }
    for action in ["approve", "cancel", "resume"] {
        let (status, error) = server
            .post(&format!("/v1/sessions/nope/{action}"), json!({}))
            .await;
        assert_eq!(status, 404, "{action}: {error}");
    }
    let (status, error) = server.get("/v1/sessions?status=sleeping").await;
    assert_eq!(status, 400, "{error}");
    let (status, error) = server.get("/v1/sessions?cursor=nonsense").await;
    assert_eq!(status, 400, "{error}");
    let (status, error) = server.get("/v1/sessions?limit=0").await;
    assert_eq!(status, 400, "{error}");
}

/// A hundred sessions created at once all finish, and pages walk them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_creations_all_finish() {
    let server = std::sync::Arc::new(Server::start("serve-hundred", &["--workers", "2"]));
    let mut creations = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let server = std::sync::Arc::clone(&server);
        creations.spawn(async move { server.create(json!({})).await });
    }
    let mut ids = std::collections::BTreeSet::new();
    while let Some(id) = creations.join_next().await {
        ids.insert(id.unwrap());
    }
    assert_eq!(ids.len(), 100);
    let started = Instant::now();
    loop {
        let (_, page) = server.get("/v1/sessions?status=finished&limit=500").await;
        if page["sessions"].as_array().unwrap().len() == 100 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "not all finished: {page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut walked = std::collections::BTreeSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("/v1/sessions?limit=7&cursor={cursor}"),
            None => "/v1/sessions?limit=7".to_owned(),
        };
        let (status, page) = server.get(&path).await;
        assert_eq!(status, 200, "{page}");
        for line in page["sessions"].as_array().unwrap() {
            assert!(walked.insert(line["session_id"].as_str().unwrap().to_owned()));
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(walked, ids);
    assert_eq!(
        server.metric("agent_sessions{status=\"finished\"}").await,
        100
    );
    assert_eq!(server.metric("agent_tool_calls_total").await, 100);
}

/// Clients that leave mid-stream leave nothing behind: no open stream, no
/// session still followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_disconnect_mid_stream_cost_nothing() {
    let server = Server::start("serve-disconnect", &[]);
    let id = server
        .create(json!({"approve_tools": ["calculator"]}))
        .await;
    server.wait_for(&id, "awaiting_approval").await;
    let mut streams = Vec::new();
    for _ in 0..20 {
        let mut stream = server.stream(&id, None).await;
        assert_eq!(stream.next().await.unwrap().event, "session_started");
        streams.push(stream);
    }
    assert_eq!(server.metric("agent_event_streams").await, 20);
    assert_eq!(server.metric("agent_followed_sessions").await, 1);
    drop(streams);
    let started = Instant::now();
    while server.metric("agent_event_streams").await != 0
        || server.metric("agent_followed_sessions").await != 0
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "streams or followers were left behind"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _) = server
        .post(&format!("/v1/sessions/{id}/approve"), json!({}))
        .await;
    assert_eq!(status, 200);
    server.wait_for(&id, "finished").await;
}

/// With `--workers 0` the server only queues; an `agent worker` process runs the
/// session, and the stream shows its events live as that other process commits them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_show_events_committed_by_other_processes() {
    let server = Server::start("serve-remote-worker", &["--workers", "0"]);
    let id = server.create(json!({})).await;
    let mut stream = server.stream(&id, None).await;
    let first = stream.next().await.unwrap();
    assert_eq!(first.event, "session_started");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server.get(&format!("/v1/sessions/{id}")).await.1["status"],
        "queued"
    );
    let mut worker = server
        .scratch
        .command()
        .args(["worker", "--store", &server.store, "--drain", "0"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let rest = stream.rest().await;
    assert_eq!(rest.last().unwrap().event, "finished");
    assert!(
        rest.iter().any(|event| event.event == "resumed"
            && event.data["kind"]["reason"]
                .as_str()
                .unwrap()
                .contains("taken by worker")),
        "{rest:?}"
    );
    crate::common::kill_hard(&mut worker);
}

/// Without a token `agent serve` refuses a non-loopback address (exit 2, with
/// the reason) and, on loopback, prints one fresh token that works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_it_refuses_the_network_and_makes_one_for_loopback() {
    let scratch = scratch("serve-no-token");
    let refused = scratch.run(&["serve", "--listen", "0.0.0.0:0", "--store", "sqlite://a.db"]);
    assert_eq!(refused.status.code(), Some(2));
    let message = crate::common::stderr(&refused);
    assert!(
        message.contains("refusing to serve on 0.0.0.0:0 without an API token"),
        "{message}"
    );
    assert!(message.contains("AGENT_API_TOKENS"), "{message}");
    let short = scratch
        .command()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("AGENT_API_TOKENS", "short")
        .output()
        .unwrap();
    assert_eq!(short.status.code(), Some(2));
    let store = format!("sqlite://{}", scratch.path("b.db").display());
    let mut command = scratch.command();
    command.args(["serve", "--listen", "127.0.0.1:0", "--store", &store]);
    let server = Server::spawn(crate::common::scratch("serve-no-token-run"), store, command);
    let log = server.log();
    let token = log
        .split("Authorization: Bearer ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no token printed: {log}"))
        .to_owned();
    assert_eq!(log.matches(&token).count(), 1, "printed once");
    let response = server
        .client
        .get(server.url("/v1/sessions"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let (status, _) = server.get("/v1/sessions").await;
    assert_eq!(status, 401, "the test token is not configured here");
    assert_eq!(
        server.log().matches(&token).count(),
        1,
        "never logged again"
    );
}

/// Two servers on one PostgreSQL database are one API: a session created on one
/// (which runs nothing) is streamed from the other, whose workers run it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_postgresql_share_sessions_and_streams() {
    let Some(url) = agent_testkit::postgres::test_url() else {
        return;
    };
    let database = agent_testkit::postgres::fresh_database(&url).await;
    let front = Server::start_on(
        scratch("serve-pg-front"),
        database.clone(),
        &["--workers", "0"],
    );
    let id = front.create(json!({"approve_tools": ["calculator"]})).await;
    let back = Server::start_on(
        scratch("serve-pg-back"),
        database.clone(),
        &["--workers", "2"],
    );
    let mut stream = back.stream(&id, None).await;
    loop {
        let event = stream
            .next()
            .await
            .expect("the stream ended before the approval");
        if event.event == "approval_requested" {
            break;
        }
    }
    let (status, decided) = front
        .post(&format!("/v1/sessions/{id}/approve"), json!({}))
        .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(stream.rest().await.last().unwrap().event, "finished");
    let (_, session) = front.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(
        session["result"]["answer"],
        "12 times 7 is 84, which is above 80."
    );
    let (_, page) = back.get("/v1/sessions?status=finished").await;
    assert_eq!(page["sessions"][0]["session_id"], id.as_str());
    assert_eq!(front.metric("agent_tool_calls_total").await, 1);
}

/// Smaller holes a hostile client found, each once open: a task with a NUL
/// character (a 503 on PostgreSQL, stored on SQLite), absurd settings, an id
/// of thousands of characters echoed whole, a `Last-Event-ID` beyond the log
/// answered with a silent stream.
async fn hostile_requests_get_clear_alike_answers(server: &Server) {
    let (status, error) = server
        .post(
            "/v1/sessions",
            json!({"task": "before\u{0}after", "model": "scripted:calc.json"}),
        )
        .await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"]["message"].as_str().unwrap().contains("NUL"),
        "{error}"
    );
    let (status, error) = server
        .post(
            "/v1/sessions",
            json!({"task": "t", "model": "scripted:calc.json", "tool_retries": 1_000_000_000}),
        )
        .await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--tool-retries"),
        "{error}"
    );
    let long = "x".repeat(5000);
    let (status, error) = server.get(&format!("/v1/sessions/{long}")).await;
    assert_eq!(status, 404, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.len() < 300, "the id was echoed whole: {message}");
    assert!(message.contains("5000 characters"), "{message}");
    let id = server.create(json!({})).await;
    server.wait_for(&id, "finished").await;
    let response = server
        .request(Method::GET, &format!("/v1/sessions/{id}/events"))
        .header("accept", "text/event-stream")
        .header("last-event-id", "999999")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let error: Value = response.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("beyond"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_clear_answers_on_sqlite() {
    hostile_requests_get_clear_alike_answers(&Server::start("serve-hostile", &[])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_clear_answers_on_postgresql() {
    let Some(url) = agent_testkit::postgres::test_url() else {
        return;
    };
    let database = agent_testkit::postgres::fresh_database(&url).await;
    let server = Server::start_on(scratch("serve-hostile-pg"), database, &[]);
    hostile_requests_get_clear_alike_answers(&server).await;
}

/// A connection that never finishes its request's headers is closed, so a
/// hundred of them hold nothing for long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_dribble_headers_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::start("serve-slow-headers", &[]);
    let address = server.base.trim_start_matches("http://").to_owned();
    let mut slow = Vec::new();
    for _ in 0..100 {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        slow.push(stream);
    }
    let (status, _) = server.get("/healthz").await;
    assert_eq!(status, 200, "the server still answers others");
    let deadline = Instant::now() + Duration::from_secs(40);
    for mut stream in slow {
        let mut buffer = [0u8; 1024];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let read = tokio::time::timeout(left, stream.read(&mut buffer))
                .await
                .expect("a connection without complete headers stayed open");
            match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
}

/// SIGHUP reloads the token file and does not stop the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_token_file_and_keeps_serving() {
    let scratch = scratch("serve-sighup");
    let tokens = scratch.path("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let store = format!("sqlite://{}", scratch.path("agent.db").display());
    let mut command = scratch.command();
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--store", &store])
        .arg("--token-file")
        .arg(&tokens);
    let server = Server::spawn(scratch, store, command);
    let (status, _) = server.get("/v1/sessions").await;
    assert_eq!(status, 200);
    let fresh = "fresh-token-after-hangup-0123456789";
    std::fs::write(&tokens, format!("{fresh}\n")).unwrap();
    server.signal(rustix::process::Signal::HUP);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server.log().contains("tokens reloaded") {
        assert!(Instant::now() < deadline, "no reload: {}", server.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, _) = server.get("/v1/sessions").await;
    assert_eq!(status, 401, "the old token is no longer accepted");
    let response = server
        .client
        .get(server.url("/v1/sessions"))
        .bearer_auth(fresh)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        server.stop(),
        0,
        "it served on after SIGHUP and stopped cleanly"
    );
}
