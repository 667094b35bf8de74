//! A worker drives one claimed session: with the configuration the session
//! recorded, under the session's lease, its tool calls handed to the queue.

use std::time::Duration;

use agent_core::event::EventKind;
use agent_core::result::ExitReason;
use agent_core::store::StoreError;
use agent_core::store::queue::SessionClaim;
use agent_engine::{Drive, EngineError};

use super::Shared;
use super::retry::until_stored;
use crate::config::SessionConfig;
use crate::session::{Session, SessionOptions};

/// How long a session this worker cannot drive is held before it is given back,
/// so that workers do not spin on it.
pub(super) const BROKEN_BACKOFF: Duration = Duration::from_secs(2);

/// How long a session another process drives is held before it is given back:
/// its driver (or, when that died on another machine, its lease's expiry) is
/// waited out without spinning.
const ELSEWHERE_BACKOFF: Duration = Duration::from_millis(500);

/// Drives the session of `claim`, then finishes the claim (or gives it back
/// when another process drives the session or it cannot be built here).
pub(super) async fn run(shared: &Shared, claim: SessionClaim) {
    shared.say(&format!("driving {}", claim.session_id));
    let outcome = drive(shared, &claim.session_id).await;
    let store = &shared.store;
    let finish = match outcome {
        Ok(what) => {
            shared.say(&format!("{what} {}", claim.session_id));
            true
        }
        Err(Refusal::Elsewhere(why)) => {
            shared.say(&format!("left {}: {why}", claim.session_id));
            tokio::time::sleep(ELSEWHERE_BACKOFF).await;
            false
        }
        Err(Refusal::Broken(why)) => {
            // Also when the store failed under the drive: the session goes back
            // to the queue, and its next drive continues from its log.
            shared.say(&format!("cannot drive {}: {why}", claim.session_id));
            tokio::time::sleep(BROKEN_BACKOFF).await;
            false
        }
    };
    let what = format!("settle its claim of {}", claim.session_id);
    let settled = until_stored(shared, &what, || async {
        if finish {
            store.finish_session(&claim, &shared.name).await
        } else {
            store.release_session(&claim.session_id, &shared.name).await
        }
    })
    .await;
    if let Err(err) = settled {
        shared.say(&format!(
            "cannot settle its claim of {}: {err}",
            claim.session_id
        ));
    }
}

/// Why a session was not driven.
enum Refusal {
    /// Another process drives it now.
    Elsewhere(String),
    /// It cannot be driven by this worker (its configuration, its store).
    Broken(String),
}

/// Drives the session; what became of it, for the log.
async fn drive(shared: &Shared, session_id: &str) -> Result<&'static str, Refusal> {
    let store = &shared.store;
    let events = store
        .load(session_id)
        .await
        .map_err(|err| Refusal::Broken(err.to_string()))?;
    let Some(EventKind::SessionStarted { config, .. }) = events.first().map(|event| &event.kind)
    else {
        return Err(Refusal::Broken(
            "its log does not start with its configuration".into(),
        ));
    };
    let config = SessionConfig::recorded(config).map_err(|err| Refusal::Broken(err.to_string()))?;
    let toolbox = shared
        .cache
        .toolbox(&config, &shared.extra_tools)
        .await
        .map_err(Refusal::Broken)?;
    let options = SessionOptions {
        queue: Some(store.clone()),
        deltas: shared.deltas.clone(),
        ..SessionOptions::default()
    };
    let session = Session::with_toolbox(&config, store.clone(), options, &toolbox)
        .await
        .map_err(|err| Refusal::Broken(err.to_string()))?;
    let driven = session
        .engine
        .drive(session_id, &format!("worker {}", shared.name))
        .await;
    session.shutdown().await;
    match driven {
        Ok(Drive::Parked) => Ok("parked"),
        Ok(Drive::Stopped(result)) if result.exit_reason == ExitReason::AwaitingApproval => {
            Ok("left awaiting approval")
        }
        Ok(Drive::Stopped(_)) => Ok("ended"),
        Err(EngineError::Store(err @ (StoreError::Leased { .. } | StoreError::LeaseLost(_)))) => {
            Err(Refusal::Elsewhere(err.to_string()))
        }
        Err(err) => Err(Refusal::Broken(err.to_string())),
    }
}
