//! `search {pattern, path?}`: a regex over the workspace's files, walking like
//! ripgrep (the `ignore` crate): `.gitignore` and hidden files respected, also
//! outside a git repository, binary and huge files skipped.

use agent_core::tool::{ToolContext, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use std::io::Read;

use crate::workspace::resolve_in_workspace;

/// Most matching lines returned.
pub const MAX_MATCHES: usize = 200;

/// Files larger than this are not searched.
const MAX_SEARCHED_BYTES: u64 = 2 * 1024 * 1024;

/// Searches the workspace's text files for a regular expression; returns `path:line: text` per match. Files ignored by .gitignore are skipped.
#[derive(Debug, Clone, Deserialize, JsonSchema, crate::Derive)]
#[serde(deny_unknown_fields)]
#[tool(
    crate = "crate",
    idempotent,
    output = "matching lines as `path:line: text`",
    errors = "an invalid regular expression or a path outside the workspace"
)]
pub struct Search {
    /// A regular expression (Rust regex syntax).
    pub pattern: String,
    /// File or directory to search, relative to the workspace (default: all of it).
    pub path: Option<String>,
}

impl Search {
    async fn run(self, ctx: &ToolContext) -> Result<String, ToolError> {
        let regex = regex::Regex::new(&self.pattern).map_err(|err| {
            ToolError::InvalidArguments(format!("field `pattern` is not a valid regex: {err}"))
        })?;
        let root = ctx
            .workspace
            .canonicalize()
            .map_err(|err| ToolError::failed(format!("the workspace is not usable: {err}")))?;
        let start = resolve_in_workspace(&root, self.path.as_deref().unwrap_or("."))?;
        let walker = ignore::WalkBuilder::new(&start)
            .require_git(false)
            .follow_links(false)
            .build();
        let mut matches = Vec::new();
        let mut more = 0usize;
        for entry in walker.filter_map(Result::ok) {
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                continue;
            }
            let path = entry.path();
            if !path.starts_with(&root)
                || entry.metadata().is_ok_and(|m| m.len() > MAX_SEARCHED_BYTES)
            {
                continue;
            }
            let mut bytes = Vec::new();
            if std::fs::File::open(path)
                .and_then(|mut file| file.read_to_end(&mut bytes))
                .is_err()
            {
                continue;
            }
            let Ok(text) = String::from_utf8(bytes) else {
                continue;
            };
            let shown = path
                .strip_prefix(&root)
                .unwrap_or(path)
                .display()
                .to_string();
            for (number, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    if matches.len() < MAX_MATCHES {
                        matches.push(format!("{shown}:{}: {}", number + 1, line.trim_end()));
                    } else {
                        more += 1;
                    }
                }
            }
        }
        if matches.is_empty() {
            return Ok(format!("no match for `{}`", self.pattern));
        }
        let mut out = matches.join("\n");
        if more > 0 {
            out.push_str(&format!(
                "\n[{more} more matches not shown; narrow the pattern or path]"
            ));
        }
        Ok(out)
    }
}
