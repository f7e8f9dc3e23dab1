//! Persistence: sessions, their messages, the activity log, the MCP
//! gateway's client tokens and the accepted tool definitions (pins), in one SQLite database in the state directory,
//! so that all of it survives a daemon restart.
//!
//! Every write is one short transaction on a single connection (WAL
//! journal, so readers in other processes, e.g. `quiver status`, never
//! block the daemon). Calls are synchronous and take well under a
//! millisecond; async callers use them directly.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;
use serde_json::Value;

use quiver_dispatch::{Event, Status};
use quiver_model::Message;
use quiver_tool::integrity::{Pin, PinStore, PinStoreError};

/// The schema version this code writes (`PRAGMA user_version`): 2 added
/// `tool_pins`, 3 the events' `result` and `answered_by` (added to an
/// older database when it is opened).
pub const SCHEMA_VERSION: i64 = 3;

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened or set up.
    #[error("cannot open the state database {path}: {source}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The database file's permissions could not be made owner-only.
    #[error("cannot make {path} readable by its owner only: {source}")]
    Permissions {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The database was written by a newer Quiver.
    #[error(
        "the state database {path} has schema version {found}; this Quiver reads up to {SCHEMA_VERSION}"
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// Its version.
        found: i64,
    },
    /// A query failed.
    #[error("state database {path}: error while {what}: {source}")]
    Query {
        /// The database file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// A stored value could not be read back.
    #[error("state database holds an unreadable {what}: {detail}")]
    Corrupt {
        /// Which value.
        what: &'static str,
        /// Why.
        detail: String,
    },
    /// A session with this id exists already.
    #[error("a session with id `{0}` exists already")]
    SessionExists(String),
    /// A gateway client with this name exists already.
    #[error("a gateway client named `{0}` exists already")]
    ClientExists(String),
}

/// What a session is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    /// A conversation with a model (HTTP API or `quiver chat`).
    Chat,
    /// An MCP gateway client's connection.
    Gateway,
}

impl SessionKind {
    fn as_str(self) -> &'static str {
        match self {
            SessionKind::Chat => "chat",
            SessionKind::Gateway => "gateway",
        }
    }

    fn parse(text: &str) -> Result<SessionKind, StoreError> {
        match text {
            "chat" => Ok(SessionKind::Chat),
            "gateway" => Ok(SessionKind::Gateway),
            other => Err(StoreError::Corrupt {
                what: "session kind",
                detail: format!("`{other}`"),
            }),
        }
    }
}

/// A stored session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionRecord {
    /// Its id.
    pub id: String,
    /// What it is for.
    pub kind: SessionKind,
    /// The parent session, for a subagent.
    pub parent: Option<String>,
    /// The toolsets and tools it was granted (grant globs).
    pub grants: Vec<String>,
    /// The configured model it talks to (chat sessions).
    pub model: Option<String>,
    /// Its context window, in tokens.
    pub context_tokens: u64,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// Messages stored so far.
    pub messages: u64,
}

/// A stored message with its position.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredMessage {
    /// 1-based position in the session.
    pub seq: u64,
    /// When it was stored, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// The message.
    #[serde(flatten)]
    pub message: Message,
}

/// An activity-feed event as stored and as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventRecord {
    /// Position in the log (0 for an event not stored yet).
    pub id: i64,
    /// When it happened, milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// The session.
    pub session: String,
    /// The call (0 for bridge answers and unresolved calls).
    pub call_id: u64,
    /// The real tool's name.
    pub tool: String,
    /// Whether the model went through `tool_call`.
    pub via_bridge: bool,
    /// The redacted arguments.
    pub arguments: Value,
    /// `ok`, `error`, `denied`, `awaiting_approval`, `timed_out`.
    pub status: Status,
    /// Time since the call entered the dispatcher, in milliseconds.
    pub duration_ms: u64,
    /// The error or note.
    pub detail: Option<String>,
    /// What the tool answered, redacted and cut (see
    /// `quiver_dispatch::feed::MAX_RESULT_CHARS`).
    pub result: Option<Value>,
    /// Who answered the call's approval (its outcome's record only).
    pub answered_by: Option<String>,
    /// The one-line rendering (`tool via tool_call  ok  3 ms`).
    pub line: String,
}

impl EventRecord {
    /// The record of a live event (id 0 until stored).
    pub fn from_event(event: &Event) -> EventRecord {
        EventRecord {
            id: 0,
            time_ms: millis(event.time),
            session: event.session.clone(),
            call_id: event.call_id,
            tool: event.tool.clone(),
            via_bridge: event.via_bridge,
            arguments: event.arguments.clone(),
            status: event.status,
            duration_ms: u64::try_from(event.duration.as_millis()).unwrap_or(u64::MAX),
            detail: event.detail.clone(),
            result: event.result.clone(),
            answered_by: None,
            line: event.render(),
        }
    }
}

/// An MCP gateway client allowed in with its own token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GatewayClient {
    /// Its name.
    pub name: String,
    /// What it was granted.
    pub grants: Vec<String>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// Milliseconds since the Unix epoch.
pub fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    millis(SystemTime::now())
}

/// Adds the events' columns of schema 3 to a database made before it
/// (inside the opening transaction, so two openers never both add them).
fn add_event_columns(connection: &Connection) -> rusqlite::Result<()> {
    let mut statement = connection.prepare("SELECT name FROM pragma_table_info('events')")?;
    let columns = statement
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for column in ["result", "answered_by"] {
        if !columns.iter().any(|c| c == column) {
            connection.execute_batch(&format!("ALTER TABLE events ADD COLUMN {column} TEXT"))?;
        }
    }
    Ok(())
}

/// The state database.
#[derive(Debug)]
pub struct Store {
    connection: Mutex<Connection>,
    path: PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    parent TEXT,
    grants TEXT NOT NULL,
    model TEXT,
    context_tokens INTEGER NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    session TEXT NOT NULL REFERENCES sessions(id),
    seq INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time_ms INTEGER NOT NULL,
    session TEXT NOT NULL,
    call_id INTEGER NOT NULL,
    tool TEXT NOT NULL,
    via_bridge INTEGER NOT NULL,
    arguments TEXT NOT NULL,
    status TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    detail TEXT,
    line TEXT NOT NULL,
    result TEXT,
    answered_by TEXT
);
CREATE INDEX IF NOT EXISTS events_by_session ON events (session, id);
CREATE TABLE IF NOT EXISTS gateway_clients (
    name TEXT PRIMARY KEY,
    token_sha256 TEXT NOT NULL UNIQUE,
    grants TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tool_pins (
    source TEXT NOT NULL,
    tool TEXT NOT NULL,
    hash TEXT NOT NULL,
    shape TEXT NOT NULL,
    definition TEXT NOT NULL,
    accepted_ms INTEGER NOT NULL,
    accepted_by TEXT NOT NULL,
    PRIMARY KEY (source, tool)
);
";

/// How long [`Store::open`] keeps trying a database another process is
/// opening or writing.
pub const OPEN_BUSY_PATIENCE: Duration = Duration::from_secs(10);

/// Whether `error` is SQLite's "try again later".
fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

impl Store {
    /// Opens (creating if needed) the database at `path`.
    ///
    /// Several processes may open one state database at the same moment
    /// (a daemon starting while `quiver status` or `catalog assemble` runs,
    /// all on a fresh HOME). SQLite answers some of those races with
    /// `SQLITE_BUSY` without calling the busy handler (switching a new file
    /// to WAL, recovering a WAL another opener just created), so a busy
    /// open is tried again, for up to [`OPEN_BUSY_PATIENCE`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let deadline = std::time::Instant::now() + OPEN_BUSY_PATIENCE;
        let mut pause = Duration::from_millis(5);
        loop {
            match Store::open_once(path) {
                Err(StoreError::Open { source, .. })
                    if is_busy(&source) && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                outcome => return outcome,
            }
        }
    }

    fn open_once(path: &Path) -> Result<Store, StoreError> {
        let open_error = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        // Sessions and the activity log are private: the file is made
        // 0600 before SQLite opens it (its -wal and -shm files take the
        // database's mode), and set again in case it existed.
        restrict_to_owner(path, true)?;
        let connection = Connection::open(path).map_err(open_error)?;
        connection
            .busy_timeout(Duration::from_secs(5))
            .map_err(open_error)?;
        connection
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(open_error)?;
        connection
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_error)?;
        for suffix in ["-wal", "-shm"] {
            let mut companion = path.as_os_str().to_owned();
            companion.push(suffix);
            restrict_to_owner(Path::new(&companion), false)?;
        }
        let found: i64 = connection
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(open_error)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found,
            });
        }
        // One write transaction, taken through the busy handler, so that
        // two openers creating the tables never interleave.
        connection
            .execute_batch(&format!("BEGIN IMMEDIATE; {SCHEMA}"))
            .and_then(|()| add_event_columns(&connection))
            .and_then(|()| {
                connection
                    .execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))
            })
            .map_err(open_error)?;
        Ok(Store {
            connection: Mutex::new(connection),
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn with<T>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let mut connection = self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f(&mut connection).map_err(|source| StoreError::Query {
            path: self.path.clone(),
            what,
            source,
        })
    }

    /// Stores a new session (its message count is ignored).
    pub fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let grants = json_text(&session.grants);
        let inserted = self.with("creating a session", |c| {
            c.execute(
                "INSERT OR IGNORE INTO sessions (id, kind, parent, grants, model, context_tokens, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    session.id,
                    session.kind.as_str(),
                    session.parent,
                    grants,
                    session.model,
                    clamp_i64(session.context_tokens),
                    session.created_ms
                ],
            )
        })?;
        if inserted == 0 {
            return Err(StoreError::SessionExists(session.id.clone()));
        }
        Ok(())
    }

    /// Replaces a session's grant (a gateway client's changed); returns
    /// whether the session was there.
    pub fn set_session_grants(&self, id: &str, grants: &[String]) -> Result<bool, StoreError> {
        let grants = json_text(grants);
        let updated = self.with("updating a session's grant", |c| {
            c.execute(
                "UPDATE sessions SET grants = ?2 WHERE id = ?1",
                params![id, grants],
            )
        })?;
        Ok(updated > 0)
    }

    /// Changes a session's model and context size; returns whether the
    /// session was there.
    pub fn set_session_model(
        &self,
        id: &str,
        model: Option<&str>,
        context_tokens: u64,
    ) -> Result<bool, StoreError> {
        let updated = self.with("updating a session's model", |c| {
            c.execute(
                "UPDATE sessions SET model = ?2, context_tokens = ?3 WHERE id = ?1",
                params![id, model, clamp_i64(context_tokens)],
            )
        })?;
        Ok(updated > 0)
    }

    /// Deletes a session and its messages in one transaction; returns
    /// whether it was there. Its activity log entries stay (the log is
    /// the record of what ran), as do its subagents: delete them first.
    pub fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        let removed = self.with("deleting a session", |c| {
            let transaction = c.transaction()?;
            transaction.execute("DELETE FROM messages WHERE session = ?1", params![id])?;
            let removed = transaction.execute("DELETE FROM sessions WHERE id = ?1", params![id])?;
            transaction.commit()?;
            Ok(removed)
        })?;
        Ok(removed > 0)
    }

    /// The ids of the sessions whose parent is `id`, sorted.
    pub fn subagents(&self, id: &str) -> Result<Vec<String>, StoreError> {
        self.with("listing subagents", |c| {
            let mut statement =
                c.prepare("SELECT id FROM sessions WHERE parent = ?1 ORDER BY id")?;
            let rows = statement.query_map(params![id], |row| row.get(0))?;
            rows.collect::<rusqlite::Result<Vec<String>>>()
        })
    }

    /// One session, if stored.
    pub fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let row = self.with("reading a session", |c| {
            c.query_row(
                &format!("{SESSION_COLUMNS} WHERE s.id = ?1"),
                params![id],
                raw_session,
            )
            .optional()
        })?;
        row.map(RawSession::into_record).transpose()
    }

    /// Every stored session, oldest first.
    pub fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let rows = self.with("listing sessions", |c| {
            let mut statement =
                c.prepare(&format!("{SESSION_COLUMNS} ORDER BY s.created_ms, s.id"))?;
            let rows = statement.query_map([], raw_session)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(RawSession::into_record).collect()
    }

    /// Appends `message` to `session`; returns its position.
    pub fn append_message(&self, session: &str, message: &Message) -> Result<u64, StoreError> {
        let body = serde_json::to_string(message).map_err(|e| StoreError::Corrupt {
            what: "message",
            detail: e.to_string(),
        })?;
        let seq = self.with("storing a message", |c| {
            // Immediate: it takes the write lock before reading the next
            // position, so another process (`serve --stdio` beside the
            // daemon) writing in between makes it wait, not fail busy.
            let transaction = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let seq: i64 = transaction.query_row(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session = ?1",
                params![session],
                |row| row.get(0),
            )?;
            transaction.execute(
                "INSERT INTO messages (session, seq, created_ms, body) VALUES (?1, ?2, ?3, ?4)",
                params![session, seq, now_ms(), body],
            )?;
            transaction.commit()?;
            Ok(seq)
        })?;
        Ok(u64::try_from(seq).unwrap_or(0))
    }

    /// A session's messages, in order.
    pub fn messages(&self, session: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = self.with("reading messages", |c| {
            let mut statement = c.prepare(
                "SELECT seq, created_ms, body FROM messages WHERE session = ?1 ORDER BY seq",
            )?;
            let rows = statement.query_map(params![session], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, String>(2)?,
                ))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter()
            .map(|(seq, created_ms, body)| {
                let message = serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                    what: "message",
                    detail: format!("session `{session}` message {seq}: {e}"),
                })?;
                Ok(StoredMessage {
                    seq: u64::try_from(seq).unwrap_or(0),
                    created_ms,
                    message,
                })
            })
            .collect()
    }

    /// Appends an event to the activity log; returns its id.
    pub fn record_event(&self, event: &EventRecord) -> Result<i64, StoreError> {
        let arguments = event.arguments.to_string();
        let result = event.result.as_ref().map(Value::to_string);
        let status = status_text(event.status);
        self.with("storing an event", |c| {
            c.execute(
                "INSERT INTO events (time_ms, session, call_id, tool, via_bridge, arguments, status, duration_ms, detail, line, result, answered_by)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    event.time_ms,
                    event.session,
                    clamp_i64(event.call_id),
                    event.tool,
                    event.via_bridge,
                    arguments,
                    status,
                    clamp_i64(event.duration_ms),
                    event.detail,
                    event.line,
                    result,
                    event.answered_by
                ],
            )?;
            Ok(c.last_insert_rowid())
        })
    }

    /// The id of the newest stored event (0 when there is none): where a
    /// feed that starts now stands in the log.
    pub fn last_event_id(&self) -> Result<i64, StoreError> {
        self.with("reading the last event id", |c| {
            c.query_row("SELECT COALESCE(MAX(id), 0) FROM events", [], |row| {
                row.get(0)
            })
        })
    }

    /// Stored events after id `after` (of one session, or all), oldest
    /// first, at most `limit`.
    pub fn events(
        &self,
        session: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.with("reading events", |c| {
            let mut statement = c.prepare(
                "SELECT id, time_ms, session, call_id, tool, via_bridge, arguments, status, duration_ms, detail, line, result, answered_by
                 FROM events WHERE id > ?1 AND (?2 IS NULL OR session = ?2) ORDER BY id LIMIT ?3",
            )?;
            let rows = statement.query_map(params![after, session, limit], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, bool>(5)?,
                    row.get::<_, String>(6)?,
                    row.get::<_, String>(7)?,
                    row.get::<_, i64>(8)?,
                    row.get::<_, Option<String>>(9)?,
                    row.get::<_, String>(10)?,
                    row.get::<_, Option<String>>(11)?,
                    row.get::<_, Option<String>>(12)?,
                ))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter()
            .map(
                |(
                    id,
                    time_ms,
                    session,
                    call_id,
                    tool,
                    via_bridge,
                    arguments,
                    status,
                    duration_ms,
                    detail,
                    line,
                    result,
                    answered_by,
                )| {
                    let result = result
                        .map(|text| serde_json::from_str(&text))
                        .transpose()
                        .map_err(|e| StoreError::Corrupt {
                            what: "event result",
                            detail: format!("event {id}: {e}"),
                        })?;
                    Ok(EventRecord {
                        id,
                        time_ms,
                        session,
                        call_id: u64::try_from(call_id).unwrap_or(0),
                        tool,
                        via_bridge,
                        arguments: serde_json::from_str(&arguments).map_err(|e| {
                            StoreError::Corrupt {
                                what: "event arguments",
                                detail: format!("event {id}: {e}"),
                            }
                        })?,
                        status: parse_status(&status)?,
                        duration_ms: u64::try_from(duration_ms).unwrap_or(0),
                        detail,
                        result,
                        answered_by,
                        line,
                    })
                },
            )
            .collect()
    }

    /// Stores a gateway client with the sha256 (hex) of its token.
    pub fn add_gateway_client(
        &self,
        name: &str,
        token_sha256: &str,
        grants: &[String],
    ) -> Result<GatewayClient, StoreError> {
        let created_ms = now_ms();
        let inserted = self.with("adding a gateway client", |c| {
            c.execute(
                "INSERT OR IGNORE INTO gateway_clients (name, token_sha256, grants, created_ms) VALUES (?1, ?2, ?3, ?4)",
                params![name, token_sha256, json_text(grants), created_ms],
            )
        })?;
        if inserted == 0 {
            return Err(StoreError::ClientExists(name.to_owned()));
        }
        Ok(GatewayClient {
            name: name.to_owned(),
            grants: grants.to_vec(),
            created_ms,
        })
    }

    /// The gateway client whose token has this sha256 (hex).
    pub fn gateway_client_by_token(
        &self,
        token_sha256: &str,
    ) -> Result<Option<GatewayClient>, StoreError> {
        let row = self.with("reading a gateway client", |c| {
            c.query_row(
                "SELECT name, grants, created_ms FROM gateway_clients WHERE token_sha256 = ?1",
                params![token_sha256],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                },
            )
            .optional()
        })?;
        row.map(|(name, grants, created_ms)| {
            Ok(GatewayClient {
                name,
                grants: parse_grants(&grants)?,
                created_ms,
            })
        })
        .transpose()
    }

    /// Every gateway client, by name.
    pub fn gateway_clients(&self) -> Result<Vec<GatewayClient>, StoreError> {
        let rows = self.with("listing gateway clients", |c| {
            let mut statement =
                c.prepare("SELECT name, grants, created_ms FROM gateway_clients ORDER BY name")?;
            let rows = statement.query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                ))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter()
            .map(|(name, grants, created_ms)| {
                Ok(GatewayClient {
                    name,
                    grants: parse_grants(&grants)?,
                    created_ms,
                })
            })
            .collect()
    }

    /// Removes a gateway client; returns whether it existed.
    pub fn remove_gateway_client(&self, name: &str) -> Result<bool, StoreError> {
        let removed = self.with("removing a gateway client", |c| {
            c.execute("DELETE FROM gateway_clients WHERE name = ?1", params![name])
        })?;
        Ok(removed > 0)
    }
}

impl PinStore for Store {
    fn pins(&self, source: &str) -> Result<Vec<Pin>, PinStoreError> {
        let rows = self
            .with("reading accepted tool definitions", |c| {
                let mut statement = c.prepare(
                    "SELECT tool, hash, shape, definition, accepted_ms, accepted_by FROM tool_pins WHERE source = ?1 ORDER BY tool",
                )?;
                let rows = statement.query_map(params![source], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, i64>(4)?,
                        row.get::<_, String>(5)?,
                    ))
                })?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| PinStoreError(e.to_string()))?;
        rows.into_iter()
            .map(
                |(tool, hash, shape, definition, accepted_ms, accepted_by)| {
                    let definition = serde_json::from_str(&definition).map_err(|e| {
                        PinStoreError(format!(
                            "{}: the accepted definition of `{tool}` ({source}) is unreadable: {e}",
                            self.path.display()
                        ))
                    })?;
                    Ok(Pin {
                        tool,
                        hash,
                        shape,
                        definition,
                        accepted_ms,
                        accepted_by,
                    })
                },
            )
            .collect()
    }

    fn put_pins(&self, source: &str, pins: &[Pin]) -> Result<(), PinStoreError> {
        self.with("storing accepted tool definitions", |c| {
            let transaction = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            for pin in pins {
                transaction.execute(
                    "INSERT OR REPLACE INTO tool_pins (source, tool, hash, shape, definition, accepted_ms, accepted_by)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        source,
                        pin.tool,
                        pin.hash,
                        pin.shape,
                        pin.definition.to_string(),
                        pin.accepted_ms,
                        pin.accepted_by
                    ],
                )?;
            }
            transaction.commit()
        })
        .map_err(|e| PinStoreError(e.to_string()))
    }
}

const SESSION_COLUMNS: &str =
    "SELECT s.id, s.kind, s.parent, s.grants, s.model, s.context_tokens, s.created_ms,
    (SELECT COUNT(*) FROM messages m WHERE m.session = s.id) FROM sessions s";

struct RawSession {
    id: String,
    kind: String,
    parent: Option<String>,
    grants: String,
    model: Option<String>,
    context_tokens: i64,
    created_ms: i64,
    messages: i64,
}

fn raw_session(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawSession> {
    Ok(RawSession {
        id: row.get(0)?,
        kind: row.get(1)?,
        parent: row.get(2)?,
        grants: row.get(3)?,
        model: row.get(4)?,
        context_tokens: row.get(5)?,
        created_ms: row.get(6)?,
        messages: row.get(7)?,
    })
}

impl RawSession {
    fn into_record(self) -> Result<SessionRecord, StoreError> {
        Ok(SessionRecord {
            kind: SessionKind::parse(&self.kind)?,
            grants: parse_grants(&self.grants)?,
            id: self.id,
            parent: self.parent,
            model: self.model,
            context_tokens: u64::try_from(self.context_tokens).unwrap_or(0),
            created_ms: self.created_ms,
            messages: u64::try_from(self.messages).unwrap_or(0),
        })
    }
}

/// Sets `path` to mode 0600; creates it (empty, 0600) when `create`,
/// else leaves a missing file alone.
fn restrict_to_owner(path: &Path, create: bool) -> Result<(), StoreError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let error = |source| StoreError::Permissions {
        path: path.to_path_buf(),
        source,
    };
    if create {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(error)?;
    }
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
        Err(e) if !create && e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other.map_err(error),
    }
}

fn json_text(grants: &[String]) -> String {
    Value::from(grants.to_vec()).to_string()
}

fn parse_grants(text: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        what: "grants",
        detail: format!("`{text}`: {e}"),
    })
}

fn clamp_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn status_text(status: Status) -> &'static str {
    match status {
        Status::Ok => "ok",
        Status::Error => "error",
        Status::Denied => "denied",
        Status::AwaitingApproval => "awaiting_approval",
        Status::TimedOut => "timed_out",
        Status::Quarantined => "quarantined",
        Status::DefinitionChanged => "definition_changed",
    }
}

fn parse_status(text: &str) -> Result<Status, StoreError> {
    [
        Status::Ok,
        Status::Error,
        Status::Denied,
        Status::AwaitingApproval,
        Status::TimedOut,
        Status::Quarantined,
        Status::DefinitionChanged,
    ]
    .into_iter()
    .find(|s| status_text(*s) == text)
    .ok_or_else(|| StoreError::Corrupt {
        what: "event status",
        detail: format!("`{text}`"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_model::ToolCall;

    fn session(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            kind: SessionKind::Chat,
            parent: None,
            grants: vec!["core".into(), "mcp-*".into()],
            model: Some("local".into()),
            context_tokens: 32_000,
            created_ms: now_ms(),
            messages: 0,
        }
    }

    #[test]
    fn a_deleted_session_takes_its_messages_and_a_model_change_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("quiver.db")).unwrap();
        store.create_session(&session("a")).unwrap();
        store
            .create_session(&SessionRecord {
                parent: Some("a".into()),
                ..session("child")
            })
            .unwrap();
        store.create_session(&session("b")).unwrap();
        store.append_message("a", &Message::user("gone")).unwrap();
        store.append_message("b", &Message::user("kept")).unwrap();
        assert_eq!(store.subagents("a").unwrap(), ["child"]);
        assert!(store.set_session_model("b", Some("other"), 8000).unwrap());
        let b = store.session("b").unwrap().unwrap();
        assert_eq!(
            (b.model.as_deref(), b.context_tokens),
            (Some("other"), 8000)
        );
        assert!(store.delete_session("child").unwrap());
        assert!(store.delete_session("a").unwrap());
        assert!(!store.delete_session("a").unwrap());
        assert!(store.session("a").unwrap().is_none());
        assert!(store.messages("a").unwrap().is_empty());
        assert_eq!(store.messages("b").unwrap().len(), 1);
        // The id can be used again, from an empty history.
        store.create_session(&session("a")).unwrap();
        assert_eq!(store.session("a").unwrap().unwrap().messages, 0);
    }

    #[test]
    fn sessions_and_messages_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quiver.db");
        {
            let store = Store::open(&path).unwrap();
            store.create_session(&session("a")).unwrap();
            store.create_session(&session("b")).unwrap();
            assert!(matches!(
                store.create_session(&session("a")),
                Err(StoreError::SessionExists(_))
            ));
            store.append_message("a", &Message::user("hello")).unwrap();
            let call = ToolCall {
                id: "c1".into(),
                name: "tool_search".into(),
                arguments: "{\"query\": \"x\"}".into(),
            };
            store
                .append_message("a", &Message::assistant("", vec![call]))
                .unwrap();
            assert_eq!(
                store
                    .append_message("a", &Message::tool_result("c1", "tool_search", "{}"))
                    .unwrap(),
                3
            );
            store.append_message("b", &Message::user("other")).unwrap();
        }
        let store = Store::open(&path).unwrap();
        let sessions = store.sessions().unwrap();
        assert_eq!(sessions.len(), 2);
        assert_eq!(sessions[0].grants, ["core", "mcp-*"]);
        assert_eq!(store.session("a").unwrap().unwrap().messages, 3);
        let messages = store.messages("a").unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1].message.tool_calls[0].name, "tool_search");
        assert_eq!(store.messages("b").unwrap()[0].message.content, "other");
        assert!(store.session("zzz").unwrap().is_none());
    }

    #[test]
    fn two_connections_appending_to_one_session_wait_for_each_other() {
        // Two handles on one file are two writers, as two processes are.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quiver.db");
        let first = std::sync::Arc::new(Store::open(&path).unwrap());
        let second = std::sync::Arc::new(Store::open(&path).unwrap());
        first.create_session(&session("a")).unwrap();
        let writers: Vec<_> = [first.clone(), second, first.clone()]
            .into_iter()
            .enumerate()
            .map(|(writer, store)| {
                std::thread::spawn(move || {
                    for n in 0..100 {
                        store
                            .append_message("a", &Message::user(format!("{writer}-{n}")))
                            .unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let positions: Vec<u64> = first.messages("a").unwrap().iter().map(|m| m.seq).collect();
        assert_eq!(positions, (1..=300).collect::<Vec<u64>>());
    }

    #[test]
    fn events_are_filtered_by_session_and_position() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("q.db")).unwrap();
        for (session, tool) in [("a", "echo"), ("b", "add"), ("a", "run_command")] {
            let event = Event {
                time: SystemTime::now(),
                call_id: 7,
                session: session.into(),
                tool: tool.into(),
                via_bridge: true,
                arguments: serde_json::json!({"x": 1}),
                status: Status::AwaitingApproval,
                duration: Duration::from_millis(3),
                detail: None,
                result: Some(serde_json::json!({"n": tool.len()})),
            };
            let mut record = EventRecord::from_event(&event);
            record.answered_by = Some("console".into());
            store.record_event(&record).unwrap();
        }
        let a = store.events(Some("a"), 0, 100).unwrap();
        assert_eq!(
            a.iter().map(|e| e.tool.as_str()).collect::<Vec<_>>(),
            ["echo", "run_command"]
        );
        assert_eq!(a[0].status, Status::AwaitingApproval);
        assert_eq!(a[0].line, "echo via tool_call  awaiting approval");
        assert_eq!(a[1].result, Some(serde_json::json!({"n": 11})));
        assert_eq!(a[1].answered_by.as_deref(), Some("console"));
        let later = store.events(None, a[0].id, 100).unwrap();
        assert_eq!(later.len(), 2);
        assert_eq!(store.events(None, 0, 1).unwrap().len(), 1);
    }

    #[test]
    fn gateway_clients_are_found_by_token_digest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("q.db")).unwrap();
        store
            .add_gateway_client("ci", "abc", &["plugin-text".into()])
            .unwrap();
        assert!(matches!(
            store.add_gateway_client("ci", "def", &[]),
            Err(StoreError::ClientExists(_))
        ));
        let client = store.gateway_client_by_token("abc").unwrap().unwrap();
        assert_eq!(client.grants, ["plugin-text"]);
        assert!(store.gateway_client_by_token("def").unwrap().is_none());
        assert!(store.remove_gateway_client("ci").unwrap());
        assert!(store.gateway_clients().unwrap().is_empty());
    }

    #[test]
    fn pins_survive_reopening_and_are_replaced_per_tool() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let pin = |tool: &str, hash: &str| Pin {
            tool: tool.into(),
            hash: hash.into(),
            shape: "s".into(),
            definition: serde_json::json!({"name": tool}),
            accepted_ms: 1,
            accepted_by: "operator".into(),
        };
        {
            let store = Store::open(&path).unwrap();
            store
                .put_pins("mcp-a", &[pin("x", "h1"), pin("y", "h2")])
                .unwrap();
            store.put_pins("mcp-a", &[pin("x", "h3")]).unwrap();
            store.put_pins("mcp-b", &[pin("x", "other")]).unwrap();
        }
        let store = Store::open(&path).unwrap();
        let pins = store.pins("mcp-a").unwrap();
        let hashes: Vec<(&str, &str)> = pins
            .iter()
            .map(|p| (p.tool.as_str(), p.hash.as_str()))
            .collect();
        assert_eq!(hashes, [("x", "h3"), ("y", "h2")]);
        assert_eq!(pins[0].definition, serde_json::json!({"name": "x"}));
        assert!(store.pins("mcp-none").unwrap().is_empty());
    }

    #[test]
    fn an_older_event_log_gets_the_result_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let old = SCHEMA.replace(
            "    line TEXT NOT NULL,\n    result TEXT,\n    answered_by TEXT\n",
            "    line TEXT NOT NULL\n",
        );
        assert_ne!(old, SCHEMA);
        let connection = Connection::open(&path).unwrap();
        connection
            .execute_batch(&format!("{old} PRAGMA user_version = 2;"))
            .unwrap();
        connection
            .execute_batch("INSERT INTO events (time_ms, session, call_id, tool, via_bridge, arguments, status, duration_ms, detail, line) VALUES (1, 's', 1, 'echo', 0, '{}', 'ok', 1, NULL, 'echo  ok  1 ms')")
            .unwrap();
        drop(connection);
        let store = Store::open(&path).unwrap();
        let mut record = store.events(None, 0, 10).unwrap().remove(0);
        assert_eq!(
            (record.result.clone(), record.answered_by.clone()),
            (None, None)
        );
        record.result = Some(serde_json::json!("done"));
        store.record_event(&record).unwrap();
        assert_eq!(
            store.events(None, 1, 10).unwrap()[0].result,
            Some(serde_json::json!("done"))
        );
        drop(store);
        // Opening it again finds the columns there.
        Store::open(&path).unwrap();
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        assert!(matches!(
            Store::open(&path),
            Err(StoreError::NewerSchema { .. })
        ));
    }

    #[test]
    fn many_openers_of_a_fresh_database_all_succeed() {
        // CLI commands and a daemon open the same state database at the
        // same moment (a fresh HOME): none may fail with "locked".
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("q.db");
            let openers: Vec<_> = (0..8)
                .map(|_| {
                    let path = path.clone();
                    std::thread::spawn(move || Store::open(&path).map(|_| ()))
                })
                .collect();
            for opener in openers {
                let opened = opener.join().unwrap();
                assert!(opened.is_ok(), "round {round}: {opened:?}");
            }
        }
    }
}
