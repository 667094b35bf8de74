//! What every handler shares: the store, the accepted tokens, the directory
//! relative paths of new sessions are taken from, the log watchers of live
//! streams, the text being written by this process's workers, and the signal
//! that ends streams.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agent_core::cancel::Cancellation;
use agent_core::store::Store;
use agent_runtime::{Agents, DeltaHub};

use crate::auth::{SharedTokens, Tokens};
use crate::tail::Tails;

/// How often an idle event stream sends a keep-alive comment, unless set.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The state of an API router.
#[derive(Clone)]
pub struct ServerState {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) tokens: SharedTokens,
    pub(crate) cwd: PathBuf,
    pub(crate) tails: Tails,
    pub(crate) streams: Arc<AtomicU64>,
    pub(crate) shutdown: Cancellation,
    pub(crate) keep_alive: Duration,
    pub(crate) deltas: DeltaHub,
    pub(crate) agents: Arc<std::sync::RwLock<Arc<Agents>>>,
    pub(crate) allow_adhoc: bool,
}

impl ServerState {
    /// Serves `store` to callers with one of `tokens`. Relative paths in new
    /// sessions (`workspace`, a `scripted:` model file, `trace`) are taken from
    /// the process's current directory unless [`ServerState::with_cwd`] says
    /// otherwise.
    pub fn new(store: Arc<dyn Store>, tokens: Tokens) -> Self {
        Self {
            tails: Tails::new(Arc::clone(&store)),
            store,
            tokens: SharedTokens::new(tokens),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            streams: Arc::default(),
            shutdown: Cancellation::new(),
            keep_alive: KEEP_ALIVE,
            deltas: DeltaHub::new(),
            agents: Arc::default(),
            allow_adhoc: false,
        }
    }

    /// Serves the agents `agents` declares: a new session names one (default:
    /// none declared).
    pub fn with_agents(self, agents: Agents) -> Self {
        self.replace_agents(agents);
        self
    }

    /// From now on, new sessions name agents of `agents` (a reload).
    pub fn replace_agents(&self, agents: Agents) {
        if let Ok(mut current) = self.agents.write() {
            *current = Arc::new(agents);
        }
    }

    /// The declared agents now.
    pub(crate) fn agents(&self) -> Arc<Agents> {
        self.agents
            .read()
            .map(|agents| Arc::clone(&agents))
            .unwrap_or_default()
    }

    /// Whether a new session may be configured free-form — any model, tools,
    /// workspace, program allowlist or MCP command line, with or without an
    /// agent — which gives every token holder the rights of the server's user
    /// (default: no, a session runs a declared agent).
    pub fn allow_adhoc(mut self, allow: bool) -> Self {
        self.allow_adhoc = allow;
        self
    }

    /// From now on, callers need one of `tokens` (the ones before no longer
    /// do); requests in flight are not affected.
    pub fn replace_tokens(&self, tokens: Tokens) {
        self.tokens.replace(tokens);
    }

    /// Relative paths of new sessions are taken from `dir`.
    pub fn with_cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = dir.into();
        self
    }

    /// Event streams end when `shutdown` is raised (so a graceful shutdown does
    /// not wait for followers that never leave).
    pub fn with_shutdown(mut self, shutdown: Cancellation) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// Idle event streams get a keep-alive comment this often (default
    /// [`KEEP_ALIVE`], 15 s).
    pub fn with_keep_alive(mut self, every: Duration) -> Self {
        self.keep_alive = every;
        self
    }

    /// Event streams carry, as `delta` events, the text that `hub`'s
    /// reporters (this process's workers) see written (default: a hub of its
    /// own, which [`serve`](crate::serve)'s workers report to).
    pub fn with_deltas(mut self, hub: DeltaHub) -> Self {
        self.deltas = hub;
        self
    }

    /// The hub whose deltas event streams carry; give it to the workers of
    /// this process ([`WorkerBuilder::deltas`](agent_runtime::WorkerBuilder::deltas)).
    pub fn deltas(&self) -> &DeltaHub {
        &self.deltas
    }

    /// Event streams open now.
    pub fn open_streams(&self) -> u64 {
        self.streams.load(Ordering::Relaxed)
    }
}

/// Counts an open event stream while it lives.
pub(crate) struct StreamGuard(Arc<AtomicU64>);

impl StreamGuard {
    pub(crate) fn open(state: &ServerState) -> Self {
        state.streams.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(&state.streams))
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
