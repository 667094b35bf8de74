//! `PostgresTarget`: a parsed `postgres://` URL. It keeps the password only
//! inside the driver's configuration; everything it shows names the host, port
//! and database alone.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::config::Host;

use crate::error::OpenError;
use crate::redact::redacted;

/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections a store's pool opens at most unless the URL's `pool_max` says
/// otherwise. A process that waits for work (a worker, `agent serve`) holds
/// one more, to listen. With the default, 24 such processes fit PostgreSQL's
/// default `max_connections = 100` (less its 3 reserved ones).
pub const DEFAULT_POOL_MAX: usize = 3;

/// Most connections `pool_max` may ask for.
const POOL_MAX_LIMIT: usize = 1000;

/// The query parameter of a store URL (ours, not libpq's) that bounds its pool.
const POOL_MAX_PARAMETER: &str = "pool_max";

/// Where a PostgreSQL store lives.
#[derive(Clone)]
pub struct PostgresTarget {
    config: tokio_postgres::Config,
    shown: String,
    password: Option<String>,
    pool_max: usize,
}

impl PostgresTarget {
    /// Parses `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (libpq's URL
    /// form, query parameters included), plus the parameter `pool_max=N`: the
    /// most connections the store's pool opens (default [`DEFAULT_POOL_MAX`]).
    pub fn parse(url: &str) -> Result<Self, OpenError> {
        if has_stray_at(url) {
            return Err(OpenError::UnsupportedUrl(format!(
                "{} (an `@` outside USER:PASSWORD@HOST, or more than one: percent-encode an `@`, `/` or `:` in the user or password, as %40, %2F, %3A)",
                redacted(url)
            )));
        }
        let (url, pool_max) = pool_max_of(url)?;
        let url = url.as_str();
        let mut config = tokio_postgres::Config::from_str(url).map_err(|err| {
            OpenError::UnsupportedUrl(format!(
                "{} ({})",
                redacted(url),
                without(&err.to_string(), password_in(url).as_deref())
            ))
        })?;
        let Some(dbname) = config.get_dbname().map(str::to_owned) else {
            return Err(OpenError::UnsupportedUrl(format!(
                "{} (name the database: postgres://USER@HOST:PORT/DATABASE)",
                redacted(url)
            )));
        };
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(host)) => host.clone(),
            Some(Host::Unix(path)) => path.display().to_string(),
            None => "localhost".to_owned(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        // Every statement is prepared once per connection, and its parameters (ids,
        // arrays) never make a custom plan better: plan it once.
        let options = match config.get_options() {
            Some(given) => format!("{given} -c plan_cache_mode=force_generic_plan"),
            None => "-c plan_cache_mode=force_generic_plan".to_owned(),
        };
        config
            .keepalives(true)
            .application_name("agent")
            .options(&options);
        if config.get_password().is_none()
            && let Some(password) = super::passfile::password_for(&super::passfile::Destination {
                host: &host,
                port,
                database: &dbname,
                user: config.get_user(),
            })
        {
            config.password(password);
        }
        let password = config
            .get_password()
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned());
        Ok(Self {
            config,
            shown: format!("postgres://{host}:{port}/{dbname}"),
            password,
            pool_max,
        })
    }

    /// The most connections the store's pool opens.
    pub fn pool_max(&self) -> usize {
        self.pool_max
    }

    /// The driver's configuration.
    pub(crate) fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// `message` with the password, if any, removed.
    pub(crate) fn scrub(&self, message: &str) -> String {
        without(message, self.password.as_deref())
    }
}

/// `url` without its `pool_max` parameter, and the pool size it asks for.
fn pool_max_of(url: &str) -> Result<(String, usize), OpenError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), DEFAULT_POOL_MAX));
    };
    let mut pool_max = DEFAULT_POOL_MAX;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some((POOL_MAX_PARAMETER, value)) => {
                pool_max = value
                    .parse::<usize>()
                    .ok()
                    .filter(|max| (1..=POOL_MAX_LIMIT).contains(max))
                    .ok_or_else(|| {
                        OpenError::UnsupportedUrl(format!(
                            "{} (pool_max must be a number of connections from 1 to {POOL_MAX_LIMIT}, not `{value}`)",
                            redacted(base)
                        ))
                    })?;
            }
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, pool_max))
}

/// Whether `url` has an `@` anywhere but once, inside its authority (before the
/// first `/` or `?`):
/// such a URL reads differently to different parsers, and the part one takes
/// for a password another would show as a host or database name.
fn has_stray_at(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    match rest
        .match_indices('@')
        .map(|(at, _)| at)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => false,
        [at] => *at > authority_end,
        _ => true,
    }
}

/// The password of a URL, if it has one, for scrubbing parse errors.
fn password_in(url: &str) -> Option<String> {
    if let Some((_, query)) = url.split_once('?')
        && let Some(password) = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("password="))
            .filter(|password| !password.is_empty())
    {
        return Some(password.to_owned());
    }
    let (_, rest) = url.split_once("://")?;
    let (credentials, _) = rest.rsplit_once('@')?;
    let (_, password) = credentials.split_once(':')?;
    (!password.is_empty()).then(|| password.to_owned())
}

fn without(message: &str, secret: Option<&str>) -> String {
    match secret.filter(|secret| !secret.is_empty()) {
        Some(secret) => message.replace(secret, "[redacted]"),
        None => message.to_owned(),
    }
}

impl fmt::Display for PostgresTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for PostgresTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PostgresTarget").field(&self.shown).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_max_is_ours_and_the_rest_of_the_query_goes_to_the_driver() {
        let target = PostgresTarget::parse("postgres://u@h:5433/db").unwrap();
        assert_eq!(target.pool_max(), DEFAULT_POOL_MAX);
        let target =
            PostgresTarget::parse("postgres://u@h:5433/db?pool_max=12&connect_timeout=3").unwrap();
        assert_eq!(target.pool_max(), 12);
        assert_eq!(
            target.config().get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
        for bad in ["0", "1001", "many"] {
            let err = PostgresTarget::parse(&format!("postgres://u:pw@h/db?pool_max={bad}"))
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains("pool_max"), "{err}");
            assert!(!err.contains("pw"), "{err}");
        }
    }
}
