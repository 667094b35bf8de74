//! Store operations a worker must not drop: the result of a call it ran, the
//! settling of a claim it holds. While the store cannot answer (its server is
//! down or restarting, its disk is full) they are retried with backoff — the
//! worker keeps the work, and its claim, meanwhile — until the store answers;
//! an error that waiting cannot mend is returned at once.

use std::future::Future;
use std::time::Duration;

use agent_core::store::StoreError;

use super::Shared;

/// First wait after a failure; it doubles up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(100);

/// Longest wait between two tries: how late after the store returns the
/// worker notices.
pub(super) const MAX_DELAY: Duration = Duration::from_secs(2);

/// Runs `operation` until it succeeds or fails in a way waiting cannot mend,
/// saying once in the worker's log that it waits for the store, and once when
/// it went through.
pub(super) async fn until_stored<T, F, Fut>(
    shared: &Shared,
    what: &str,
    mut operation: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut delay = FIRST_DELAY;
    let mut waited = false;
    loop {
        match operation().await {
            Ok(value) => {
                if waited {
                    shared.say(&format!("could {what} again: the store answers"));
                }
                return Ok(value);
            }
            Err(err) if err.is_transient() => {
                if !waited {
                    shared.say(&format!(
                        "cannot {what} for now ({err}); keeps it and tries again until the store answers"
                    ));
                    waited = true;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_DELAY);
            }
            Err(err) => return Err(err),
        }
    }
}
