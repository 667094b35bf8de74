//! `Cancellation`: a flag the engine raises when it abandons a model or tool call
//! (the wall time ran out, another process wrote to the log). Futures are dropped
//! anyway; the flag is for work that runs outside its future, such as a blocking
//! generation loop or a child process, which should check it and stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// A shared cancellation flag; clones observe the same flag.
#[derive(Debug, Clone, Default)]
pub struct Cancellation(Arc<Flag>);

#[derive(Debug, Default)]
struct Flag {
    raised: AtomicBool,
    notify: Notify,
}

impl Cancellation {
    /// A flag that is not raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the flag and wakes every task waiting in [`Cancellation::cancelled`].
    pub fn cancel(&self) {
        self.0.raised.store(true, Ordering::Release);
        self.0.notify.notify_waiters();
    }

    /// Whether the flag is raised.
    pub fn is_cancelled(&self) -> bool {
        self.0.raised.load(Ordering::Acquire)
    }

    /// Completes once the flag is raised (at once if it already is).
    pub async fn cancelled(&self) {
        let notified = self.0.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.is_cancelled() {
            return;
        }
        notified.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_when_a_clone_cancels() {
        let flag = Cancellation::new();
        let clone = flag.clone();
        let waiter = tokio::spawn(async move { clone.cancelled().await });
        tokio::task::yield_now().await;
        assert!(!flag.is_cancelled());
        flag.cancel();
        waiter.await.unwrap();
        assert!(flag.is_cancelled());
        flag.cancelled().await;
    }
}
