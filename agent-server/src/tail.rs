//! Following session logs as they grow, for Server-Sent Events: one watcher per
//! followed session, however many streams follow it. The watcher reads the log's
//! new events every [`POLL`] and announces the newest seq; streams then read
//! what is new to them. Whoever wrote the events — a worker in this process,
//! another `agent worker`, `agent approve` on another machine — the log is the one
//! source, so every stream sees every committed event once, in order. A watcher
//! stops when its last stream is gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_core::store::Store;
use tokio::sync::watch;

/// How often a followed session's log is read for new events.
pub const POLL: Duration = Duration::from_millis(50);

/// The watchers of followed sessions.
#[derive(Clone)]
pub struct Tails {
    store: Arc<dyn Store>,
    watchers: Arc<Mutex<HashMap<String, Arc<watch::Sender<u64>>>>>,
}

impl Tails {
    /// No session followed yet, on `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            watchers: Arc::default(),
        }
    }

    /// Announcements of the newest seq of `session_id`'s log, starting a watcher
    /// if none runs; `known` is the last seq the caller has read.
    pub fn follow(&self, session_id: &str, known: u64) -> watch::Receiver<u64> {
        let mut watchers = self.watchers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = watchers.get(session_id) {
            return sender.subscribe();
        }
        let (sender, receiver) = watch::channel(known);
        let sender = Arc::new(sender);
        watchers.insert(session_id.to_owned(), Arc::clone(&sender));
        tokio::spawn(watch_log(
            self.clone(),
            session_id.to_owned(),
            known,
            sender,
        ));
        receiver
    }

    /// How many sessions are being followed now.
    pub fn followed(&self) -> usize {
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Removes the watcher of `session_id` if no stream follows it any more.
    fn retire_if_unfollowed(&self, session_id: &str, sender: &watch::Sender<u64>) -> bool {
        let mut watchers = self.watchers.lock().unwrap_or_else(PoisonError::into_inner);
        if sender.receiver_count() > 0 {
            return false;
        }
        watchers.remove(session_id);
        true
    }
}

async fn watch_log(
    tails: Tails,
    session_id: String,
    mut last: u64,
    sender: Arc<watch::Sender<u64>>,
) {
    loop {
        tokio::time::sleep(POLL).await;
        if tails.retire_if_unfollowed(&session_id, &sender) {
            return;
        }
        if let Ok(events) = tails.store.load_after(&session_id, last).await
            && let Some(newest) = events.last()
        {
            last = newest.seq;
            sender.send_replace(last);
        }
    }
}
