//! A small tmpfs, for what a full disk does to a store: mounted at a
//! directory, unmounted when dropped. Mounting needs root: on a developer's
//! machine a test without it skips; in CI (`CI` set), which runs as root, it
//! fails instead.

#![allow(clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs; unmounted (lazily, so open files do not stop it) when dropped.
#[derive(Debug)]
pub struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (as `mount` takes it: `600k`, `48m`) at `dir`,
    /// creating the directory.
    pub fn mount(dir: &Path, size: &str) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()?;
        if !mounted.success() {
            return Err(std::io::Error::other(format!(
                "cannot mount a tmpfs at {} (it needs root)",
                dir.display()
            )));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// [`SmallDisk::mount`] for a test: `None` (after saying so) where this is
    /// not root and not CI.
    pub fn for_test(dir: &Path, size: &str) -> Option<Self> {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0");
        if !root {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root to mount a tmpfs"
            );
            eprintln!("skipped: mounting a small tmpfs needs root");
            return None;
        }
        match Self::mount(dir, size) {
            Ok(disk) => Some(disk),
            Err(err) => panic!("{err}"),
        }
    }

    /// Where it is mounted.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}
