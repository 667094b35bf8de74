//! Black-box tests of a built binary: a [`Scratch`] directory to run it in, the
//! binary run there with a clean environment, and readers of what it printed and
//! wrote. Test helpers: they panic on anything unexpected.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

/// A scratch directory, removed when dropped, in which a binary runs.
pub struct Scratch {
    /// The directory.
    pub dir: PathBuf,
    binary: PathBuf,
}

impl Scratch {
    /// A fresh directory named after `name` for running `binary`.
    pub fn new(binary: impl Into<PathBuf>, name: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "agent-test-{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            dir,
            binary: binary.into(),
        }
    }

    /// A path inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes a script file of model responses and returns its path.
    pub fn script(&self, name: &str, responses: Value) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, serde_json::to_string_pretty(&responses).unwrap()).unwrap();
        path
    }

    /// A `Command` for the binary, run in this directory with a clean environment.
    pub fn command(&self) -> Command {
        self.cleaned(Command::new(&self.binary))
    }

    /// A `Command` for another program (a terminal wrapper, say), run in this
    /// directory with the same clean environment.
    pub fn command_named(&self, program: &str) -> Command {
        self.cleaned(Command::new(program))
    }

    fn cleaned(&self, mut command: Command) -> Command {
        command.current_dir(&self.dir);
        for variable in [
            "RUST_LOG",
            "AGENT_STORE",
            "AGENT_API_TOKENS",
            "AGENT_LOG_FORMAT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ] {
            command.env_remove(variable);
        }
        command
    }

    /// Runs the binary with `args` here and waits for it.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a process printed on stdout.
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// What a process printed on stderr.
pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// The single JSON value on stdout.
pub fn json_stdout(output: &Output) -> Value {
    let text = stdout(output);
    serde_json::from_str(text.trim())
        .unwrap_or_else(|err| panic!("stdout is not one JSON value ({err}): {text}"))
}

/// The lines of a JSONL trace file.
pub fn trace_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The `event_type` of each trace line.
pub fn event_types(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|line| line["event_type"].as_str().unwrap().to_owned())
        .collect()
}

/// Kills `child` with SIGKILL and reaps it.
pub fn kill_hard(child: &mut std::process::Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The calculator task of the README.
pub const CALCULATOR_TASK: &str = "What is 12 times 7, and is it above 80?";

/// The scripted model's answers to the calculator task.
pub fn calculator_script() -> Value {
    serde_json::json!([
        {"type": "tool_call", "tool_name": "calculator",
         "arguments": {"left": 12, "operation": "multiply", "right": 7}},
        {"type": "finish", "answer": "12 times 7 is 84, which is above 80."}
    ])
}

/// Runs the calculator task with the scripted model and the calculator, with
/// `extra` flags and `--json`.
pub fn run_calculator(scratch: &Scratch, extra: &[&str]) -> Output {
    let script = scratch.script("calc.json", calculator_script());
    let model = format!("scripted:{}", script.display());
    let mut args = vec![
        "run",
        CALCULATOR_TASK,
        "--model",
        &model,
        "--tools",
        "calculator",
        "--json",
    ];
    args.extend_from_slice(extra);
    scratch.run(&args)
}
