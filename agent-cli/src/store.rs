//! Opening the session store named by `--store` / `AGENT_STORE`. Messages show
//! the store without a user or password.

use std::sync::Arc;

use agent::store::Store;
use agent::store::{OpenError, open_url, shown_url};

use crate::error::CliError;

/// Opens (creating if needed) the store at `url`.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, CliError> {
    open_url(url, true).await.map_err(|err| unusable(url, &err))
}

/// Opens the store at `url` if it exists; `None` when there is none yet.
pub async fn open_existing(url: &str) -> Result<Option<Arc<dyn Store>>, CliError> {
    match open_url(url, false).await {
        Ok(store) => Ok(Some(store)),
        Err(OpenError::Missing(_)) => Ok(None),
        Err(err) => Err(unusable(url, &err)),
    }
}

/// Opens an existing store that must hold `session_id`.
pub async fn open_for(url: &str, session_id: &str) -> Result<Arc<dyn Store>, CliError> {
    open_existing(url)
        .await?
        .ok_or_else(|| agent::store::StoreError::NotFound(session_id.to_owned()).into())
}

fn unusable(url: &str, err: &OpenError) -> CliError {
    CliError::Usage(format!(
        "--store `{}` cannot be used: {err}",
        shown_url(url)
    ))
}
