//! A password from outside the store URL, where libpq looks for one, so that no
//! password needs to be on a command line (where `ps` shows it): the
//! environment variable `PGPASSWORD`, else the first line of the password file
//! (`PGPASSFILE`, or `~/.pgpass`) that matches the host, port, database and
//! user — `hostname:port:database:username:password`, `*` matching anything,
//! `\:` and `\\` escaping. As libpq does, a password file that others may read
//! is ignored, with a warning.

use std::path::PathBuf;

/// Where a connection goes, as the password file matches it.
pub(super) struct Destination<'a> {
    pub(super) host: &'a str,
    pub(super) port: u16,
    pub(super) database: &'a str,
    pub(super) user: Option<&'a str>,
}

/// The password for `to` from the environment or the password file, if any.
pub(super) fn password_for(to: &Destination<'_>) -> Option<String> {
    if let Ok(password) = std::env::var("PGPASSWORD")
        && !password.is_empty()
    {
        return Some(password);
    }
    let path = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".pgpass")))?;
    let text = readable_only_by_owner(&path)?;
    text.lines().find_map(|line| matching(line, to))
}

/// The file's text, unless it is missing or others may read it.
fn readable_only_by_owner(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let metadata = std::fs::metadata(path).ok()?;
    if metadata.permissions().mode() & 0o077 != 0 {
        tracing::warn!(
            path = %path.display(),
            "the password file is readable by others and is ignored; chmod 600 it"
        );
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The password of `line` when it matches `to`.
fn matching(line: &str, to: &Destination<'_>) -> Option<String> {
    if line.trim_start().starts_with('#') {
        return None;
    }
    let fields = split(line)?;
    let [host, port, database, user, password] = fields;
    let port_text = to.port.to_string();
    let matches = |field: &str, value: &str| field == "*" || field == value;
    (matches(&host, to.host)
        && matches(&port, &port_text)
        && matches(&database, to.database)
        && (user == "*" || to.user == Some(user.as_str())))
    .then_some(password)
}

/// The five fields of a line, unescaped; `None` for a line of another shape.
fn split(line: &str) -> Option<[String; 5]> {
    let mut fields: Vec<String> = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let escaped = chars.next()?;
                fields.last_mut()?.push(escaped);
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut()?.push(c),
        }
    }
    fields.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to<'a>(user: Option<&'a str>) -> Destination<'a> {
        Destination {
            host: "db.example",
            port: 5432,
            database: "agents",
            user,
        }
    }

    #[test]
    fn the_first_matching_line_gives_the_password() {
        let lines = [
            "# comment",
            "other:5432:agents:alice:wrong",
            "db.example:*:agents:alice:p\\:w\\\\d",
            "*:*:*:*:fallback",
        ];
        let found = lines
            .iter()
            .find_map(|line| matching(line, &to(Some("alice"))));
        assert_eq!(found.as_deref(), Some("p:w\\d"));
        let other_user = lines
            .iter()
            .find_map(|line| matching(line, &to(Some("bob"))));
        assert_eq!(other_user.as_deref(), Some("fallback"));
        assert_eq!(matching("db.example:5432:agents", &to(None)), None);
    }
}
