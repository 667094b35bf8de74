//! The web page of `agent serve`: plain HTML, CSS and JavaScript built into the
//! binary and served at `/` without a token — the files hold no data; the page
//! asks for the token and sends it with every `/v1/...` request it makes, so it
//! can do nothing a script with the token could not.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use agent_core::state::PublicStatus;

/// Where the page is served.
pub(crate) const PAGE: &str = "/";
/// Where its style sheet is served.
pub(crate) const STYLES: &str = "/ui/app.css";
/// Where its script is served.
pub(crate) const SCRIPT: &str = "/ui/app.js";
/// Where the public statuses are served, in list order, each with whether it
/// ends a run: the page's one source for its filter and for when to stop
/// following a session.
pub(crate) const STATUSES: &str = "/ui/statuses.json";

/// The page's files: the path each is served at, its media type, its bytes.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        PAGE,
        "text/html; charset=utf-8",
        include_bytes!("../ui/index.html"),
    ),
    (
        STYLES,
        "text/css; charset=utf-8",
        include_bytes!("../ui/app.css"),
    ),
    (
        SCRIPT,
        "text/javascript; charset=utf-8",
        include_bytes!("../ui/app.js"),
    ),
];

/// What the page may load and talk to: only this origin, no inline script, no
/// framing by other sites.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'";

/// The routes of the page's files.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let statuses = statuses_json();
    ASSETS
        .iter()
        .fold(Router::new(), |router, &(path, media_type, body)| {
            router.route(path, get(move || async move { asset(media_type, body) }))
        })
        .route(
            STATUSES,
            get(move || async move { asset("application/json", statuses.clone()) }),
        )
}

/// `[{"name": "running", "ended": false}, …]`, from [`PublicStatus::ALL`].
fn statuses_json() -> String {
    let statuses: Vec<_> = PublicStatus::ALL
        .iter()
        .map(|status| serde_json::json!({"name": status, "ended": status.is_final()}))
        .collect();
    serde_json::Value::from(statuses).to_string()
}

/// One file, with headers that keep it fresh and confined.
fn asset(media_type: &'static str, body: impl IntoResponse) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The page loads only files that are served, and no script inline (the
    /// policy would block it).
    #[test]
    fn the_page_names_only_served_files() {
        let page = std::str::from_utf8(ASSETS[0].2).unwrap();
        for (path, _, _) in &ASSETS[1..] {
            let relative = path.trim_start_matches('/');
            assert!(
                page.contains(&format!("\"{relative}\"")),
                "{path} not loaded"
            );
        }
        assert!(!page.contains("<script>"), "inline script");
        assert!(!page.contains("http://") && !page.contains("https://"));
    }

    #[test]
    fn every_status_is_listed_with_whether_it_ends_a_run() {
        let listed: serde_json::Value = serde_json::from_str(&statuses_json()).unwrap();
        let listed = listed.as_array().unwrap();
        assert_eq!(listed.len(), PublicStatus::ALL.len());
        assert_eq!(
            listed[0],
            serde_json::json!({"name": "running", "ended": false})
        );
        assert!(listed.contains(&serde_json::json!({"name": "cancelled", "ended": true})));
    }
}
