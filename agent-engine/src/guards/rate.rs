//! `ModelRateLimit`: a guard that spaces the model calls of every session an
//! engine drives, so a fleet of concurrent sessions stays under a provider's
//! requests-per-minute limit instead of meeting its 429s. A call that comes too
//! early waits for its slot (bounded like any wait: the wall time and a cancel
//! still end it); nothing is recorded, and no budget is spent.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use agent_core::guard::{Checkpoint, Guard, GuardContext, Verdict};

/// At most `per_minute` model calls a minute across the engine, evenly spaced.
#[derive(Debug)]
pub struct ModelRateLimit {
    interval: Duration,
    next: Mutex<Option<Instant>>,
}

impl ModelRateLimit {
    /// Allows `per_minute` model calls a minute (at least one).
    pub fn per_minute(per_minute: u32) -> Self {
        Self {
            interval: Duration::from_secs(60) / per_minute.max(1),
            next: Mutex::new(None),
        }
    }

    /// Takes the next free slot and says how long to wait for it.
    fn reserve(&self) -> Duration {
        let now = Instant::now();
        let Ok(mut next) = self.next.lock() else {
            return Duration::ZERO;
        };
        let slot = next.map_or(now, |next| next.max(now));
        *next = Some(slot + self.interval);
        slot - now
    }
}

#[async_trait]
impl Guard for ModelRateLimit {
    async fn check(&self, checkpoint: Checkpoint<'_>, _ctx: &GuardContext<'_>) -> Verdict {
        if matches!(checkpoint, Checkpoint::ModelCall | Checkpoint::Work(_)) {
            let wait = self.reserve();
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        Verdict::Proceed
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use agent_core::state::SessionState;

    #[tokio::test(start_paused = true)]
    async fn calls_are_spaced_by_the_interval_and_other_decisions_pass() {
        let limit = ModelRateLimit::per_minute(120);
        let state = SessionState::new("s");
        let ctx = GuardContext {
            state: &state,
            workspace: Path::new("."),
            started: std::time::Instant::now(),
        };
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(
                limit.check(Checkpoint::ModelCall, &ctx).await,
                Verdict::Proceed
            );
        }
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(1),
            "two waits of 500 ms"
        );
        let before = Instant::now();
        limit.check(Checkpoint::Finish("done"), &ctx).await;
        assert_eq!(before.elapsed(), Duration::ZERO);
    }
}
