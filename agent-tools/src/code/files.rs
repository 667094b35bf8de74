//! File tools confined to the workspace: `read_file`, `list_dir`, `write_file` and
//! `edit_file`. Every path is checked by [`resolve_in_workspace`](crate::workspace::resolve_in_workspace) and opened
//! beneath the workspace root ([`Beneath`]).

use agent_core::tool::{ToolContext, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::workspace::Beneath;

/// Largest file `read_file` opens.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Most characters `read_file` returns; ask for a line range to see more.
pub const MAX_READ_CHARS: usize = 64 * 1024;

/// Most entries `list_dir` returns.
pub const MAX_ENTRIES: usize = 1000;

/// Reads a UTF-8 text file in the workspace, optionally only lines start_line..=end_line (1-based).
#[derive(Debug, Clone, Deserialize, JsonSchema, crate::Derive)]
#[serde(deny_unknown_fields)]
#[tool(
    crate = "crate",
    idempotent,
    errors = "a path outside the workspace, a missing file, or a bad range"
)]
pub struct ReadFile {
    /// File path, relative to the workspace.
    pub path: String,
    /// First line to return.
    #[schemars(range(min = 1))]
    pub start_line: Option<usize>,
    /// Last line to return.
    #[schemars(range(min = 1))]
    pub end_line: Option<usize>,
}

impl ReadFile {
    async fn run(self, ctx: &ToolContext) -> Result<String, ToolError> {
        let file = Beneath::new(&ctx.workspace, &self.path)?;
        file.refuse_hard_links()?;
        let size = file
            .dir
            .metadata(&file.relative)
            .map_err(|err| file.io_error("read", &err))?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(ToolError::failed(format!(
                "`{}` has {size} bytes, more than the {MAX_FILE_BYTES} this tool reads; use `search` to find the part you need",
                self.path
            )));
        }
        let text = file
            .dir
            .read_to_string(&file.relative)
            .map_err(|err| file.io_error("read", &err))?;
        let lines: Vec<&str> = text.lines().collect();
        let start = self.start_line.unwrap_or(1);
        let end = self.end_line.unwrap_or(lines.len()).min(lines.len());
        if start > end.max(1) || (start > lines.len() && !lines.is_empty()) {
            return Err(ToolError::InvalidArguments(format!(
                "lines {start}..={end} are not in `{}`, which has {} lines",
                self.path,
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
        Ok(out)
    }
}

/// Lists a directory in the workspace: one entry per line, directories ending in `/`.
#[derive(Debug, Clone, Deserialize, JsonSchema, crate::Derive)]
#[serde(deny_unknown_fields)]
#[tool(
    crate = "crate",
    idempotent,
    errors = "a path outside the workspace or a missing directory"
)]
pub struct ListDir {
    /// Directory, relative to the workspace (`.` for its root).
    pub path: String,
}

impl ListDir {
    async fn run(self, ctx: &ToolContext) -> Result<String, ToolError> {
        let listed = Beneath::new(&ctx.workspace, &self.path)?;
        let mut entries: Vec<String> = listed
            .dir
            .read_dir(&listed.relative)
            .map_err(|err| listed.io_error("list", &err))?
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
        Ok(out)
    }
}

/// Writes a whole file in the workspace (creating it and its directories, or replacing it).
///
/// Idempotent: writing the same content twice is the same as once.
#[derive(Debug, Clone, Deserialize, JsonSchema, crate::Derive)]
#[serde(deny_unknown_fields)]
#[tool(
    crate = "crate",
    idempotent,
    errors = "a path outside the workspace or a file that cannot be written"
)]
pub struct WriteFile {
    /// File path, relative to the workspace.
    pub path: String,
    /// The complete new content.
    pub content: String,
}

impl WriteFile {
    async fn run(self, ctx: &ToolContext) -> Result<String, ToolError> {
        let file = Beneath::new(&ctx.workspace, &self.path)?;
        file.refuse_hard_links()?;
        if let Some(parent) = file.relative.parent().filter(|p| !p.as_os_str().is_empty()) {
            file.dir
                .create_dir_all(parent)
                .map_err(|err| file.io_error("create the directory of", &err))?;
        }
        file.dir
            .write(&file.relative, &self.content)
            .map_err(|err| file.io_error("write", &err))?;
        Ok(format!(
            "wrote {} bytes to {}",
            self.content.len(),
            self.path
        ))
    }
}

/// Replaces one exact, unique occurrence of `old` with `new` in a file of the workspace.
#[derive(Debug, Clone, Deserialize, JsonSchema, crate::Derive)]
#[serde(deny_unknown_fields)]
#[tool(
    crate = "crate",
    errors = "a path outside the workspace, or `old` missing or not unique"
)]
pub struct EditFile {
    /// File path, relative to the workspace.
    pub path: String,
    /// Text to replace; must occur exactly once.
    pub old: String,
    /// Replacement text.
    pub new: String,
}

impl EditFile {
    async fn run(self, ctx: &ToolContext) -> Result<String, ToolError> {
        if self.old.is_empty() {
            return Err(ToolError::InvalidArguments(
                "field `old` is empty; quote the text to replace".into(),
            ));
        }
        let file = Beneath::new(&ctx.workspace, &self.path)?;
        file.refuse_hard_links()?;
        let text = file
            .dir
            .read_to_string(&file.relative)
            .map_err(|err| file.io_error("read", &err))?;
        match text.matches(&self.old).count() {
            0 => Err(ToolError::failed(format!(
                "`old` does not occur in `{}`; read the file and quote the text exactly",
                self.path
            ))),
            1 => {
                let edited = text.replacen(&self.old, &self.new, 1);
                file.dir
                    .write(&file.relative, edited)
                    .map_err(|err| file.io_error("write", &err))?;
                Ok(format!("edited {}", self.path))
            }
            n => Err(ToolError::failed(format!(
                "`old` occurs {n} times in `{}`; include more surrounding text so it is unique",
                self.path
            ))),
        }
    }
}
