//! Safe summaries of text: `chars=N;sha256=HEX`, and the content mode that decides
//! whether a trace writes summaries or full text.

use std::fmt::Write as _;
use std::str::FromStr;

use sha2::{Digest, Sha256};

/// How much of the text a trace writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentMode {
    /// Text as `chars=N;sha256=HEX`; argument values never written.
    #[default]
    Summary,
    /// Full text and argument values.
    Full,
}

/// A content mode name that is neither `summary` nor `full`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown trace content mode `{0}`: expected `summary` or `full`")]
pub struct UnknownContentMode(pub String);

impl FromStr for ContentMode {
    type Err = UnknownContentMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "summary" => Ok(Self::Summary),
            "full" => Ok(Self::Full),
            other => Err(UnknownContentMode(other.to_owned())),
        }
    }
}

impl ContentMode {
    /// `text` as this mode writes it.
    pub fn render(self, text: &str) -> String {
        match self {
            Self::Summary => summarize(text),
            Self::Full => text.to_owned(),
        }
    }
}

/// `chars=N;sha256=HEX`: the length in characters and the SHA-256 of the UTF-8 bytes.
pub fn summarize(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut summary = format!("chars={};sha256=", text.chars().count());
    for byte in digest.iter() {
        let _ = write!(summary, "{byte:02x}");
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_characters_and_hashes_bytes() {
        assert_eq!(
            summarize("abc"),
            "chars=3;sha256=ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(summarize("é").starts_with("chars=1;"));
    }

    #[test]
    fn modes_parse_by_name() {
        assert_eq!("full".parse::<ContentMode>().unwrap(), ContentMode::Full);
        assert!("all".parse::<ContentMode>().is_err());
    }
}
