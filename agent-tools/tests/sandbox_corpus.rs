//! The sandbox corpus: every file tool against paths that try to leave the
//! workspace — `..`, absolute paths, `/proc/self/root`, symlinks to files and to
//! parents, hard links, NUL bytes, paths too long, Unicode look-alikes — and a
//! symlink swapped in while the tools run. A secret outside must never be read,
//! written or created next to.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_core::tool::{Tool, ToolContext};
use agent_tools::code::{EditFile, ListDir, ReadFile, WriteFile};
use agent_tools::{AppendLine, Typed};
use serde_json::{Value, json};

const SECRET: &str = "SECRET-0451";

struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!("corpus-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("ws/sub")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/secret.txt"), SECRET).unwrap();
        std::fs::write(root.join("ws/sub/own.txt"), "mine").unwrap();
        let ws = root.join("ws");
        std::os::unix::fs::symlink(root.join("outside/secret.txt"), ws.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("outside"), ws.join("dirlink")).unwrap();
        std::os::unix::fs::symlink("../outside", ws.join("relative_dirlink")).unwrap();
        std::fs::hard_link(root.join("outside/secret.txt"), ws.join("hard")).unwrap();
        Self { root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    fn outside(&self) -> PathBuf {
        self.root.join("outside")
    }

    /// The outside directory is as it was: the secret alone, unchanged.
    fn assert_outside_untouched(&self, case: &str) {
        let names: Vec<String> = std::fs::read_dir(self.outside())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["secret.txt"],
            "{case}: something was created outside"
        );
        assert_eq!(
            std::fs::read_to_string(self.outside().join("secret.txt")).unwrap(),
            SECRET,
            "{case}: the secret was changed"
        );
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn ctx(ws: &Path) -> ToolContext {
    ToolContext::new("s", "c", Arc::from(ws))
}

/// A tool's name, the tool, and its arguments for a path.
type FileTool = (&'static str, Box<dyn Tool>, fn(&str) -> Value);

fn tools() -> Vec<FileTool> {
    vec![
        (
            "read_file",
            Box::new(Typed::<ReadFile>::new()),
            |p| json!({"path": p}),
        ),
        (
            "list_dir",
            Box::new(Typed::<ListDir>::new()),
            |p| json!({"path": p}),
        ),
        (
            "write_file",
            Box::new(Typed::<WriteFile>::new()),
            |p| json!({"path": p, "content": "pwned"}),
        ),
        (
            "edit_file",
            Box::new(Typed::<EditFile>::new()),
            |p| json!({"path": p, "old": SECRET, "new": "pwned"}),
        ),
        (
            "append_line",
            Box::new(Typed::<AppendLine>::new()),
            |p| json!({"path": p, "line": "pwned"}),
        ),
    ]
}

/// Paths that try to leave the workspace `ws` next to `outside`.
fn hostile_paths(ws: &Path, outside: &Path) -> Vec<String> {
    let secret = outside.join("secret.txt").display().to_string();
    vec![
        "../outside/secret.txt".into(),
        "sub/../../outside/secret.txt".into(),
        "./../outside".into(),
        "..".into(),
        secret.clone(),
        outside.display().to_string(),
        format!("/proc/self/root{secret}"),
        format!("{}/../outside/secret.txt", ws.display()),
        "/etc/passwd".into(),
        "link".into(),
        "dirlink".into(),
        "dirlink/secret.txt".into(),
        "dirlink/new.txt".into(),
        "relative_dirlink/secret.txt".into(),
        "relative_dirlink/new.txt".into(),
        "sub/../dirlink/secret.txt".into(),
        "hard".into(),
        "a\0/../../outside/secret.txt".into(),
        "sub/\0".into(),
        "a/".repeat(3000),
        "x".repeat(300),
        format!("{}/secret.txt", "\u{ff0e}\u{ff0e}"),
        "\u{2024}\u{2024}/outside/secret.txt".into(),
        "sub/\u{2215}..\u{2215}..\u{2215}outside".into(),
        "~/secret.txt".into(),
        "$HOME/x".into(),
    ]
}

#[tokio::test]
async fn no_hostile_path_reads_writes_or_creates_outside() {
    let sandbox = Sandbox::new("paths");
    let ws = sandbox.ws();
    let mut cases = 0;
    for path in hostile_paths(&ws, &sandbox.outside()) {
        for (name, tool, args) in tools() {
            cases += 1;
            let case = format!("{name} {:?}", path.chars().take(60).collect::<String>());
            let result = tool.call(args(&path), &ctx(&ws)).await;
            if let Ok(output) = &result {
                assert!(!output.content.contains(SECRET), "{case} read the secret");
            }
            sandbox.assert_outside_untouched(&case);
        }
    }
    assert!(cases >= 100, "the corpus has {cases} cases");
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/own.txt")).unwrap(),
        "mine"
    );
}

/// A symlink swapped in for a checked directory between the check and the use
/// must not lead the tool out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_in_between_check_and_use_does_not_lead_out() {
    let sandbox = Sandbox::new("swap");
    let ws = sandbox.ws();
    let swapping = Arc::new(AtomicBool::new(true));
    let swapper = {
        let (ws, outside, swapping) = (ws.clone(), sandbox.outside(), Arc::clone(&swapping));
        std::thread::spawn(move || {
            let target = ws.join("flip");
            while swapping.load(Ordering::Relaxed) {
                let _ = std::fs::create_dir(&target);
                std::thread::yield_now();
                let _ = std::fs::remove_dir_all(&target);
                let _ = std::os::unix::fs::symlink(&outside, &target);
                std::thread::yield_now();
                let _ = std::fs::remove_file(&target);
            }
        })
    };
    let write = Typed::<WriteFile>::new();
    let read = Typed::<ReadFile>::new();
    let append = Typed::<AppendLine>::new();
    for _ in 0..400 {
        let _ = write
            .call(
                json!({"path": "flip/new.txt", "content": "pwned"}),
                &ctx(&ws),
            )
            .await;
        let _ = append
            .call(json!({"path": "flip/new.txt", "line": "pwned"}), &ctx(&ws))
            .await;
        if let Ok(output) = read
            .call(json!({"path": "flip/secret.txt"}), &ctx(&ws))
            .await
        {
            assert!(
                !output.content.contains(SECRET),
                "read the secret through a swap"
            );
        }
    }
    swapping.store(false, Ordering::Relaxed);
    swapper.join().unwrap();
    sandbox.assert_outside_untouched("swap");
}
