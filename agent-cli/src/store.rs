//! Opening the session store named by `--store` / `AGENT_STORE`.

use std::sync::Arc;

use agent::EventStore;
use agent::store::{OpenError, open_url};

use crate::error::CliError;

/// Opens (creating if needed) the store at `url`.
pub fn open(url: &str) -> Result<Arc<dyn EventStore>, CliError> {
    open_url(url, true).map_err(|err| unusable(url, &err))
}

/// Opens the store at `url` if it exists; `None` when there is none yet.
pub fn open_existing(url: &str) -> Result<Option<Arc<dyn EventStore>>, CliError> {
    match open_url(url, false) {
        Ok(store) => Ok(Some(store)),
        Err(OpenError::Missing(_)) => Ok(None),
        Err(err) => Err(unusable(url, &err)),
    }
}

/// Opens an existing store that must hold `session_id`.
pub fn open_for(url: &str, session_id: &str) -> Result<Arc<dyn EventStore>, CliError> {
    open_existing(url)?.ok_or_else(|| agent::StoreError::NotFound(session_id.to_owned()).into())
}

fn unusable(url: &str, err: &OpenError) -> CliError {
    CliError::Usage(format!("--store `{url}` cannot be used: {err}"))
}
