//! Streaming as a user sees it: `agent run --stream` against a local
//! OpenAI-compatible server that sends its answer in slow chunks prints the
//! text while the server still holds the rest, stores exactly the joined
//! chunks, shows a stream dropped mid-way once (not twice) after its retry,
//! keeps `--json` to one RunResult, and `agent serve`'s event stream carries
//! `delta` events before the stored response.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;
mod server;

use std::io::Read;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_testkit::{FakeProvider, Reply};
use common::*;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::server::Server;

/// Chat Completions chunks carrying `texts`, and the end of the stream when `done`.
fn chunks(texts: &[&str], done: bool) -> Vec<(Option<&'static str>, String)> {
    let mut events: Vec<(Option<&str>, String)> = texts
        .iter()
        .map(|text| {
            (
                None,
                json!({"model": "m", "choices": [{"index": 0, "delta": {"content": text}}]})
                    .to_string(),
            )
        })
        .collect();
    if done {
        events.push((
            None,
            json!({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 6}})
                .to_string(),
        ));
        events.push((None, "[DONE]".into()));
    }
    events
}

/// The answer of the session's stored response (the last model_responded).
fn stored_answer(scratch: &Scratch, id: &str) -> String {
    let shown = json_stdout(&scratch.run(&["show", id, "--json"]));
    let responded: Vec<&Value> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["kind"]["type"] == "model_responded")
        .collect();
    responded.last().unwrap()["kind"]["actions"][0]["answer"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A child's stdout read as it comes, on a thread of its own.
struct Followed {
    seen: Arc<Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl Followed {
    /// Everything it printed, once its stdout has closed.
    fn finish(self) -> String {
        self.reader.join().unwrap();
        self.seen.lock().unwrap().clone()
    }
}

/// Reads a child's stdout as it comes, on a thread of its own.
fn follow_stdout(child: &mut std::process::Child) -> Followed {
    let mut stdout = child.stdout.take().unwrap();
    let seen = Arc::new(Mutex::new(String::new()));
    let shared = Arc::clone(&seen);
    let reader = std::thread::spawn(move || {
        let mut buffer = [0u8; 256];
        while let Ok(read) = stdout.read(&mut buffer) {
            if read == 0 {
                break;
            }
            shared
                .lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
    });
    Followed { seen, reader }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_prints_the_text_as_it_arrives_and_stores_the_joined_chunks() {
    let gate = Arc::new(Notify::new());
    let provider = FakeProvider::start(vec![
        Reply::stream(chunks(&["12 times 7 ", "is ", "84."], true))
            .hold_before(2, Arc::clone(&gate)),
    ])
    .await
    .unwrap();
    let scratch = scratch("stream-run");
    let mut child = scratch
        .command()
        .env_remove("OPENAI_API_KEY")
        .args([
            "run",
            "What is 12 times 7?",
            "--model",
            &format!("openai:m@{}/v1", provider.url()),
            "--stream",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let followed = follow_stdout(&mut child);
    let seen = Arc::clone(&followed.seen);
    let started = Instant::now();
    while !seen.lock().unwrap().contains("~> 12 times 7 is ") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the first chunks never showed: {:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !seen.lock().unwrap().contains("84."),
        "the rest is not sent yet"
    );
    gate.notify_one();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    let text = tokio::task::spawn_blocking(move || followed.finish())
        .await
        .unwrap();
    assert_eq!(
        text.matches("12 times 7 is 84.").count(),
        2,
        "streamed once, then the answer line: {text}"
    );
    assert!(text.contains("step 1   ~> 12 times 7 is 84.\n"), "{text}");
    assert!(text.contains("answer: 12 times 7 is 84."), "{text}");
    assert!(text.contains("finish (its text is above)"), "{text}");
    let id = text
        .lines()
        .find_map(|line| line.strip_prefix("session "))
        .unwrap();
    assert_eq!(stored_answer(&scratch, id), "12 times 7 is 84.");
    assert_eq!(provider.received()[0].body["stream"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_dropped_mid_way_is_retried_without_showing_its_text_twice() {
    let provider = FakeProvider::start(vec![
        Reply::stream(chunks(&["12 times ", "7"], false)),
        Reply::stream(chunks(&["12 times ", "7 is 84."], true)),
    ])
    .await
    .unwrap();
    let scratch = scratch("stream-drop");
    let output = scratch
        .command()
        .env_remove("OPENAI_API_KEY")
        .args([
            "run",
            "What is 12 times 7?",
            "--model",
            &format!("openai:m@{}/v1", provider.url()),
            "--stream",
            "--trace",
            "trace.jsonl",
        ])
        .output()
        .unwrap();
    let text = stdout(&output);
    assert!(output.status.success(), "{text}{}", stderr(&output));
    assert!(text.contains("step 1   ~> 12 times 7 is 84.\n"), "{text}");
    assert_eq!(text.matches("~>").count(), 1, "one streamed line: {text}");
    assert_eq!(
        text.matches("12 times 7 is 84.").count(),
        2,
        "stream + answer: {text}"
    );
    assert!(!text.contains("(again)"), "{text}");
    let lines = trace_lines(&scratch.path("trace.jsonl"));
    assert!(
        lines.iter().any(|line| line["event_type"] == "retry"),
        "the cut stream is a retry: {lines:?}"
    );
    assert_eq!(provider.received().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_stays_one_result_with_or_without_streaming() {
    let whole =
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "84"}}]});
    for (flags, streamed) in [(&["--stream"][..], true), (&[][..], false)] {
        let reply = if streamed {
            Reply::stream(chunks(&["8", "4"], true))
        } else {
            Reply::json(&whole)
        };
        let provider = FakeProvider::start(vec![reply]).await.unwrap();
        let scratch = scratch("stream-json");
        let mut args = vec![
            "run".to_owned(),
            "What is 12 times 7?".into(),
            "--model".into(),
            format!("openai:m@{}/v1", provider.url()),
            "--json".into(),
        ];
        args.extend(flags.iter().map(|flag| (*flag).to_owned()));
        let output = scratch
            .command()
            .env_remove("OPENAI_API_KEY")
            .args(&args)
            .output()
            .unwrap();
        let text = stdout(&output);
        assert_eq!(text.lines().count(), 1, "{text}");
        let result = json_stdout(&output);
        assert_eq!(result["answer"], "84", "{result}");
        assert_eq!(
            provider.received()[0].body.get("stream").is_some(),
            streamed,
            "{flags:?}"
        );
    }
}

#[test]
fn stream_and_no_stream_together_are_a_usage_error() {
    let scratch = scratch("stream-conflict");
    let output = scratch.run(&[
        "run",
        "What is 12 times 7?",
        "--model",
        "scripted:none.json",
        "--stream",
        "--no-stream",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--no-stream"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_streams_delta_events_before_the_stored_response() {
    let gate = Arc::new(Notify::new());
    let provider = FakeProvider::start(vec![
        Reply::stream(chunks(&["12 times 7 ", "is ", "84."], true))
            .hold_before(0, Arc::clone(&gate))
            .paced(Duration::from_millis(20)),
    ])
    .await
    .unwrap();
    let server = Server::start("stream-serve", &[]);
    let id = server
        .create(json!({
            "model": format!("openai:m@{}/v1", provider.url()),
            "tools": [],
        }))
        .await;
    let mut stream = server.stream(&id, None).await;
    gate.notify_one();
    let events = stream.rest().await;
    let kinds: Vec<&str> = events.iter().map(|event| event.event.as_str()).collect();
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|event| event.event == "delta")
        .map(|event| &event.data)
        .collect();
    let text: String = deltas
        .iter()
        .map(|delta| delta["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "12 times 7 is 84.", "{kinds:?}");
    assert!(deltas.iter().all(|delta| delta["step"] == 1
        && delta["session_id"] == id.as_str()
        && delta["restart"] == false));
    let responded = kinds.iter().position(|kind| *kind == "model_responded");
    let last_delta = kinds.iter().rposition(|kind| *kind == "delta");
    assert!(last_delta < responded, "{kinds:?}");
    assert!(
        events
            .iter()
            .filter(|event| event.event == "delta")
            .all(|event| event.id.is_none()),
        "deltas are not stored, so they carry no id"
    );
    let (_, log) = server.get(&format!("/v1/sessions/{id}/events")).await;
    let stored = log["events"].as_array().unwrap();
    assert_eq!(stored.len(), events.len() - deltas.len());
    let (_, session) = server.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(session["result"]["answer"], "12 times 7 is 84.");
    assert_eq!(server.stop(), 0);
}
