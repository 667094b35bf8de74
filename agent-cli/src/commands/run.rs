//! `agent run`: start a durable session for a task and drive it to its end.

use crate::cli::RunArgs;
use crate::error::CliError;
use crate::run_setup::{Drive, current_dir, drive_session};
use crate::store;

/// Runs the task; returns the exit code of its RunResult.
pub async fn run(args: RunArgs) -> Result<u8, CliError> {
    let mut config = crate::run_setup::new_session_config(&args.flags, &current_dir()?)?;
    crate::confinement::note(&mut config, args.flags.json);
    let store = store::open(&args.flags.store.store).await?;
    let session_id = agent::id::new_session_id();
    let drive = Drive::Run {
        session_id: &session_id,
        task: args.task,
        config: config.to_value(),
    };
    drive_session(&config, &store, &args.flags, drive).await
}
