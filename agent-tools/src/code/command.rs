//! Running programs for tools and the completion gate: no shell, only programs on
//! an allowlist, in the workspace, in their own process group, with stdout and
//! stderr capped. The whole group is killed when the program ends (stragglers
//! it left in the background), on a timeout, when the call is cancelled, and —
//! through the launcher's lifeline ([`crate::confine`]) — when the process that
//! started it dies, even by SIGKILL.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agent_core::tool::{ToolContext, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::confine::ChildPolicy;

/// Bytes of stdout and of stderr kept; the rest is counted and dropped.
pub const OUTPUT_CAP: usize = 16 * 1024;

/// Timeout of a command when the call sets none.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// Longest timeout a call may ask for.
pub const MAX_COMMAND_TIMEOUT: Duration = Duration::from_secs(1800);

/// What a finished (or killed) program left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The exit code; `None` when it was killed or died by a signal.
    pub exit_code: Option<i32>,
    /// Captured stdout (capped).
    pub stdout: String,
    /// Captured stderr (capped).
    pub stderr: String,
    /// Whether the timeout killed it.
    pub timed_out: bool,
}

impl CommandOutput {
    /// Whether the program ran to the end and exited 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// The observation text: exit code, stdout and stderr as JSON.
    pub fn to_json(&self) -> Value {
        json!({"exit_code": self.exit_code, "timed_out": self.timed_out, "stdout": self.stdout, "stderr": self.stderr})
    }
}

/// Reads a stream to its end, keeping the first [`OUTPUT_CAP`] bytes.
async fn capped(mut stream: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut kept = Vec::new();
    let mut dropped = 0usize;
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(buffer.get(..read.min(room)).unwrap_or_default());
                dropped += read.saturating_sub(room);
            }
        }
    }
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    if dropped > 0 {
        text.push_str(&format!("\n[{dropped} more bytes not shown]"));
    }
    text
}

/// Runs `program args…` in `dir` as `policy` starts children (scrubbed
/// environment, confined where it can be), killing its process group after
/// `timeout`.
pub async fn run_program(
    program: &str,
    args: &[String],
    dir: &Path,
    timeout: Duration,
    policy: &ChildPolicy,
) -> Result<CommandOutput, ToolError> {
    // Through a launcher, stdin is the lifeline: held here until the group is
    // killed, closed by the kernel if this process dies first.
    let stdin = if policy.has_launcher() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = policy
        .command(program, args, dir, true)
        .map_err(ToolError::failed)?
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| ToolError::failed(format!("cannot start `{program}`: {err}")))?;
    let mut group = GroupKill(
        child
            .id()
            .and_then(|pid| rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)),
    );
    let lifeline = child.stdin.take();
    let stdout = tokio::spawn(capped(
        child
            .stdout
            .take()
            .ok_or_else(|| ToolError::Internal("no stdout pipe".into()))?,
    ));
    let stderr = tokio::spawn(capped(
        child
            .stderr
            .take()
            .ok_or_else(|| ToolError::Internal("no stderr pipe".into()))?,
    ));
    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => (status.ok(), false),
        Err(_) => {
            group.kill();
            (child.wait().await.ok(), true)
        }
    };
    // What the program left running in its group would hold its output pipes
    // open and could act later: it ends with the program.
    group.kill();
    drop(lifeline);
    let stdout = stdout.await.unwrap_or_default();
    let stderr = stderr.await.unwrap_or_default();
    Ok(CommandOutput {
        exit_code: if timed_out {
            None
        } else {
            status.and_then(|s| s.code())
        },
        stdout,
        stderr,
        timed_out,
    })
}

/// A program's process group, killed once: when asked to, or when this is
/// dropped first (a cancelled call).
struct GroupKill(Option<rustix::process::Pid>);

impl GroupKill {
    fn kill(&mut self) {
        if let Some(group) = self.0.take() {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The programs `run_command` may start (`--allow-cmd`).
#[derive(Debug, Clone, Default)]
pub struct CommandPolicy {
    /// Program names (or paths) that may run.
    pub allowed: Vec<String>,
    /// How they are started: their environment and confinement.
    pub child: ChildPolicy,
}

/// Runs a program (no shell) in the workspace and returns its exit code, stdout and stderr. Only allowed programs can run.
#[derive(Debug, Clone, Deserialize, JsonSchema, crate::Derive)]
#[serde(deny_unknown_fields)]
#[tool(
    crate = "crate",
    state = CommandPolicy,
    output = "JSON with exit_code, timed_out, stdout and stderr (each capped at 16 KiB)",
    errors = "a program that is not allowed or cannot start"
)]
pub struct RunCommand {
    /// The program, for example `cargo`.
    pub program: String,
    /// Its arguments, one per element.
    #[serde(default)]
    pub args: Vec<String>,
    /// Kill it after this many seconds (default 120, at most 1800).
    #[schemars(range(min = 0.001, max = 1800.0))]
    pub timeout_secs: Option<f64>,
}

impl RunCommand {
    async fn run(self, ctx: &ToolContext, policy: &CommandPolicy) -> Result<String, ToolError> {
        if !policy.allowed.contains(&self.program) {
            let allowed = if policy.allowed.is_empty() {
                "none; start the run with --allow-cmd".to_owned()
            } else {
                policy.allowed.join(", ")
            };
            return Err(ToolError::failed(format!(
                "program `{}` is not allowed; allowed programs: {allowed}",
                self.program
            )));
        }
        let timeout = match self.timeout_secs {
            Some(secs) => Duration::try_from_secs_f64(secs)
                .ok()
                .filter(|limit| *limit > Duration::ZERO && *limit <= MAX_COMMAND_TIMEOUT)
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!(
                        "field `timeout_secs`: {secs} is out of range"
                    ))
                })?,
            None => DEFAULT_COMMAND_TIMEOUT,
        };
        let output = run_program(
            &self.program,
            &self.args,
            &ctx.workspace,
            timeout,
            &policy.child,
        )
        .await?;
        if output.timed_out {
            return Err(ToolError::failed(format!(
                "timed out after {}s; the process group was killed. {}",
                timeout.as_secs_f64(),
                output.to_json()
            )));
        }
        Ok(output.to_json().to_string())
    }
}
