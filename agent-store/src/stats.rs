//! What a store has committed, for benchmarks and tests.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of what a store has committed, for benchmarks.
#[derive(Debug, Default)]
pub struct CommitStats {
    commits: AtomicU64,
    durable_commits: AtomicU64,
    appends: AtomicU64,
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
    }

    /// Counts one acknowledged append.
    pub(crate) fn acknowledged(&self) {
        self.appends.fetch_add(1, Ordering::Relaxed);
    }
}
