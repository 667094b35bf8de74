//! `CommandGate`: the completion gate of `--finish-when "<command>"`. The command
//! runs like `run_command` (no shell, in the workspace, a timeout that kills its
//! process group); exit 0 accepts the finish, anything else refuses it with the
//! command's output as feedback.

use std::path::Path;
use std::time::Duration;

use agent_core::gate::{CompletionGate, GateRefusal};
use async_trait::async_trait;

use crate::code::run_program;
use crate::confine::ChildPolicy;

/// Time a completion check may take when none is configured.
pub const DEFAULT_GATE_TIMEOUT: Duration = Duration::from_secs(600);

/// A command line that must succeed before a run may finish.
#[derive(Debug, Clone)]
pub struct CommandGate {
    line: String,
    program: String,
    args: Vec<String>,
    timeout: Duration,
    child: ChildPolicy,
}

impl CommandGate {
    /// Parses `line` like a shell splits words (no shell runs it).
    pub fn new(line: &str, timeout: Duration) -> Result<Self, String> {
        let words = shlex::split(line).ok_or_else(|| format!("`{line}` has an unclosed quote"))?;
        let (program, args) = words
            .split_first()
            .ok_or_else(|| "the completion check is empty".to_owned())?;
        Ok(Self {
            line: line.to_owned(),
            program: program.clone(),
            args: args.to_vec(),
            timeout,
            child: ChildPolicy::default(),
        })
    }

    /// Starts the check as `child` says: its environment and confinement (by
    /// default, a scrubbed environment, unconfined).
    pub fn with_child_policy(mut self, child: ChildPolicy) -> Self {
        self.child = child;
        self
    }
}

#[async_trait]
impl CompletionGate for CommandGate {
    async fn check(&self, _answer: &str, workspace: &Path) -> Result<(), GateRefusal> {
        let output = run_program(
            &self.program,
            &self.args,
            workspace,
            self.timeout,
            &self.child,
        )
        .await
        .map_err(|err| GateRefusal {
            reason: format!("the completion check `{}` could not run", self.line),
            details: err.to_string(),
        })?;
        if output.succeeded() {
            return Ok(());
        }
        let how = match (output.timed_out, output.exit_code) {
            (true, _) => format!("timed out after {}s", self.timeout.as_secs_f64()),
            (false, Some(code)) => format!("failed with exit code {code}"),
            (false, None) => "was killed by a signal".to_owned(),
        };
        Err(GateRefusal {
            reason: format!(
                "your finish was not accepted: the completion check `{}` {how}; fix the problem, then finish again",
                self.line
            ),
            details: format!("stdout:\n{}\nstderr:\n{}", output.stdout, output.stderr),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn success_accepts_and_failure_refuses_with_the_output() {
        let dir = std::env::temp_dir();
        let pass = CommandGate::new("true", DEFAULT_GATE_TIMEOUT).unwrap();
        assert!(pass.check("done", &dir).await.is_ok());
        let fail = CommandGate::new("sh -c 'echo broken; exit 3'", DEFAULT_GATE_TIMEOUT).unwrap();
        let refusal = fail.check("done", &dir).await.unwrap_err();
        assert!(refusal.reason.contains("exit code 3"), "{}", refusal.reason);
        assert!(refusal.details.contains("broken"), "{}", refusal.details);
        let slow = CommandGate::new("sleep 5", Duration::from_millis(100)).unwrap();
        assert!(
            slow.check("done", &dir)
                .await
                .unwrap_err()
                .reason
                .contains("timed out")
        );
        assert!(CommandGate::new("'unclosed", DEFAULT_GATE_TIMEOUT).is_err());
        assert!(CommandGate::new("  ", DEFAULT_GATE_TIMEOUT).is_err());
    }
}
