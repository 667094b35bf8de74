//! `search {pattern, path?}`: a regex over the workspace's files, walking like
//! ripgrep (the `ignore` crate): `.gitignore` and hidden files respected, also
//! outside a git repository, binary and huge files skipped.

use std::io::Read;
use std::sync::LazyLock;

use agent_core::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::workspace::resolve_in_workspace;

/// Most matching lines returned.
pub const MAX_MATCHES: usize = 200;

/// Files larger than this are not searched.
const MAX_SEARCHED_BYTES: u64 = 2 * 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    pattern: String,
    path: Option<String>,
}

static SEARCH_SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec {
    name: "search".into(),
    description: "Searches the workspace's text files for a regular expression; returns `path:line: text` per match. \
                  Files ignored by .gitignore are skipped."
        .into(),
    input_schema: json!({
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "A regular expression (Rust regex syntax)."},
            "path": {"type": "string", "description": "File or directory to search, relative to the workspace (default: all of it)."}
        },
        "required": ["pattern"],
        "additionalProperties": false
    }),
    output_description: Some("matching lines as `path:line: text`".into()),
    error_description: Some("an invalid regular expression or a path outside the workspace".into()),
    idempotent: true,
    needs_approval: false,
}
});

/// The `search` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Search;

#[async_trait]
impl Tool for Search {
    fn spec(&self) -> &ToolSpec {
        &SEARCH_SPEC
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: SearchArgs = serde_json::from_value(arguments)
            .map_err(|err| ToolError::InvalidArguments(err.to_string()))?;
        let regex = regex::Regex::new(&args.pattern).map_err(|err| {
            ToolError::InvalidArguments(format!("field `pattern` is not a valid regex: {err}"))
        })?;
        let root = ctx
            .workspace
            .canonicalize()
            .map_err(|err| ToolError::failed(format!("the workspace is not usable: {err}")))?;
        let start = resolve_in_workspace(&root, args.path.as_deref().unwrap_or("."))?;
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
            return Ok(format!("no match for `{}`", args.pattern).into());
        }
        let mut out = matches.join("\n");
        if more > 0 {
            out.push_str(&format!(
                "\n[{more} more matches not shown; narrow the pattern or path]"
            ));
        }
        Ok(out.into())
    }
}
