//! Confinement of file paths to the workspace root: `..` that climbs out, absolute
//! paths elsewhere and symlinks that point out are refused, also for files that do
//! not exist yet; so are NUL bytes and paths longer than the system allows. The
//! file tools then open what they touch beneath a handle on the root
//! ([`Beneath`], cap-std), so a symlink swapped in between the check and the
//! use cannot lead out either, and refuse files with more than one hard link (a
//! link inside may name a file outside).

use std::path::{Component, Path, PathBuf};

use agent_core::tool::ToolError;
use cap_std::fs::{Dir, MetadataExt};

/// The longest path the tools accept, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// A path of the workspace, ready to be opened beneath the workspace's root:
/// every operation through [`Beneath::dir`] on [`Beneath::relative`] fails
/// rather than leave the root, whatever changes on disk after the check.
#[derive(Debug)]
pub struct Beneath {
    /// The workspace root, opened.
    pub dir: Dir,
    /// The path, relative to the root and free of `..`.
    pub relative: PathBuf,
    requested: String,
}

impl Beneath {
    /// Checks `requested` as [`resolve_in_workspace`] does and opens the root.
    pub fn new(root: &Path, requested: &str) -> Result<Self, ToolError> {
        let resolved = resolve_in_workspace(root, requested)?;
        let root = root
            .canonicalize()
            .map_err(|err| ToolError::failed(format!("the workspace is not usable: {err}")))?;
        let relative = resolved
            .strip_prefix(&root)
            .map(Path::to_owned)
            .unwrap_or_default();
        let relative = if relative.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            relative
        };
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority()).map_err(|err| {
            ToolError::failed(format!(
                "the workspace `{}` cannot be opened: {err}",
                root.display()
            ))
        })?;
        Ok(Self {
            dir,
            relative,
            requested: requested.to_owned(),
        })
    }

    /// Refuses a regular file with more than one hard link: another name of it
    /// may be outside the workspace. A missing file passes.
    pub fn refuse_hard_links(&self) -> Result<(), ToolError> {
        match self.dir.symlink_metadata(&self.relative) {
            Ok(meta) if meta.is_file() && meta.nlink() > 1 => Err(ToolError::failed(format!(
                "path `{}` is refused: the file has {} hard links, and another of its names may be outside the workspace",
                self.requested,
                meta.nlink()
            ))),
            _ => Ok(()),
        }
    }

    /// The error for a failed `action` on this path; an attempt to leave the
    /// root (a symlink swapped in after the check) says so.
    pub fn io_error(&self, action: &str, err: &std::io::Error) -> ToolError {
        if err.kind() == std::io::ErrorKind::PermissionDenied && err.to_string().contains("outside")
        {
            return ToolError::failed(format!(
                "path `{}` is refused: it leads outside the workspace",
                self.requested
            ));
        }
        ToolError::failed(format!("cannot {action} `{}`: {err}", self.requested))
    }
}

/// Resolves `requested` (relative to `root`, or absolute inside it) to a path that
/// stays inside `root` once every symlink is followed.
pub fn resolve_in_workspace(root: &Path, requested: &str) -> Result<PathBuf, ToolError> {
    if requested.trim().is_empty() {
        return Err(ToolError::InvalidArguments("`path` is empty".into()));
    }
    if requested.contains('\0') {
        return Err(ToolError::InvalidArguments(
            "`path` contains a NUL byte, which no file name can hold".into(),
        ));
    }
    if requested.len() > MAX_PATH_BYTES {
        return Err(ToolError::InvalidArguments(format!(
            "`path` has {} bytes, more than the {MAX_PATH_BYTES} a path may have",
            requested.len()
        )));
    }
    let refuse = |why: &str| {
        ToolError::failed(format!(
            "path `{requested}` is refused: {why}; use a path inside the workspace"
        ))
    };
    let root = root.canonicalize().map_err(|err| {
        ToolError::failed(format!(
            "the workspace `{}` is not usable: {err}",
            root.display()
        ))
    })?;
    let requested_path = Path::new(requested);
    let relative = if requested_path.is_absolute() {
        requested_path
            .strip_prefix(&root)
            .map_err(|_| refuse("it is an absolute path outside the workspace"))?
            .to_owned()
    } else {
        requested_path.to_owned()
    };
    let mut inside = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => inside.push(part.to_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                if inside.pop().is_none() {
                    return Err(refuse("`..` leaves the workspace"));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(refuse("it is not a relative path"));
            }
        }
    }
    let mut existing = root.clone();
    let mut rest = inside.into_iter().peekable();
    while let Some(part) = rest.peek() {
        let next = existing.join(part);
        if next.symlink_metadata().is_err() {
            break;
        }
        existing = next
            .canonicalize()
            .map_err(|_| refuse("it goes through a symlink that points nowhere"))?;
        if !existing.starts_with(&root) {
            return Err(refuse("a symlink in it points outside the workspace"));
        }
        rest.next();
    }
    Ok(rest.fold(existing, |path, part| path.join(part)))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Root(PathBuf);

    impl Root {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("ws-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("ws/sub")).unwrap();
            std::fs::write(dir.join("outside.txt"), "secret").unwrap();
            Self(dir)
        }

        fn ws(&self) -> PathBuf {
            self.0.join("ws").canonicalize().unwrap()
        }
    }

    impl Drop for Root {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn refused(root: &Path, path: &str) -> String {
        match resolve_in_workspace(root, path) {
            Err(ToolError::Failed { message, .. }) => message,
            other => panic!("{path}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn paths_inside_resolve_also_when_they_do_not_exist() {
        let root = Root::new("inside");
        let ws = root.ws();
        assert_eq!(
            resolve_in_workspace(&ws, "sub/new.txt").unwrap(),
            ws.join("sub/new.txt")
        );
        assert_eq!(
            resolve_in_workspace(&ws, "./a/../b.txt").unwrap(),
            ws.join("b.txt")
        );
        let absolute = ws.join("sub/x").display().to_string();
        assert_eq!(
            resolve_in_workspace(&ws, &absolute).unwrap(),
            ws.join("sub/x")
        );
    }

    #[test]
    fn climbing_out_and_absolute_paths_elsewhere_are_refused() {
        let root = Root::new("escape");
        let ws = root.ws();
        assert!(refused(&ws, "../outside.txt").contains("`..` leaves the workspace"));
        assert!(refused(&ws, "sub/../../outside.txt").contains("`..`"));
        assert!(refused(&ws, "../../etc/passwd").contains("`..`"));
        assert!(refused(&ws, "/etc/passwd").contains("absolute path outside"));
        assert!(matches!(
            resolve_in_workspace(&ws, ""),
            Err(ToolError::InvalidArguments(_))
        ));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_that_point_out_are_refused_also_for_new_files() {
        let root = Root::new("symlink");
        let ws = root.ws();
        std::os::unix::fs::symlink(root.0.join("outside.txt"), ws.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(&root.0, ws.join("up")).unwrap();
        std::os::unix::fs::symlink(ws.join("sub"), ws.join("inner")).unwrap();
        assert!(refused(&ws, "link.txt").contains("symlink"));
        assert!(refused(&ws, "up/new-file.txt").contains("symlink"));
        assert_eq!(
            resolve_in_workspace(&ws, "inner/f").unwrap(),
            ws.join("sub/f")
        );
    }
}
