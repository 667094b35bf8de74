//! A real `agent serve` process on a free loopback port, and an HTTP client for
//! it: what the server tests share.

#![allow(
    dead_code,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Scratch, calculator_script, scratch};

/// The token the test servers accept.
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A running `agent serve` and what it printed on stderr.
pub struct Server {
    pub scratch: Scratch,
    pub base: String,
    pub store: String,
    child: Child,
    pub stderr: Arc<Mutex<String>>,
    pub client: reqwest::Client,
}

impl Server {
    /// Starts `agent serve` on an SQLite store in a fresh directory with `TOKEN`
    /// accepted and `extra` flags.
    pub fn start(name: &str, extra: &[&str]) -> Self {
        let scratch = scratch(name);
        let store = format!("sqlite://{}", scratch.path("agent.db").display());
        Self::start_on(scratch, store, extra)
    }

    /// Starts `agent serve` in `scratch` on the store at `store`, with `TOKEN`
    /// accepted, free-form sessions allowed (`--allow-adhoc`) and `extra` flags.
    pub fn start_on(scratch: Scratch, store: String, extra: &[&str]) -> Self {
        scratch.script("calc.json", calculator_script());
        let mut command = scratch.command();
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--store", &store])
            .arg("--allow-adhoc")
            .args(extra)
            .env("AGENT_API_TOKENS", TOKEN);
        Self::spawn(scratch, store, command)
    }

    /// Starts `command` (an `agent serve` command line) and waits for it to listen.
    pub fn spawn(scratch: Scratch, store: String, mut command: std::process::Command) -> Self {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (address, lines) = (
            Arc::new(Mutex::new(None::<String>)),
            BufReader::new(child.stderr.take().unwrap()),
        );
        {
            let (stderr, address) = (Arc::clone(&stderr), Arc::clone(&address));
            std::thread::spawn(move || {
                for line in lines.lines() {
                    let Ok(line) = line else { break };
                    if let Some(rest) = line.split("listening on http://").nth(1) {
                        *address.lock().unwrap() =
                            Some(rest.split_whitespace().next().unwrap().to_owned());
                    }
                    let mut all = stderr.lock().unwrap();
                    all.push_str(&line);
                    all.push('\n');
                }
            });
        }
        let started = Instant::now();
        let address = loop {
            if let Some(address) = address.lock().unwrap().clone() {
                break address;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "agent serve exited with {status}: {}",
                    stderr.lock().unwrap()
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "agent serve did not listen: {}",
                stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Self {
            scratch,
            base: format!("http://{address}"),
            store,
            child,
            stderr,
            client: client(),
        }
    }

    /// The URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request to `path` with the token.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url(path))
            .bearer_auth(TOKEN)
    }

    /// `GET path` with the token: status and JSON body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let response = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// `POST path` with the token and a JSON body: status and JSON body.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .request(reqwest::Method::POST, path)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// Creates a calculator session (with `extra` fields) and returns its id.
    pub async fn create(&self, extra: Value) -> String {
        let mut body = json!({
            "task": "What is 12 times 7?",
            "model": "scripted:calc.json",
            "tools": ["calculator"],
        });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (status, created) = self.post("/v1/sessions", body).await;
        assert_eq!(status, 201, "{created}");
        assert_eq!(created["status"], "queued");
        created["session_id"].as_str().unwrap().to_owned()
    }

    /// Polls `GET /v1/sessions/{id}` until its status is `status`.
    pub async fn wait_for(&self, id: &str, status: &str) -> Value {
        let started = Instant::now();
        loop {
            let (code, session) = self.get(&format!("/v1/sessions/{id}")).await;
            assert_eq!(code, 200, "{session}");
            if session["status"] == status {
                return session;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "session {id} never became {status}: {session}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Opens the event stream of `id`, resuming after `last_event_id` if given.
    pub async fn stream(&self, id: &str, last_event_id: Option<u64>) -> EventStream {
        let mut request = self
            .request(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
            .header("accept", "text/event-stream");
        if let Some(seq) = last_event_id {
            request = request.header("last-event-id", seq.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        EventStream {
            response,
            buffer: String::new(),
        }
    }

    /// One number of `/metrics`.
    pub async fn metric(&self, name: &str) -> u64 {
        let text = self
            .request(reqwest::Method::GET, "/metrics")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .parse()
            .unwrap()
    }

    /// What the server printed on stderr so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends `signal` to the server.
    pub fn signal(&self, signal: rustix::process::Signal) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), signal)
            .unwrap();
    }

    /// Stops the server with SIGTERM and returns its exit code.
    pub fn stop(mut self) -> i32 {
        self.signal(rustix::process::Signal::TERM);
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP client (plain HTTP; rustls needs a crypto provider all the same).
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// One Server-Sent Event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<u64>,
    pub event: String,
    pub data: Value,
}

/// A Server-Sent Events response, read event by event.
pub struct EventStream {
    response: reqwest::Response,
    buffer: String,
}

impl EventStream {
    /// The next event, skipping comments; `None` when the server ended the stream.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, String::new(), String::new());
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("id:") {
                        id = Some(value.trim().parse().unwrap());
                    } else if let Some(value) = line.strip_prefix("event:") {
                        event = value.trim().to_owned();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.trim_start());
                    }
                }
                if event.is_empty() && data.is_empty() {
                    continue;
                }
                return Some(SseEvent {
                    id,
                    event,
                    data: serde_json::from_str(&data).unwrap(),
                });
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.response.chunk())
                .await
                .expect("the stream went quiet for a minute")
                .unwrap()?;
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Every event until the server ends the stream.
    pub async fn rest(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }
}
