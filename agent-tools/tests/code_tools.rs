//! The code-agent tools inside a workspace: what they do, and that no path escapes
//! the root — `..`, absolute paths elsewhere, symlinks pointing out, also for files
//! that do not exist yet.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::tool::{Tool, ToolContext, ToolError};
use agent_tools::Typed;
use agent_tools::code::{
    CommandPolicy, EditFile, ListDir, ReadFile, RunCommand, Search, WriteFile,
};
use serde_json::{Value, json};

fn run_command(allowed: Vec<String>) -> Typed<RunCommand> {
    Typed::with_state(CommandPolicy {
        allowed,
        ..CommandPolicy::default()
    })
}

struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!("code-tools-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("ws/src")).unwrap();
        std::fs::write(root.join("secret.txt"), "TOP SECRET").unwrap();
        std::fs::write(
            root.join("ws/src/lib.rs"),
            "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
        )
        .unwrap();
        Self { root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws").canonicalize().unwrap()
    }

    fn ctx(&self) -> ToolContext {
        ToolContext::new("s", "c", Arc::from(self.ws().as_path()))
    }

    async fn call(&self, tool: &dyn Tool, args: Value) -> Result<String, ToolError> {
        tool.call(args, &self.ctx())
            .await
            .map(|output| output.content)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn refused(result: Result<String, ToolError>) -> String {
    match result {
        Err(ToolError::Failed { message, .. }) if message.contains("refused") => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn no_tool_reaches_outside_the_workspace() {
    let sandbox = Sandbox::new("escape");
    let ws = sandbox.ws();
    std::os::unix::fs::symlink(sandbox.root.join("secret.txt"), ws.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&sandbox.root, ws.join("up")).unwrap();
    let outside = sandbox.root.join("secret.txt").display().to_string();
    for path in [
        "../secret.txt",
        "../../etc/passwd",
        "/etc/passwd",
        outside.as_str(),
        "link.txt",
        "src/../../secret.txt",
        "up/secret.txt",
    ] {
        refused(
            sandbox
                .call(&Typed::<ReadFile>::new(), json!({"path": path}))
                .await,
        );
        refused(
            sandbox
                .call(
                    &Typed::<WriteFile>::new(),
                    json!({"path": path, "content": "x"}),
                )
                .await,
        );
        refused(
            sandbox
                .call(
                    &Typed::<EditFile>::new(),
                    json!({"path": path, "old": "TOP", "new": "x"}),
                )
                .await,
        );
    }
    for path in ["..", "/", "up"] {
        refused(
            sandbox
                .call(&Typed::<ListDir>::new(), json!({"path": path}))
                .await,
        );
        refused(
            sandbox
                .call(
                    &Typed::<Search>::new(),
                    json!({"pattern": "SECRET", "path": path}),
                )
                .await,
        );
    }
    refused(
        sandbox
            .call(
                &Typed::<WriteFile>::new(),
                json!({"path": "up/new-file.txt", "content": "x"}),
            )
            .await,
    );
    refused(
        sandbox
            .call(
                &Typed::<WriteFile>::new(),
                json!({"path": "../new-file.txt", "content": "x"}),
            )
            .await,
    );
    assert!(!sandbox.root.join("new-file.txt").exists());
    assert_eq!(
        std::fs::read_to_string(sandbox.root.join("secret.txt")).unwrap(),
        "TOP SECRET"
    );
    let found = sandbox
        .call(&Typed::<Search>::new(), json!({"pattern": "SECRET"}))
        .await
        .unwrap();
    assert!(
        found.starts_with("no match"),
        "search does not follow the symlinks out: {found}"
    );
}

#[tokio::test]
async fn read_list_write_and_edit_inside_the_workspace() {
    let sandbox = Sandbox::new("files");
    let text = sandbox
        .call(
            &Typed::<ReadFile>::new(),
            json!({"path": "src/lib.rs", "start_line": 2, "end_line": 2}),
        )
        .await
        .unwrap();
    assert_eq!(text, "    a - b");
    assert!(matches!(
        sandbox
            .call(
                &Typed::<ReadFile>::new(),
                json!({"path": "src/lib.rs", "start_line": 9})
            )
            .await,
        Err(ToolError::InvalidArguments(_))
    ));
    assert!(
        sandbox
            .call(&Typed::<ReadFile>::new(), json!({"path": "missing.rs"}))
            .await
            .is_err()
    );
    std::fs::write(sandbox.ws().join("big.txt"), vec![b'x'; 2 * 1024 * 1024]).unwrap();
    assert!(
        sandbox
            .call(&Typed::<ReadFile>::new(), json!({"path": "big.txt"}))
            .await
            .unwrap_err()
            .to_string()
            .contains("more than")
    );

    sandbox
        .call(
            &Typed::<WriteFile>::new(),
            json!({"path": "notes/today.md", "content": "one\ntwo\n"}),
        )
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(sandbox.ws().join("notes/today.md")).unwrap(),
        "one\ntwo\n"
    );
    let listing = sandbox
        .call(&Typed::<ListDir>::new(), json!({"path": "."}))
        .await
        .unwrap();
    assert_eq!(listing, "big.txt\nnotes/\nsrc/");

    sandbox
        .call(
            &Typed::<EditFile>::new(),
            json!({"path": "src/lib.rs", "old": "a - b", "new": "a + b"}),
        )
        .await
        .unwrap();
    assert!(
        std::fs::read_to_string(sandbox.ws().join("src/lib.rs"))
            .unwrap()
            .contains("a + b")
    );
    let missing = sandbox
        .call(
            &Typed::<EditFile>::new(),
            json!({"path": "src/lib.rs", "old": "a * b", "new": "x"}),
        )
        .await
        .unwrap_err();
    assert!(missing.to_string().contains("does not occur"), "{missing}");
    let ambiguous = sandbox
        .call(
            &Typed::<EditFile>::new(),
            json!({"path": "notes/today.md", "old": "o", "new": "0"}),
        )
        .await
        .unwrap_err();
    assert!(
        ambiguous.to_string().contains("occurs 2 times"),
        "{ambiguous}"
    );
}

#[tokio::test]
async fn search_respects_gitignore_outside_a_git_repository() {
    let sandbox = Sandbox::new("search");
    let ws = sandbox.ws();
    assert!(!ws.join(".git").exists());
    std::fs::write(ws.join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(ws.join("target")).unwrap();
    std::fs::write(ws.join("target/generated.rs"), "fn add() {}\n").unwrap();
    let found = sandbox
        .call(&Typed::<Search>::new(), json!({"pattern": r"fn add\("}))
        .await
        .unwrap();
    assert_eq!(found, "src/lib.rs:1: pub fn add(a: i32, b: i32) -> i32 {");
    assert!(matches!(
        sandbox
            .call(&Typed::<Search>::new(), json!({"pattern": "("}))
            .await,
        Err(ToolError::InvalidArguments(_))
    ));
}

#[tokio::test]
async fn run_command_needs_the_allowlist_and_reports_exit_code_and_output() {
    let sandbox = Sandbox::new("command");
    let denied = sandbox
        .call(&run_command(vec![]), json!({"program": "ls"}))
        .await
        .unwrap_err();
    assert!(denied.to_string().contains("not allowed"), "{denied}");
    let tool = run_command(vec!["sh".into(), "ls".into()]);
    let output: Value = serde_json::from_str(
        &sandbox
            .call(
                &tool,
                json!({"program": "sh", "args": ["-c", "echo out; echo err >&2; exit 3"]}),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        output,
        json!({"exit_code": 3, "timed_out": false, "stdout": "out\n", "stderr": "err\n"})
    );
    let listed: Value =
        serde_json::from_str(&sandbox.call(&tool, json!({"program": "ls"})).await.unwrap())
            .unwrap();
    assert_eq!(listed["stdout"], "src\n", "it runs in the workspace");
    let big: Value = serde_json::from_str(
        &sandbox
            .call(
                &tool,
                json!({"program": "sh", "args": ["-c", "head -c 100000 /dev/zero | tr '\\0' a"]}),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(
        big["stdout"]
            .as_str()
            .unwrap()
            .ends_with("more bytes not shown]")
    );
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let sandbox = Sandbox::new("timeout");
    let tool = run_command(vec!["sh".into()]);
    let started = Instant::now();
    let err = sandbox
        .call(&tool, json!({"program": "sh", "args": ["-c", "sleep 60 & echo $! > child.pid; wait"], "timeout_secs": 0.5}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("timed out after 0.5s"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let pid = std::fs::read_to_string(sandbox.ws().join("child.pid")).unwrap();
    let proc_dir = Path::new("/proc").join(pid.trim());
    let gone = (0..100).any(|_| {
        let dead = std::fs::read_to_string(proc_dir.join("stat"))
            .map(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if !dead {
            std::thread::sleep(Duration::from_millis(20));
        }
        dead
    });
    assert!(gone, "the grandchild `sleep 60` was killed with its group");
}

/// Whether process `pid` is alive (a zombie counts as gone).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, rest) = stat.rsplit_once(')')?;
            Some(!rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

async fn background_pid(file: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "the program never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_cancelled_call_kills_the_programs_whole_group() {
    let sandbox = Sandbox::new("cancel-group");
    let pid_file = sandbox.root.join("ws/pid");
    let tool = Arc::new(run_command(vec!["sh".into()]));
    let ctx = ToolContext::new("s", "c", Arc::from(sandbox.root.join("ws").as_path()));
    let call = tokio::spawn(async move {
        tool.call(
            json!({"program": "sh", "args": ["-c", "sleep 30 & echo $! > pid; wait"]}),
            &ctx,
        )
        .await
    });
    let pid = background_pid(&pid_file).await;
    assert!(alive(pid));
    call.abort();
    let _ = call.await;
    let deadline = Instant::now() + Duration::from_secs(1);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "the program's child outlived the call"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn what_a_program_leaves_running_ends_with_it() {
    let sandbox = Sandbox::new("stragglers");
    let pid_file = sandbox.root.join("ws/pid");
    let ctx = ToolContext::new("s", "c", Arc::from(sandbox.root.join("ws").as_path()));
    let started = Instant::now();
    let output = run_command(vec!["sh".into()])
        .call(
            json!({"program": "sh", "args": ["-c", "sleep 30 & echo $! > pid; echo done"]}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(output.content.contains("done"), "{}", output.content);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the call waited for the program's child"
    );
    let pid = background_pid(&pid_file).await;
    assert!(!alive(pid), "the background child outlived the call");
}
