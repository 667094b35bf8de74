//! File tools confined to the workspace: `read_file`, `list_dir`, `write_file` and
//! `edit_file`. Every path goes through [`resolve_in_workspace`].

use std::sync::LazyLock;

use agent_core::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use async_trait::async_trait;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::workspace::resolve_in_workspace;

/// Largest file `read_file` opens.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Most characters `read_file` returns; ask for a line range to see more.
pub const MAX_READ_CHARS: usize = 64 * 1024;

/// Most entries `list_dir` returns.
pub const MAX_ENTRIES: usize = 1000;

fn parse<T: DeserializeOwned>(arguments: Value) -> Result<T, ToolError> {
    serde_json::from_value(arguments).map_err(|err| ToolError::InvalidArguments(err.to_string()))
}

fn io_error(action: &str, path: &str, err: &std::io::Error) -> ToolError {
    ToolError::failed(format!("cannot {action} `{path}`: {err}"))
}

fn spec(name: &str, description: &str, schema: Value, idempotent: bool) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: schema,
        output_description: None,
        error_description: Some(
            "a path outside the workspace, a missing file, or a bad range".into(),
        ),
        idempotent,
        needs_approval: false,
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadFileArgs {
    path: String,
    start_line: Option<usize>,
    end_line: Option<usize>,
}

static READ_FILE_SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    spec(
        "read_file",
        "Reads a UTF-8 text file in the workspace, optionally only lines start_line..=end_line (1-based).",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "start_line": {"type": "integer", "minimum": 1, "description": "First line to return."},
                "end_line": {"type": "integer", "minimum": 1, "description": "Last line to return."}
            },
            "required": ["path"],
            "additionalProperties": false
        }),
        true,
    )
});

/// `read_file {path, start_line?, end_line?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> &ToolSpec {
        &READ_FILE_SPEC
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ReadFileArgs = parse(arguments)?;
        let path = resolve_in_workspace(&ctx.workspace, &args.path)?;
        let size = std::fs::metadata(&path)
            .map_err(|err| io_error("read", &args.path, &err))?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(ToolError::failed(format!(
                "`{}` has {size} bytes, more than the {MAX_FILE_BYTES} this tool reads; use `search` to find the part you need",
                args.path
            )));
        }
        let text =
            std::fs::read_to_string(&path).map_err(|err| io_error("read", &args.path, &err))?;
        let lines: Vec<&str> = text.lines().collect();
        let start = args.start_line.unwrap_or(1);
        let end = args.end_line.unwrap_or(lines.len()).min(lines.len());
        if start > end.max(1) || (start > lines.len() && !lines.is_empty()) {
            return Err(ToolError::InvalidArguments(format!(
                "lines {start}..={end} are not in `{}`, which has {} lines",
                args.path,
                lines.len()
            )));
        }
        let mut out = lines
            .get(start.saturating_sub(1)..end)
            .unwrap_or_default()
            .join("\n");
        if out.chars().count() > MAX_READ_CHARS {
            out = out.chars().take(MAX_READ_CHARS).collect();
            out.push_str("\n[truncated; read a smaller line range]");
        }
        Ok(out.into())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListDirArgs {
    path: String,
}

static LIST_DIR_SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    spec(
        "list_dir",
        "Lists a directory in the workspace: one entry per line, directories ending in `/`.",
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Directory, relative to the workspace (`.` for its root)."}},
            "required": ["path"],
            "additionalProperties": false
        }),
        true,
    )
});

/// `list_dir {path}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

#[async_trait]
impl Tool for ListDir {
    fn spec(&self) -> &ToolSpec {
        &LIST_DIR_SPEC
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ListDirArgs = parse(arguments)?;
        let path = resolve_in_workspace(&ctx.workspace, &args.path)?;
        let mut entries: Vec<String> = std::fs::read_dir(&path)
            .map_err(|err| io_error("list", &args.path, &err))?
            .filter_map(Result::ok)
            .map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    format!("{name}/")
                } else {
                    name
                }
            })
            .collect();
        entries.sort();
        let total = entries.len();
        entries.truncate(MAX_ENTRIES);
        let mut out = entries.join("\n");
        if total > MAX_ENTRIES {
            out.push_str(&format!(
                "\n[{} more entries not shown]",
                total - MAX_ENTRIES
            ));
        }
        Ok(out.into())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteFileArgs {
    path: String,
    content: String,
}

static WRITE_FILE_SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    spec(
        "write_file",
        "Writes a whole file in the workspace (creating it and its directories, or replacing it).",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "content": {"type": "string", "description": "The complete new content."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        }),
        true,
    )
});

/// `write_file {path, content}`. Idempotent: writing the same content twice is
/// the same as once.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> &ToolSpec {
        &WRITE_FILE_SPEC
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: WriteFileArgs = parse(arguments)?;
        let path = resolve_in_workspace(&ctx.workspace, &args.path)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|err| io_error("create the directory of", &args.path, &err))?;
        }
        std::fs::write(&path, &args.content).map_err(|err| io_error("write", &args.path, &err))?;
        Ok(format!("wrote {} bytes to {}", args.content.len(), args.path).into())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EditFileArgs {
    path: String,
    old: String,
    new: String,
}

static EDIT_FILE_SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    spec(
        "edit_file",
        "Replaces one exact, unique occurrence of `old` with `new` in a file of the workspace.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "old": {"type": "string", "description": "Text to replace; must occur exactly once."},
                "new": {"type": "string", "description": "Replacement text."}
            },
            "required": ["path", "old", "new"],
            "additionalProperties": false
        }),
        false,
    )
});

/// `edit_file {path, old, new}`: a missing or ambiguous `old` is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

#[async_trait]
impl Tool for EditFile {
    fn spec(&self) -> &ToolSpec {
        &EDIT_FILE_SPEC
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: EditFileArgs = parse(arguments)?;
        if args.old.is_empty() {
            return Err(ToolError::InvalidArguments(
                "field `old` is empty; quote the text to replace".into(),
            ));
        }
        let path = resolve_in_workspace(&ctx.workspace, &args.path)?;
        let text =
            std::fs::read_to_string(&path).map_err(|err| io_error("read", &args.path, &err))?;
        match text.matches(&args.old).count() {
            0 => Err(ToolError::failed(format!(
                "`old` does not occur in `{}`; read the file and quote the text exactly",
                args.path
            ))),
            1 => {
                let edited = text.replacen(&args.old, &args.new, 1);
                std::fs::write(&path, edited).map_err(|err| io_error("write", &args.path, &err))?;
                Ok(format!("edited {}", args.path).into())
            }
            n => Err(ToolError::failed(format!(
                "`old` occurs {n} times in `{}`; include more surrounding text so it is unique",
                args.path
            ))),
        }
    }
}
