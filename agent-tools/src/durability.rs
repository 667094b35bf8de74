//! Built-in tools for durability checks: `sleep` (idempotent, takes time) and
//! `append_line` (not idempotent, has a visible effect).

use std::io::Write;
use std::sync::LazyLock;
use std::time::Duration;

use agent_core::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::workspace::resolve_in_workspace;

/// The longest `sleep` allowed, in seconds.
pub const MAX_SLEEP_SECONDS: f64 = 60.0;

fn parse<T: for<'de> Deserialize<'de>>(arguments: Value) -> Result<T, ToolError> {
    serde_json::from_value(arguments).map_err(|err| ToolError::InvalidArguments(err.to_string()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SleepArgs {
    seconds: f64,
}

static SLEEP_SPEC: LazyLock<ToolSpec> = LazyLock::new(|| ToolSpec {
    name: "sleep".into(),
    description: "Waits for the given number of seconds (at most 60), then returns.".into(),
    input_schema: json!({
        "type": "object",
        "properties": {
            "seconds": {"type": "number", "minimum": 0, "maximum": MAX_SLEEP_SECONDS,
                        "description": "How long to wait, in seconds."}
        },
        "required": ["seconds"],
        "additionalProperties": false
    }),
    output_description: Some("how long it slept".into()),
    error_description: None,
    idempotent: true,
    needs_approval: false,
});

/// `sleep {"seconds": N}`: waits N seconds (0 to 60). Idempotent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sleep;

#[async_trait]
impl Tool for Sleep {
    fn spec(&self) -> &ToolSpec {
        &SLEEP_SPEC
    }

    async fn call(&self, arguments: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let SleepArgs { seconds } = parse(arguments)?;
        if !(0.0..=MAX_SLEEP_SECONDS).contains(&seconds) {
            return Err(ToolError::InvalidArguments(format!(
                "field `seconds`: {seconds} is outside 0 to {MAX_SLEEP_SECONDS}"
            )));
        }
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        Ok(format!("slept {seconds}s").into())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppendLineArgs {
    path: String,
    line: String,
}

static APPEND_LINE_SPEC: LazyLock<ToolSpec> = LazyLock::new(|| ToolSpec {
    name: "append_line".into(),
    description:
        "Appends one line of text to a file in the workspace, creating the file if needed.".into(),
    input_schema: json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "line": {"type": "string", "description": "The text to append; no line breaks."}
        },
        "required": ["path", "line"],
        "additionalProperties": false
    }),
    output_description: Some("which file grew".into()),
    error_description: Some(
        "a path outside the workspace, a missing directory, a line with a line break".into(),
    ),
    idempotent: false,
    needs_approval: false,
});

/// `append_line {"path", "line"}`: appends a line to a file under the workspace.
/// Not idempotent: a crash during it is reported as an unknown outcome, not re-run.
#[derive(Debug, Clone, Copy, Default)]
pub struct AppendLine;

#[async_trait]
impl Tool for AppendLine {
    fn spec(&self) -> &ToolSpec {
        &APPEND_LINE_SPEC
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let AppendLineArgs { path, line } = parse(arguments)?;
        if line.contains(['\n', '\r']) {
            return Err(ToolError::InvalidArguments(
                "field `line` holds a line break; append one line per call".into(),
            ));
        }
        let target = resolve_in_workspace(&ctx.workspace, &path)?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&target)
            .map_err(|err| {
                ToolError::failed(format!("cannot open `{path}` for appending: {err}"))
            })?;
        file.write_all(format!("{line}\n").as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(|err| ToolError::failed(format!("cannot append to `{path}`: {err}")))?;
        Ok(format!("appended 1 line to {path}").into())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;

    fn ctx(workspace: &Path) -> ToolContext {
        ToolContext::new("s", "c", Arc::from(workspace))
    }

    #[tokio::test]
    async fn append_line_appends_inside_and_refuses_outside() {
        let dir = std::env::temp_dir().join(format!("append-line-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ctx = ctx(&dir);
        for line in ["one", "two"] {
            AppendLine
                .call(json!({"path": "log.txt", "line": line}), &ctx)
                .await
                .unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(dir.join("log.txt")).unwrap(),
            "one\ntwo\n"
        );
        let err = AppendLine
            .call(json!({"path": "../escape.txt", "line": "x"}), &ctx)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("refused"), "{err}");
        assert!(
            AppendLine
                .call(json!({"path": "log.txt", "line": "a\nb"}), &ctx)
                .await
                .is_err()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn sleep_waits_and_bounds_its_argument() {
        let ctx = ctx(Path::new("."));
        assert_eq!(
            Sleep
                .call(json!({"seconds": 0}), &ctx)
                .await
                .unwrap()
                .content,
            "slept 0s"
        );
        assert!(Sleep.call(json!({"seconds": 61}), &ctx).await.is_err());
    }
}
