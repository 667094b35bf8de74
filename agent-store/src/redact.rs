//! Credentials kept out of what is shown: a store URL without its user and
//! password.

/// `url` with anything between `://` and `@` removed (user and password).
pub(crate) fn redacted(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((_, place)) => format!("{scheme}://…@{place}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}
