//! Serving the API on a listener, with in-process workers beside it, until the
//! shutdown signal: then streams end, requests in flight are answered, workers
//! drain, and `serve` returns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_runtime::{DEFAULT_DRAIN, Worker, WorkerLog, default_worker_name};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::routes::router;
use crate::state::ServerState;

/// How [`serve`] runs besides the API.
#[derive(Clone)]
pub struct ServeOptions {
    /// In-process workers that drive queued sessions (0: leave it to `agent
    /// worker` processes).
    pub workers: usize,
    /// How long stopping workers let started work finish.
    pub drain: Duration,
    /// Where the server says what it does: one line per request (method, path,
    /// status, time — never a header) and the workers' lines.
    pub log: WorkerLog,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            workers: 2,
            drain: DEFAULT_DRAIN,
            log: Arc::new(|line: &str| eprintln!("{line}")),
        }
    }
}

/// Serves the API of `state` on `listener` with `options.workers` workers until
/// `state`'s shutdown signal is raised.
pub async fn serve(
    listener: TcpListener,
    state: ServerState,
    options: ServeOptions,
) -> std::io::Result<()> {
    let shutdown = state.shutdown.clone();
    let mut workers = JoinSet::new();
    let base = default_worker_name();
    for number in 1..=options.workers {
        let worker = Worker::builder(Arc::clone(&state.store))
            .name(format!("{base}/{number}"))
            .drain(options.drain)
            .shutdown(shutdown.clone())
            .log(Arc::clone(&options.log))
            .deltas(Arc::new(state.deltas().clone()))
            .build();
        workers.spawn(async move {
            worker.run().await;
        });
    }
    let log = Arc::clone(&options.log);
    let app = router(state).layer(axum::middleware::from_fn(move |request, next| {
        access_log(Arc::clone(&log), request, next)
    }));
    let stop = shutdown.clone();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    shutdown.cancel();
    while workers.join_next().await.is_some() {}
    served
}

/// Says one line per request: method, path (no query, no header), status, time.
async fn access_log(log: WorkerLog, request: Request, next: Next) -> Response {
    let line = format!("{} {}", request.method(), request.uri().path());
    let started = Instant::now();
    let response = next.run(request).await;
    tracing::info!(
        request = line.as_str(),
        status = response.status().as_u16(),
        ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "http request"
    );
    log(&format!(
        "http: {line} -> {} in {} ms",
        response.status().as_u16(),
        started.elapsed().as_millis()
    ));
    response
}
