//! What a store has committed, for benchmarks and tests, and whether its
//! latest commit failed because it cannot be written (for its health check).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_core::store::StoreError;

/// Counters of what a store has committed, for benchmarks.
#[derive(Debug, Default)]
pub struct CommitStats {
    commits: AtomicU64,
    durable_commits: AtomicU64,
    appends: AtomicU64,
    /// Why the latest commit failed, when it failed because the store cannot
    /// take writes; cleared by the next commit that succeeds.
    unwritable: Mutex<Option<StoreError>>,
}

impl CommitStats {
    /// Transactions committed.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Transactions committed with `synchronous=FULL` (one WAL fsync each).
    pub fn durable_commits(&self) -> u64 {
        self.durable_commits.load(Ordering::Relaxed)
    }

    /// Appends acknowledged.
    pub fn appends(&self) -> u64 {
        self.appends.load(Ordering::Relaxed)
    }

    /// Counts one committed transaction.
    pub(crate) fn committed(&self, durable: bool) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        if durable {
            self.durable_commits.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(mut unwritable) = self.unwritable.lock() {
            *unwritable = None;
        }
    }

    /// Notes a commit that failed with `err`: one that says the store cannot
    /// take writes is kept until a commit succeeds.
    #[cfg(feature = "sqlite")]
    pub(crate) fn failed(&self, err: &StoreError) {
        if matches!(err, StoreError::Unwritable(_))
            && let Ok(mut unwritable) = self.unwritable.lock()
        {
            *unwritable = Some(err.clone());
        }
    }

    /// Why the latest commit failed, if it failed because the store cannot
    /// take writes and none succeeded since.
    pub fn unwritable(&self) -> Option<StoreError> {
        self.unwritable.lock().ok().and_then(|error| error.clone())
    }

    /// Counts one acknowledged append.
    pub(crate) fn acknowledged(&self) {
        self.appends.fetch_add(1, Ordering::Relaxed);
    }
}
