//! `agent serve`: the HTTP API of the agent runtime, a thin layer over the store
//! and the work queue — a session created over HTTP is the same session the CLI
//! and every worker see.
//!
//! - [`router`]: every route as an axum [`Router`](axum::Router), to serve or to
//!   mount in an application of your own; [`openapi`] is its OpenAPI 3.1 document.
//! - [`Tokens`]: the bearer tokens accepted (auth is a layer over every route
//!   but `GET /healthz`).
//! - [`serve`]: the router on a listener, with in-process workers, until shutdown.
//!
//! Mounted under a prefix of an application of your own (auth, limits and the
//! error shape come with the router; the rest of your application is untouched):
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use agent_server::{ServerState, Tokens, router};
//!
//! let store: Arc<dyn agent::store::Store> = Arc::new(agent::store::MemoryStore::new());
//! let api = router(ServerState::new(store, Tokens::from_list("my-token-0123456789abcdef")?));
//! let app = axum::Router::new()
//!     .route("/", axum::routing::get(|| async { "my application" }))
//!     .nest("/agent", api);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//!
//! Routes: `POST /v1/sessions`, `GET /v1/sessions`, `GET /v1/sessions/{id}`,
//! `GET /v1/sessions/{id}/events` (JSON or Server-Sent Events),
//! `POST /v1/sessions/{id}/{approve,deny,cancel,resume,fork}`, `GET /metrics`,
//! `GET /v1/openapi.json`, `GET /healthz`, and the web page at `/` (its files
//! under `/ui/`).

mod auth;
mod error;
mod limits;
mod routes;
mod serve;
mod state;
mod tail;
mod ui;
mod uniform;

pub use auth::{MIN_TOKEN_LEN, OPEN_PATHS, TokenError, Tokens};
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use limits::MAX_BODY;
pub use routes::{REQUEST_TIMEOUT, openapi, router};
pub use serve::{HEADER_READ_TIMEOUT, ServeOptions, serve};
pub use state::{KEEP_ALIVE, ServerState};
pub use tail::POLL;
