//! Bearer-token authentication, as a layer over every route except the open ones
//! (`GET /healthz`). Tokens are kept as SHA-256 digests and compared in constant
//! time; neither a token nor its digest is ever printed or logged.

use std::path::Path;
use std::sync::{Arc, RwLock};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::ui;

/// Paths served without a token: they hold no data (the health check and the
/// web page's files).
pub const OPEN_PATHS: &[&str] = &["/healthz", ui::PAGE, ui::STYLES, ui::SCRIPT, ui::STATUSES];

/// The fewest characters a configured token may have.
pub const MIN_TOKEN_LEN: usize = 16;

/// Why tokens were refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// A token is too short or holds whitespace or control characters.
    #[error("{0}")]
    Unusable(String),
    /// The token file cannot be read.
    #[error("--token-file `{path}` cannot be read: {reason}")]
    File {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// No random bytes for a fresh token.
    #[error("cannot make a random token: {0}")]
    Random(String),
}

/// The API tokens a server accepts.
#[derive(Clone, Default)]
pub struct Tokens {
    digests: Vec<[u8; 32]>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} configured)", self.digests.len())
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Tokens {
    /// Accepts `tokens` (blank entries ignored); each must have at least
    /// [`MIN_TOKEN_LEN`] characters and no whitespace or control characters.
    pub fn new<I, T>(tokens: I) -> Result<Self, TokenError>
    where
        I: IntoIterator<Item = T>,
        T: AsRef<str>,
    {
        let mut digests = Vec::new();
        for (index, token) in tokens.into_iter().enumerate() {
            let token = token.as_ref().trim();
            if token.is_empty() {
                continue;
            }
            if token.chars().count() < MIN_TOKEN_LEN
                || token.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(TokenError::Unusable(format!(
                    "API token number {} is unusable: a token needs at least {MIN_TOKEN_LEN} characters and no spaces or control characters",
                    index + 1
                )));
            }
            digests.push(digest(token));
        }
        Ok(Self { digests })
    }

    /// The comma-separated tokens of `AGENT_API_TOKENS`.
    pub fn from_list(list: &str) -> Result<Self, TokenError> {
        Self::new(list.split(','))
    }

    /// The tokens of a file, one per line; blank lines and lines starting with `#`
    /// are skipped.
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|err| TokenError::File {
            path: path.display().to_string(),
            reason: err.to_string(),
        })?;
        Self::new(
            text.lines()
                .filter(|line| !line.trim_start().starts_with('#')),
        )
    }

    /// A fresh random token (256 bits, hex) and the tokens that accept only it.
    pub fn generate() -> Result<(Self, String), TokenError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|err| TokenError::Random(err.to_string()))?;
        let token: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        Ok((Self::new([&token])?, token))
    }

    /// Both sets together.
    pub fn merged(mut self, other: Self) -> Self {
        self.digests.extend(other.digests);
        self
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// Whether `presented` is one of the tokens; the time taken does not depend on
    /// which one matches, or how much of one does.
    pub fn accepts(&self, presented: &str) -> bool {
        let presented = digest(presented);
        self.digests
            .iter()
            .fold(subtle::Choice::from(0), |found, known| {
                found | known.ct_eq(&presented)
            })
            .into()
    }
}

/// The token of an `Authorization: Bearer TOKEN` header.
fn bearer(request: &Request) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The tokens a running server accepts, replaced as a whole when they are
/// reloaded (`agent serve` on SIGHUP); every clone sees the replacement.
#[derive(Debug, Clone, Default)]
pub struct SharedTokens(Arc<RwLock<Tokens>>);

impl SharedTokens {
    /// Shares `tokens`.
    pub fn new(tokens: Tokens) -> Self {
        Self(Arc::new(RwLock::new(tokens)))
    }

    /// From now on, accepts `tokens` instead.
    pub fn replace(&self, tokens: Tokens) {
        if let Ok(mut current) = self.0.write() {
            *current = tokens;
        }
    }

    /// Whether `presented` is one of the current tokens.
    pub fn accepts(&self, presented: &str) -> bool {
        self.0
            .read()
            .map(|tokens| tokens.accepts(presented))
            .unwrap_or(false)
    }
}

/// Lets a request through when it is for an open path or carries an accepted
/// token; answers 401 with `WWW-Authenticate: Bearer` otherwise.
pub async fn require_token(
    State(tokens): State<SharedTokens>,
    request: Request,
    next: Next,
) -> Response {
    if OPEN_PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let (challenge, message) = match bearer(&request) {
        Some(token) if tokens.accepts(token) => return next.run(request).await,
        Some(_) => (
            r#"Bearer realm="agent", error="invalid_token""#,
            "the bearer token is not one this server accepts",
        ),
        None => (
            r#"Bearer realm="agent""#,
            "this route needs `Authorization: Bearer TOKEN` (the token `agent serve` printed, or one of AGENT_API_TOKENS / --token-file)",
        ),
    };
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn accepts_only_configured_tokens() {
        let tokens = Tokens::from_list("first-token-0123456789, second-token-0123456789").unwrap();
        assert!(tokens.accepts("first-token-0123456789"));
        assert!(tokens.accepts("second-token-0123456789"));
        assert!(!tokens.accepts("first-token-012345678"));
        assert!(!tokens.accepts(""));
        assert!(!Tokens::default().accepts(""));
    }

    #[test]
    fn short_or_spaced_tokens_are_refused_without_showing_them() {
        let err = Tokens::from_list("ok-token-0123456789,short").unwrap_err();
        assert!(err.to_string().contains("number 2"), "{err}");
        assert!(!err.to_string().contains("short"), "{err}");
        assert!(Tokens::new(["has a space in it 0123"]).is_err());
    }

    #[test]
    fn generated_tokens_are_accepted_and_differ() {
        let (tokens, token) = Tokens::generate().unwrap();
        let (_, other) = Tokens::generate().unwrap();
        assert_eq!(token.len(), 64);
        assert_ne!(token, other);
        assert!(tokens.accepts(&token));
        assert!(!format!("{tokens:?}").contains(&token));
    }
}
