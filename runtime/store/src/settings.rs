//! The `store:` section of `quiver.yaml`: which backend keeps the state
//! (the embedded SQLite file, or a PostgreSQL database several instances
//! share), its raw shape (read by the daemon's config, keeping line and
//! column) and its validated form.

use std::time::Duration;

use serde::Deserialize;

use quiver_config::setting::{DefaultValue, Kind, Setting, by_key};
use quiver_config::{ConfigError, ConfigWarning, Spanned, expand_vars, int_setting, invalid_at};

/// The backends there are, as `store.backend` names them.
pub const BACKENDS: &[&str] = &["sqlite", "postgres"];

/// Which backend keeps the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// `quiver.db` in the state directory: one instance (and the CLI
    /// commands beside it).
    #[default]
    Sqlite,
    /// A PostgreSQL database at `store.url`, shared by every instance
    /// pointed at it.
    Postgres,
}

impl Backend {
    /// Its name in `store.backend`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// A database URL with its password: shown (in errors, logs, status)
/// only through [`StoreUrl::redacted`].
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUrl(String);

impl StoreUrl {
    /// The URL as given, password included: for the driver only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `user@host:port/database`, without scheme, password or query: what
    /// errors and status name.
    pub fn redacted(&self) -> String {
        redact(&self.0)
    }
}

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreUrl({})", self.redacted())
    }
}

/// `postgres://user:secret@host:5432/db?x=y` as `user@host:5432/db`; a
/// socket directory given as `host=` in the query is named too, and a
/// port given as `port=` is shown as the authority's.
pub fn redact(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, database) = rest.split_once('/').unwrap_or((rest, ""));
    let (user, host) = match authority.rsplit_once('@') {
        Some((credentials, host)) => (
            credentials
                .split_once(':')
                .map_or(credentials, |(user, _)| user),
            host,
        ),
        None => ("", authority),
    };
    let socket = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("host="))
        .map(|dir| format!(" (socket in {dir})"))
        .unwrap_or_default();
    let user = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    let host = if host.is_empty() { "localhost" } else { host };
    // A port given as `port=` in the query (as with a socket directory).
    let port = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("port="))
        .filter(|_| !host.contains(':'))
        .map(|port| format!(":{port}"))
        .unwrap_or_default();
    format!("{user}{host}{port}/{database}{socket}")
}

/// The validated `store` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Which backend.
    pub backend: Backend,
    /// The PostgreSQL database (`postgres` only).
    pub url: Option<StoreUrl>,
    /// Most connections to the database at once.
    pub pool_size: u32,
    /// Longest a connection attempt may take.
    pub connect_timeout: Duration,
    /// How long an instance's lease lasts unrenewed: after it, another
    /// instance abandons the approvals it left waiting and may take its
    /// sessions' turns.
    pub lease: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            backend: Backend::Sqlite,
            url: None,
            pool_size: POOL_SIZE.default_int() as u32,
            connect_timeout: Duration::from_secs(CONNECT_TIMEOUT_S.default_int() as u64),
            lease: Duration::from_secs(LEASE_S.default_int() as u64),
        }
    }
}

impl StoreConfig {
    /// A PostgreSQL store at `url` (tests and `quiver store migrate`),
    /// other settings at their defaults.
    pub fn postgres(url: &str) -> StoreConfig {
        StoreConfig {
            backend: Backend::Postgres,
            url: Some(StoreUrl(url.to_owned())),
            ..StoreConfig::default()
        }
    }
}

/// The section as written, values with their line and column.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    backend: Option<Spanned<Backend>>,
    url: Option<Spanned<String>>,
    pool_size: Option<Spanned<i64>>,
    connect_timeout_s: Option<Spanned<i64>>,
    lease_s: Option<Spanned<i64>>,
}

/// The keys of `store`, described once (see `quiver_config::setting`).
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "store.backend",
        kind: Kind::Enum(BACKENDS),
        default: DefaultValue::Str("sqlite"),
        doc: "where sessions, messages, the activity log, approvals, gateway clients, accepted tool definitions, OAuth tokens and savings are kept: `sqlite` is `quiver.db` in the state directory (one instance); `postgres` is the database at `store.url`, which several instances share (an approval asked on one can be answered on another, a session started on one continued on another); read at start",
    },
    Setting {
        key: "store.url",
        kind: Kind::Text(
            "a postgres:// URL, e.g. postgres://quiver:${PGPASSWORD}@db.internal:5432/quiver",
        ),
        default: DefaultValue::None,
        doc: "the PostgreSQL database (`store.backend: postgres` only, and then required); `${VAR}` is expanded from the environment; a socket directory may be given as `?host=/run/postgresql`. Errors and status name the user, host and database, never the password. Its schema is made or brought up to date at start; a schema newer than the binary knows is refused",
    },
    Setting::int(
        "store.pool_size",
        1,
        256,
        8,
        "most connections each instance keeps to the PostgreSQL database (one more listens for the other instances' notices)",
    ),
    Setting::timeout(
        "store.connect_timeout_s",
        1,
        600,
        5,
        "longest a connection to the PostgreSQL database may take; an unreachable database at start is an error after it",
    ),
    Setting::timeout(
        "store.lease_s",
        1,
        3600,
        15,
        "how long an instance's lease lasts without renewal (each renews it every third of this): when one stops renewing (killed), another marks the approvals it left waiting `abandoned` and may run its sessions' turns",
    ),
];

const POOL_SIZE: &Setting = by_key(SETTINGS, "store.pool_size");
const CONNECT_TIMEOUT_S: &Setting = by_key(SETTINGS, "store.connect_timeout_s");
const LEASE_S: &Setting = by_key(SETTINGS, "store.lease_s");

/// What a key of this section accepts, for error messages; `None` for
/// keys of other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    (key == "store" || key.starts_with("store.")).then(|| {
        quiver_config::setting::allowed_in(SETTINGS, key)
            .unwrap_or_else(|| "keys backend, url, pool_size, connect_timeout_s, lease_s".into())
    })
}

fn invalid<T>(file: &str, at: &Spanned<T>, key: &str, message: String) -> ConfigError {
    invalid_at(
        file,
        at,
        key.to_owned(),
        message,
        allowed_for(key).unwrap_or_default(),
    )
}

/// Checks the raw section and builds its validated form; clamped values
/// add warnings. `lookup` reads environment variables (for `${VAR}`).
pub fn validate(
    raw: RawStore,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<StoreConfig, ConfigError> {
    let backend = raw.backend.as_ref().map_or(Backend::Sqlite, |b| b.value);
    let url = match (&raw.url, &raw.backend) {
        (None, Some(named)) if named.value == Backend::Postgres => {
            return Err(invalid(
                file,
                named,
                "store.url",
                "`store.backend: postgres` needs `store.url` (a postgres:// URL)".into(),
            ));
        }
        _ => &raw.url,
    };
    let url = match (url, backend) {
        (Some(url), Backend::Sqlite) => {
            return Err(invalid(
                file,
                url,
                "store.url",
                "`store.url` is for `store.backend: postgres`; the sqlite store is `quiver.db` in the state directory".into(),
            ));
        }
        (None, _) => None,
        (Some(url), Backend::Postgres) => {
            let expanded =
                expand_vars(&url.value, &lookup).map_err(|m| invalid(file, url, "store.url", m))?;
            let scheme_ok =
                expanded.starts_with("postgres://") || expanded.starts_with("postgresql://");
            if !scheme_ok {
                return Err(invalid(
                    file,
                    url,
                    "store.url",
                    match expanded.split_once("://") {
                        Some((scheme, _)) => format!(
                            "`{scheme}://{}` is not a postgres:// or postgresql:// URL",
                            redact(&expanded)
                        ),
                        None => format!(
                            "`{}` is not a URL (it has no scheme); a postgres:// or postgresql:// URL is needed",
                            redact(&expanded)
                        ),
                    },
                ));
            }
            Some(StoreUrl(expanded))
        }
    };
    Ok(StoreConfig {
        backend,
        url,
        pool_size: int_setting(&raw.pool_size, POOL_SIZE, POOL_SIZE.key, file, warnings)? as u32,
        connect_timeout: Duration::from_secs(int_setting(
            &raw.connect_timeout_s,
            CONNECT_TIMEOUT_S,
            CONNECT_TIMEOUT_S.key,
            file,
            warnings,
        )? as u64),
        lease: Duration::from_secs(
            int_setting(&raw.lease_s, LEASE_S, LEASE_S.key, file, warnings)? as u64,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_their_password() {
        assert_eq!(
            redact("postgres://quiver:s3cret@db.internal:5433/state?sslmode=require"),
            "quiver@db.internal:5433/state"
        );
        assert_eq!(
            redact("postgresql://%2Frun%2Fpg/quiver"),
            "%2Frun%2Fpg/quiver"
        );
        assert_eq!(
            redact("postgres://u@/quiver?host=/tmp/pg&port=5999"),
            "u@localhost:5999/quiver (socket in /tmp/pg)"
        );
        let url = StoreUrl("postgres://a:b@h/d".into());
        assert_eq!(format!("{url:?}"), "StoreUrl(a@h/d)");
    }
}
