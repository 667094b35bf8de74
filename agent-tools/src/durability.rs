//! Built-in tools for durability checks: `sleep` (idempotent, takes time) and
//! `append_line` (not idempotent, has a visible effect).

use std::io::Write;
use std::time::Duration;

use agent_core::tool::{ToolContext, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::workspace::Beneath;

/// The longest `sleep` allowed, in seconds.
pub const MAX_SLEEP_SECONDS: f64 = 60.0;

/// Waits for the given number of seconds (at most 60), then returns.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, crate::Derive)]
#[serde(deny_unknown_fields)]
#[tool(crate = "crate", idempotent, output = "how long it slept")]
pub struct Sleep {
    /// How long to wait, in seconds.
    #[schemars(range(min = 0.0, max = 60.0))]
    pub seconds: f64,
}

impl Sleep {
    async fn run(self, _ctx: &ToolContext) -> Result<String, ToolError> {
        let seconds = self.seconds;
        if !(0.0..=MAX_SLEEP_SECONDS).contains(&seconds) {
            return Err(ToolError::InvalidArguments(format!(
                "field `seconds`: {seconds} is outside 0 to {MAX_SLEEP_SECONDS}"
            )));
        }
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        Ok(format!("slept {seconds}s"))
    }
}

/// Appends one line of text to a file in the workspace, creating the file if needed.
///
/// Not idempotent: a crash during it is reported as an unknown outcome, not re-run.
#[derive(Debug, Clone, Deserialize, JsonSchema, crate::Derive)]
#[serde(deny_unknown_fields)]
#[tool(
    crate = "crate",
    output = "which file grew",
    errors = "a path outside the workspace, a missing directory, a line with a line break"
)]
pub struct AppendLine {
    /// File path, relative to the workspace.
    pub path: String,
    /// The text to append; no line breaks.
    pub line: String,
}

impl AppendLine {
    async fn run(self, ctx: &ToolContext) -> Result<String, ToolError> {
        let Self { path, line } = self;
        if line.contains(['\n', '\r']) {
            return Err(ToolError::InvalidArguments(
                "field `line` holds a line break; append one line per call".into(),
            ));
        }
        let target = Beneath::new(&ctx.workspace, &path)?;
        target.refuse_hard_links()?;
        let mut file = target
            .dir
            .open_with(
                &target.relative,
                cap_std::fs::OpenOptions::new().create(true).append(true),
            )
            .map_err(|err| target.io_error("open for appending", &err))?;
        file.write_all(format!("{line}\n").as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(|err| ToolError::failed(format!("cannot append to `{path}`: {err}")))?;
        Ok(format!("appended 1 line to {path}"))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use agent_core::tool::Tool;
    use serde_json::json;

    use super::*;
    use crate::Typed;

    fn ctx(workspace: &Path) -> ToolContext {
        ToolContext::new("s", "c", Arc::from(workspace))
    }

    #[tokio::test]
    async fn append_line_appends_inside_and_refuses_outside() {
        let dir = std::env::temp_dir().join(format!("append-line-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ctx = ctx(&dir);
        for line in ["one", "two"] {
            Typed::<AppendLine>::new()
                .call(json!({"path": "log.txt", "line": line}), &ctx)
                .await
                .unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(dir.join("log.txt")).unwrap(),
            "one\ntwo\n"
        );
        let err = Typed::<AppendLine>::new()
            .call(json!({"path": "../escape.txt", "line": "x"}), &ctx)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("refused"), "{err}");
        assert!(
            Typed::<AppendLine>::new()
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
            Typed::<Sleep>::new()
                .call(json!({"seconds": 0}), &ctx)
                .await
                .unwrap()
                .content,
            "slept 0s"
        );
        assert!(
            Typed::<Sleep>::new()
                .call(json!({"seconds": 61}), &ctx)
                .await
                .is_err()
        );
    }
}
