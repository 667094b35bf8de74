//! Checks that a file is a GGUF model before anything loads it.

use std::path::Path;

/// A model file's first four bytes.
const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// Whether `path` is a readable GGUF file; the error says what to do.
pub fn check_model_file(path: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => format!(
            "the model file {} does not exist; run `agent model pull` to fetch the default model, or name a GGUF file with --model local:PATH.gguf",
            path.display()
        ),
        _ => format!("the model file {} cannot be read: {err}", path.display()),
    })?;
    file.read_exact(&mut magic)
        .ok()
        .filter(|_| &magic == GGUF_MAGIC)
        .ok_or_else(|| {
            format!(
                "{} is not a GGUF model file (it does not start with `GGUF`); run `agent model pull` again or name another file",
                path.display()
            )
        })
}
