//! Serving the API on a listener, with in-process workers beside it, until the
//! shutdown signal: then streams end, requests in flight are answered, workers
//! drain, and `serve` returns. Connections are HTTP/1.1, each with a bounded
//! time to send its request's headers, so clients that open connections and
//! dribble (or never send) headers cannot hold them open.

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
    /// How long a connection may take to send a request's headers before it is
    /// closed (default [`HEADER_READ_TIMEOUT`]).
    pub header_read_timeout: Duration,
}

/// How long a connection may take to send a request's headers, unless set.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the accept loop pauses after the system refused a connection
/// (out of file descriptors), so it does not spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            workers: 2,
            drain: DEFAULT_DRAIN,
            log: Arc::new(|line: &str| eprintln!("{line}")),
            header_read_timeout: HEADER_READ_TIMEOUT,
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
    let served = accept(listener, app, &shutdown, options.header_read_timeout).await;
    shutdown.cancel();
    while workers.join_next().await.is_some() {}
    served
}

/// Accepts connections and serves `app` on each until `shutdown`; then lets
/// the open ones finish what they are answering.
async fn accept(
    listener: TcpListener,
    app: axum::Router,
    shutdown: &agent_core::cancel::Cancellation,
    header_read_timeout: Duration,
) -> std::io::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection =
            graceful.watch(http.serve_connection(hyper_util::rt::TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
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
