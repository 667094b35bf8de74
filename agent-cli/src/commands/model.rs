//! `agent model pull` and `agent model list`: the local GGUF models that
//! `--model local[:FILE]` runs, under `.agent/models` of the current directory.

use std::path::PathBuf;

use agent_runtime::LOCAL_MODELS_DIR;
use agent_runtime::model_files::{self, Pulled};
use serde_json::json;

use crate::cli::ModelCommand;
use crate::error::CliError;
use crate::output::{print, print_json};

/// Runs one `agent model` command.
pub async fn model(command: ModelCommand) -> Result<u8, CliError> {
    match command {
        ModelCommand::Pull { json } => pull(json).await,
        ModelCommand::List { json } => list(json),
    }
}

fn models_dir() -> Result<PathBuf, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|err| CliError::Usage(format!("the current directory cannot be read: {err}")))?;
    Ok(cwd.join(LOCAL_MODELS_DIR))
}

async fn pull(json: bool) -> Result<u8, CliError> {
    let dir = models_dir()?;
    let pulled = tokio::task::spawn_blocking(move || {
        model_files::pull(&dir, &|line| eprintln!("agent model pull: {line}"))
    })
    .await
    .map_err(|err| CliError::Internal(format!("the pull stopped unexpectedly: {err}")))?
    .map_err(|err| CliError::Usage(format!("agent model pull: {err}")))?;
    let (path, fetched) = match &pulled {
        Pulled::AlreadyThere(path) => (path, false),
        Pulled::Fetched(path) => (path, true),
    };
    if json {
        print_json(&json!({"path": path, "fetched": fetched}))?;
    } else if fetched {
        print(&format!(
            "{}\nfetched and verified; run it with --model local\n",
            path.display()
        ))?;
    } else {
        print(&format!(
            "{}\nalready there and verified; nothing to do\n",
            path.display()
        ))?;
    }
    Ok(0)
}

fn list(json: bool) -> Result<u8, CliError> {
    let dir = models_dir()?;
    let files = model_files::list(&dir)
        .map_err(|err| CliError::Usage(format!("cannot read {}: {err}", dir.display())))?;
    if json {
        let rows: Vec<_> = files
            .iter()
            .map(|file| {
                json!({"name": file.name, "path": file.path, "bytes": file.bytes, "default": file.default})
            })
            .collect();
        print_json(&json!(rows))?;
        return Ok(0);
    }
    if files.is_empty() {
        print(&format!(
            "no models in {}; `agent model pull` fetches the default one\n",
            dir.display()
        ))?;
        return Ok(0);
    }
    let mut text = String::new();
    for file in &files {
        text.push_str(&format!(
            "{:<48} {:>8.1} MB{}\n",
            file.name,
            file.bytes as f64 / 1_000_000.0,
            if file.default {
                "  (default: --model local)"
            } else {
                ""
            }
        ));
    }
    print(&text)?;
    Ok(0)
}
