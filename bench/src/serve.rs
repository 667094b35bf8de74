//! `agent-bench serve`: a real `agent serve` process driven over HTTP. Two
//! measures, one JSON line each: sessions created with `POST /v1/sessions` and
//! followed over SSE to their last event (requests per second, latencies), and
//! the fan-out of one session's events to many SSE subscribers at once.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinSet;

use crate::workers::agent_binary;
use crate::{StoreKind, parse_store, remove_db};

/// The token the benchmark's server accepts.
const TOKEN: &str = "bench-token-0123456789abcdef";

/// Arguments of `agent-bench serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Sessions to create and follow to their end.
    #[arg(long, default_value_t = 500)]
    sessions: usize,
    /// Clients creating sessions at once.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// SSE subscribers of the fan-out session.
    #[arg(long, default_value_t = 100)]
    subscribers: usize,
    /// In-process workers of the server (`agent serve --workers`).
    #[arg(long, default_value_t = 2)]
    workers: u16,
    /// Where sessions go: sqlite (the file `--db`) or a postgres:// URL of a
    /// database the benchmark may fill.
    #[arg(long, value_parser = parse_store, default_value = "sqlite")]
    store: StoreKind,
    /// The SQLite file (deleted first).
    #[arg(long, default_value = "/tmp/agent-bench-serve.db")]
    db: PathBuf,
    /// The `agent` binary (default: the one beside this benchmark).
    #[arg(long)]
    agent: Option<PathBuf>,
}

/// A running `agent serve`, killed if the benchmark stops early.
struct Served {
    child: Child,
    base: String,
    client: reqwest::Client,
}

impl Served {
    async fn start(args: &ServeArgs, script: &std::path::Path) -> anyhow::Result<Self> {
        let agent = agent_binary(args.agent.as_ref())?;
        let url = match &args.store {
            StoreKind::Sqlite => {
                remove_db(&args.db);
                format!("sqlite://{}", args.db.display())
            }
            StoreKind::Postgres(url) => url.clone(),
            StoreKind::Memory => anyhow::bail!("serve needs sqlite or postgres://…"),
        };
        let mut child = Command::new(&agent)
            .args(["serve", "--listen", "127.0.0.1:0", "--store", &url])
            .args(["--workers", &args.workers.to_string(), "--allow-adhoc"])
            .current_dir(script.parent().unwrap_or(std::path::Path::new("/")))
            .env("AGENT_API_TOKENS", TOKEN)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start `{}`", agent.display()))?;
        let mut lines = BufReader::new(child.stderr.take().context("no stderr")?).lines();
        let address = loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .context("agent serve did not listen within 30 s")??
                .context("agent serve exited before listening")?;
            if let Some(rest) = line.split("listening on http://").nth(1) {
                break rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self {
            child,
            base: format!("http://{address}"),
            client: reqwest::Client::new(),
        })
    }

    async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .body(body.to_string())
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        anyhow::ensure!(status.is_success(), "POST {path}: {status} {body}");
        Ok(body)
    }

    /// Opens the SSE stream of `id`.
    async fn stream(&self, id: &str) -> anyhow::Result<Sse> {
        let response = self
            .client
            .get(format!("{}/v1/sessions/{id}/events", self.base))
            .bearer_auth(TOKEN)
            .header("accept", "text/event-stream")
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "stream: {}",
            response.status()
        );
        Ok(Sse {
            response,
            buffer: String::new(),
        })
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(pid) = self.child.id() {
            let pid = rustix::process::Pid::from_raw(i32::try_from(pid)?).context("no pid")?;
            rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
        }
        let status = self.child.wait().await?;
        anyhow::ensure!(status.success(), "agent serve exited with {status}");
        Ok(())
    }
}

/// An SSE response read an event at a time: (kind, data).
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    /// The next event's kind and data; `None` at the end of the stream.
    async fn next(&mut self) -> anyhow::Result<Option<(String, Value)>> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let kind = block.lines().find_map(|line| line.strip_prefix("event: "));
                let data = block.lines().find_map(|line| line.strip_prefix("data: "));
                if let (Some(kind), Some(data)) = (kind, data) {
                    return Ok(Some((kind.to_owned(), serde_json::from_str(data)?)));
                }
                continue;
            }
            match self.response.chunk().await? {
                Some(chunk) => self.buffer.push_str(std::str::from_utf8(&chunk)?),
                None => return Ok(None),
            }
        }
    }

    /// Reads to the end; the last event's kind and data and the count.
    async fn last(&mut self) -> anyhow::Result<(Option<(String, Value)>, usize)> {
        let (mut last, mut count) = (None, 0);
        while let Some(event) = self.next().await? {
            last = Some(event);
            count += 1;
        }
        Ok((last, count))
    }
}

fn script(dir: &std::path::Path) -> anyhow::Result<PathBuf> {
    let path = dir.join("calculator.json");
    let responses = json!([
        {"type": "tool_call", "tool_name": "calculator",
         "arguments": {"left": 12, "operation": "multiply", "right": 7}},
        {"type": "finish", "answer": "84"}
    ]);
    std::fs::write(&path, responses.to_string())?;
    Ok(path)
}

fn session_id(created: &Value) -> anyhow::Result<&str> {
    created
        .get("session_id")
        .and_then(Value::as_str)
        .context("the created session has no session_id")
}

fn percentile(sorted: &[f64], share: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * share).round() as usize;
    sorted.get(index).copied().unwrap_or(0.0)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Creates one session and follows it to its end: (POST ms, end-to-end ms).
async fn create_and_follow(served: &Served, body: &Value) -> anyhow::Result<(f64, f64)> {
    let started = Instant::now();
    let created = served.post("/v1/sessions", body).await?;
    let posted = started.elapsed();
    let id = session_id(&created)?;
    let (last, _) = served.stream(id).await?.last().await?;
    anyhow::ensure!(
        last.as_ref().is_some_and(|(kind, _)| kind == "finished"),
        "session {id} ended with {last:?}"
    );
    Ok((ms(posted), ms(started.elapsed())))
}

/// Runs both measures and prints a JSON line for each.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("agent-bench-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let script = script(&dir)?;
    let served = Arc::new(Served::start(&args, &script).await?);
    let body = json!({"task": "What is 12 times 7?", "model": "scripted:calculator.json",
                      "tools": ["calculator"]});
    let started = Instant::now();
    let mut clients = JoinSet::new();
    let per_client = args.sessions.div_ceil(args.clients.max(1));
    for client in 0..args.clients.max(1) {
        let (served, body) = (Arc::clone(&served), body.clone());
        let count = per_client.min(args.sessions.saturating_sub(client * per_client));
        clients.spawn(async move {
            let mut timings = Vec::with_capacity(count);
            for _ in 0..count {
                timings.push(create_and_follow(&served, &body).await?);
            }
            anyhow::Ok(timings)
        });
    }
    let (mut posts, mut completions) = (Vec::new(), Vec::new());
    while let Some(timings) = clients.join_next().await {
        for (post, completion) in timings?? {
            posts.push(post);
            completions.push(completion);
        }
    }
    let wall_s = started.elapsed().as_secs_f64();
    posts.sort_by(f64::total_cmp);
    completions.sort_by(f64::total_cmp);
    println!(
        "{}",
        json!({
            "peer": "agent-rs",
            "bench": "serve_sessions",
            "version": env!("CARGO_PKG_VERSION"),
            "store": args.store.name(),
            "workers": args.workers,
            "clients": args.clients,
            "sessions": completions.len(),
            "wall_s": wall_s,
            "sessions_per_s": completions.len() as f64 / wall_s,
            "post_ms_p50": percentile(&posts, 0.5),
            "post_ms_p99": percentile(&posts, 0.99),
            "completed_ms_p50": percentile(&completions, 0.5),
            "completed_ms_p99": percentile(&completions, 0.99),
        })
    );
    fan_out(&served, &args, &body).await?;
    if let Ok(served) = Arc::try_unwrap(served) {
        served.stop().await?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// One session waiting for approval, `subscribers` streams on it; once every
/// stream has caught up, the call is approved and each stream read to its end.
async fn fan_out(served: &Arc<Served>, args: &ServeArgs, body: &Value) -> anyhow::Result<()> {
    let mut body = body.clone();
    if let Some(fields) = body.as_object_mut() {
        fields.insert("approve_tools".into(), json!(["calculator"]));
    }
    let created = served.post("/v1/sessions", &body).await?;
    let id = session_id(&created)?.to_owned();
    let caught_up = Arc::new(tokio::sync::Barrier::new(args.subscribers + 1));
    let mut subscribers = JoinSet::new();
    for _ in 0..args.subscribers {
        let (served, id, caught_up) = (Arc::clone(served), id.clone(), Arc::clone(&caught_up));
        subscribers.spawn(async move {
            let mut stream = served.stream(&id).await?;
            while let Some((kind, _)) = stream.next().await? {
                if kind == "approval_requested" {
                    break;
                }
            }
            caught_up.wait().await;
            let (last, count) = stream.last().await?;
            let received = agent::event::now_millis();
            let (kind, data) = last.context("the stream ended with nothing after the approval")?;
            anyhow::ensure!(kind == "finished", "the stream ended with {kind}");
            let committed = data.get("at").and_then(Value::as_u64).unwrap_or(received);
            anyhow::Ok((Instant::now(), received.saturating_sub(committed), count))
        });
    }
    caught_up.wait().await;
    let started = Instant::now();
    served
        .post(&format!("/v1/sessions/{id}/approve"), &json!({}))
        .await?;
    let (mut latencies, mut delivered, mut slowest) = (Vec::new(), 0, started);
    while let Some(outcome) = subscribers.join_next().await {
        let (done, latency, count) = outcome??;
        slowest = slowest.max(done);
        latencies.push(latency as f64);
        delivered += count;
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "{}",
        json!({
            "peer": "agent-rs",
            "bench": "serve_fan_out",
            "version": env!("CARGO_PKG_VERSION"),
            "store": args.store.name(),
            "subscribers": args.subscribers,
            "events_after_approval": delivered / args.subscribers.max(1),
            "events_delivered": delivered,
            "all_delivered_ms": ms(slowest - started),
            "final_event_latency_ms_p50": percentile(&latencies, 0.5),
            "final_event_latency_ms_p99": percentile(&latencies, 0.99),
        })
    );
    Ok(())
}
