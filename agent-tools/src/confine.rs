//! What a program the agent starts may see and touch. Every child — a
//! `run_command` program, the `--finish-when` check, an MCP server — gets a
//! scrubbed environment: `PATH` (absolute entries only), `HOME`, `LANG`, a
//! private `TMPDIR`, and the variables `--pass-env` names; never an API key or a
//! store URL it was not given. `run_command` programs and the completion check
//! are also confined with Landlock when a launcher is set: they may read
//! anywhere, but write only under the workspace, their private temp directory
//! and `/dev/null`. MCP servers are not confined (they are the user's own
//! programs, which keep caches of their own).
//!
//! Landlock applies to the process that asks for it, so a confined child is
//! started through a launcher: a binary whose `main` first calls
//! [`exec_confined_if_asked`], which confines itself and then executes the
//! program (no `unsafe` between fork and exec). The `agent` binary is one.
//!
//! The launcher also ties the program's life to the process that started it:
//! asked for a `--lifeline`, it starts the program as its child in its own
//! process group, and its standard input is a pipe whose only writer is the
//! starting process. When that process ends — returns, is cancelled, or is
//! killed with SIGKILL, when the kernel closes the pipe for it — the launcher
//! reads end-of-file and kills the whole group, the program's own children
//! included. So no program a tool started outlives the worker that started it,
//! and no effect of it lands after the session recorded its outcome as unknown.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use landlock::{
    ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    path_beneath_rules,
};

/// The first argument that makes a launcher confine itself and run a program:
/// `LAUNCHER --agent-confined-exec [--write DIR]… [--lifeline] [--probe] -- PROGRAM ARGS…`.
pub const CONFINED_EXEC: &str = "--agent-confined-exec";

/// The launcher argument that makes its standard input the program's lifeline
/// (see the module documentation); the launcher must lead its process group.
pub const LIFELINE: &str = "--lifeline";

/// Exit code of a launcher whose confinement could not be set up.
const CANNOT_CONFINE: i32 = 125;
/// Exit code of a launcher that could not execute the program.
const CANNOT_EXEC: i32 = 127;
/// Exit code of `--probe` when the kernel enforces nothing.
const NOT_ENFORCED: i32 = 3;

/// Whether children are confined, for the start-up notice and the session record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Children run under Landlock.
    Landlock,
    /// Children run with a scrubbed environment only; says why.
    Unconfined(String),
}

impl Confinement {
    /// How the session records it: `landlock`, or `none: <why>`.
    pub fn record(&self) -> String {
        match self {
            Self::Landlock => "landlock".into(),
            Self::Unconfined(why) => format!("none: {why}"),
        }
    }
}

/// How children are started; shared by every tool of a session.
#[derive(Debug, Clone, Default)]
pub struct ChildPolicy {
    inner: Arc<PolicyInner>,
}

#[derive(Debug, Default)]
struct PolicyInner {
    pass_env: Vec<String>,
    launcher: Option<PathBuf>,
    /// Whether children get a private temp directory.
    private_temp: bool,
    /// That directory, created when the first child starts.
    temp_dir: OnceLock<PrivateTemp>,
}

/// A temp directory only this process's children use, removed with the policy.
#[derive(Debug)]
struct PrivateTemp(PathBuf);

impl Drop for PrivateTemp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl ChildPolicy {
    /// A policy that passes the variables named in `pass_env` besides the
    /// defaults, and confines through this process's launcher, if it is one
    /// (see [`exec_confined_if_asked`]).
    /// Its private temp directory is created when the first child starts.
    pub fn new(pass_env: Vec<String>) -> Self {
        Self {
            inner: Arc::new(PolicyInner {
                pass_env,
                launcher: LAUNCHER.get().cloned(),
                private_temp: true,
                temp_dir: OnceLock::new(),
            }),
        }
    }

    /// The children's private temp directory, created on first use.
    fn temp_dir(&self) -> Result<Option<&Path>, String> {
        if !self.inner.private_temp {
            return Ok(None);
        }
        if let Some(dir) = self.inner.temp_dir.get() {
            return Ok(Some(&dir.0));
        }
        let created = private_temp_dir()?;
        // Another thread may have created one first; this one is then removed.
        let dir = self.inner.temp_dir.get_or_init(|| created);
        Ok(Some(&dir.0))
    }

    /// Whether confined children really are confined here: asks the launcher to
    /// confine itself and report. Call it once, at start.
    pub fn probe(&self) -> Confinement {
        let Some(launcher) = &self.inner.launcher else {
            return Confinement::Unconfined(
                "no confining launcher is set (library use without `exec_confined_if_asked`)"
                    .into(),
            );
        };
        match std::process::Command::new(launcher)
            .args([CONFINED_EXEC, "--probe"])
            .env_clear()
            .output()
        {
            Ok(output) if output.status.success() => Confinement::Landlock,
            Ok(output) => {
                Confinement::Unconfined(String::from_utf8_lossy(&output.stderr).trim().to_owned())
            }
            Err(err) => Confinement::Unconfined(format!(
                "the launcher `{}` cannot start: {err}",
                launcher.display()
            )),
        }
    }

    /// Whether confined commands go through a launcher, which then also ties
    /// their programs' lives to this process (see the module documentation).
    pub fn has_launcher(&self) -> bool {
        self.inner.launcher.is_some()
    }

    /// A command for `program args…` in `workspace` with the scrubbed
    /// environment; `confined` runs it through the launcher under Landlock, with
    /// its standard input as the program's lifeline: the caller must start it
    /// in a process group of its own with a piped stdin, and hold that pipe for
    /// as long as the program may live. Fails only when the private temp
    /// directory cannot be created.
    pub fn command(
        &self,
        program: &str,
        args: &[String],
        workspace: &Path,
        confined: bool,
    ) -> Result<tokio::process::Command, String> {
        let temp = self.temp_dir()?;
        let launcher = self.inner.launcher.as_ref().filter(|_| confined);
        tracing::debug!(program, confined = launcher.is_some(), "starting a program");
        let mut command = match launcher {
            Some(launcher) => {
                let mut command = tokio::process::Command::new(launcher);
                command.arg(CONFINED_EXEC).arg("--write").arg(workspace);
                if let Some(temp) = temp {
                    command.arg("--write").arg(temp);
                }
                command.arg(LIFELINE).arg("--").arg(program).args(args);
                command
            }
            None => {
                let mut command = tokio::process::Command::new(program);
                command.args(args);
                command
            }
        };
        command.current_dir(workspace).env_clear();
        for (name, value) in self.environment(temp) {
            command.env(name, value);
        }
        Ok(command)
    }

    /// The environment a child gets, with `temp` as its `TMPDIR`.
    fn environment(&self, temp: Option<&Path>) -> Vec<(OsString, OsString)> {
        let mut vars = Vec::new();
        let path = std::env::var_os("PATH").map(|path| {
            let absolute: Vec<PathBuf> = std::env::split_paths(&path)
                .filter(|entry| entry.is_absolute())
                .collect();
            std::env::join_paths(absolute).unwrap_or_default()
        });
        vars.push((
            "PATH".into(),
            path.unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
        ));
        for name in ["HOME", "LANG"] {
            if let Some(value) = std::env::var_os(name) {
                vars.push((name.into(), value));
            }
        }
        if let Some(temp) = temp {
            vars.push(("TMPDIR".into(), temp.as_os_str().to_owned()));
        }
        for name in &self.inner.pass_env {
            if let Some(value) = std::env::var_os(name) {
                vars.retain(|(existing, _)| existing != name.as_str());
                vars.push((name.into(), value));
            }
        }
        vars
    }
}

/// A new directory, readable only by this user, for the children's temp files.
/// A name that exists already (left by a killed process whose pid came back) is
/// never reused: another one is tried.
fn private_temp_dir() -> Result<PrivateTemp, String> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let mut last_error = None;
    for _ in 0..100 {
        let dir = std::env::temp_dir().join(format!(
            "agent-children-{}-{}-{}",
            std::process::id(),
            agent_core::event::now_millis(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(PrivateTemp(dir)),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => last_error = Some(err),
            Err(err) => {
                return Err(format!(
                    "cannot create a temp directory for child programs at `{}`: {err}",
                    dir.display()
                ));
            }
        }
    }
    Err(format!(
        "cannot create a temp directory for child programs under `{}`: {}",
        std::env::temp_dir().display(),
        last_error.map_or_else(String::new, |err| err.to_string())
    ))
}

/// The binary that confines children: this one, once its `main` called
/// [`exec_confined_if_asked`].
static LAUNCHER: OnceLock<PathBuf> = OnceLock::new();

/// In a launcher's `main`, before anything else: when the arguments ask for a
/// confined execution, confines this process with Landlock and executes the
/// program in its place (it never returns then); otherwise registers this
/// binary as the launcher of the children this process starts, and returns.
pub fn exec_confined_if_asked() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(CONFINED_EXEC.as_ref()) {
        if let Ok(me) = std::env::current_exe() {
            let _ = LAUNCHER.set(me);
        }
        return;
    }
    let mut writable = Vec::new();
    let mut probe = false;
    let mut lifeline = false;
    let mut program = Vec::new();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--write") => writable.extend(args.next().map(PathBuf::from)),
            Some("--probe") => probe = true,
            Some(LIFELINE) => lifeline = true,
            Some("--") => {
                program.extend(args.by_ref());
                break;
            }
            _ => {
                eprintln!("agent: unknown launcher argument {arg:?}");
                std::process::exit(CANNOT_CONFINE);
            }
        }
    }
    let enforced = match confine_self(&writable) {
        Ok(enforced) => enforced,
        Err(err) => {
            eprintln!("agent: cannot confine the program: {err}");
            std::process::exit(CANNOT_CONFINE);
        }
    };
    if probe {
        if !enforced {
            eprintln!("this kernel does not enforce Landlock (it is missing or disabled)");
            std::process::exit(NOT_ENFORCED);
        }
        std::process::exit(0);
    }
    let Some((name, rest)) = program.split_first() else {
        eprintln!("agent: the launcher was given no program");
        std::process::exit(CANNOT_EXEC);
    };
    if lifeline {
        supervise(name, rest);
    }
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(name).args(rest).exec();
    eprintln!("agent: cannot start `{}`: {err}", name.to_string_lossy());
    std::process::exit(CANNOT_EXEC);
}

/// Runs the program as a child and exits as it did; when standard input (the
/// lifeline) reaches its end first, kills the process group — the program, its
/// children and the launcher itself.
fn supervise(name: &std::ffi::OsStr, args: &[OsString]) -> ! {
    use rustix::process::{Signal, getpgrp, getpid};
    let leads_group = getpgrp() == getpid();
    let mut child = match std::process::Command::new(name)
        .args(args)
        .stdin(std::process::Stdio::null())
        .spawn()
    {
        Ok(child) => child,
        Err(err) => {
            eprintln!("agent: cannot start `{}`: {err}", name.to_string_lossy());
            std::process::exit(CANNOT_EXEC);
        }
    };
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        if leads_group {
            let _ = rustix::process::kill_current_process_group(Signal::KILL);
        }
        // Not the leader of a group of its own (started by hand): only the
        // program, then the launcher, are ended.
        if let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
        std::process::exit(CANNOT_EXEC);
    });
    match child.wait() {
        Ok(status) => exit_as(status),
        Err(err) => {
            eprintln!(
                "agent: lost the program `{}`: {err}",
                name.to_string_lossy()
            );
            std::process::exit(CANNOT_EXEC);
        }
    }
}

/// Ends this process as `status` ended its program: with its exit code, or
/// by its signal.
fn exit_as(status: std::process::ExitStatus) -> ! {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    let signal = status.signal().unwrap_or(0);
    if let Some(signal) = rustix::process::Signal::from_named_raw(signal) {
        let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
    }
    std::process::exit(128 + signal);
}

/// Restricts this process: read and execute anywhere, write only beneath
/// `writable` and `/dev/null`. Returns whether the kernel enforces it.
fn confine_self(writable: &[PathBuf]) -> Result<bool, landlock::RulesetError> {
    let abi = ABI::V5;
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))?
        .create()?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))?
        .add_rules(path_beneath_rules(
            ["/dev/null"],
            AccessFs::from_read(abi) | AccessFs::WriteFile,
        ))?
        .restrict_self()?;
    Ok(status.ruleset != RulesetStatus::NotEnforced)
}
