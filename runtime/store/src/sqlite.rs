//! The embedded backend: `quiver.db` in the state directory, in SQLite.
//!
//! Every write is one short transaction on a single connection (WAL
//! journal, so readers in other processes, e.g. `quiver status`, never
//! block the daemon). Calls are synchronous and take well under a
//! millisecond; the async contract runs them in place. Beside the file, in
//! the same directory: a turn lock per session (`turns/`, an advisory
//! lock that goes with its process) and each OAuth server's credentials
//! (`oauth/NAME.json`, mode 0600, replaced atomically), so that
//! `quiver mcp login` in another process is seen at once. Notices go to
//! this process only: one daemon owns the file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params, params_from_iter};
use serde_json::Value;

use quiver_model::Message;
use quiver_tool::integrity::{Pin, PinStore, PinStoreError};

use crate::copy::{Column, Table};
use crate::notices::{Notice, NoticeBus};
use crate::records::{
    AnswerOutcome, ApprovalAnswer, ApprovalRecord, ApprovalState, EventRecord, ExpiredInstance,
    GatewayClient, InstanceRecord, NewApproval, SavingsSample, SessionKind, SessionRecord,
    StoredMessage, duration_ms, now_ms, parse_status, status_text,
};
use crate::{Backend, Store, StoreError, TurnClaim};

/// The schema version this code writes (`PRAGMA user_version`): 2 added
/// `tool_pins`, 3 the events' `result` and `answered_by`, 4 the events'
/// `instance` and the `approvals`, `instances` and `savings` tables
/// (columns added to an older database when it is opened).
pub const SCHEMA_VERSION: i64 = 4;

/// The directory of the turn lock files, beside the database.
pub const TURNS_DIR: &str = "turns";

/// The directory of the OAuth credential files, beside the database.
pub const OAUTH_DIR: &str = "oauth";

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
    answered_by TEXT,
    instance TEXT
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
CREATE TABLE IF NOT EXISTS approvals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    instance TEXT NOT NULL,
    session TEXT NOT NULL,
    call_id INTEGER NOT NULL,
    tool TEXT NOT NULL,
    via_bridge INTEGER NOT NULL,
    arguments TEXT NOT NULL,
    digest TEXT NOT NULL,
    requested_ms INTEGER NOT NULL,
    state TEXT NOT NULL,
    decision TEXT,
    reason TEXT,
    answered_by TEXT,
    closed_ms INTEGER
);
CREATE INDEX IF NOT EXISTS approvals_by_state ON approvals (state, id);
CREATE TABLE IF NOT EXISTS instances (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    version TEXT NOT NULL,
    listen TEXT,
    started_ms INTEGER NOT NULL,
    heartbeat_ms INTEGER NOT NULL,
    stopped_ms INTEGER,
    stop_reason TEXT
);
CREATE TABLE IF NOT EXISTS savings (
    instance TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    point TEXT NOT NULL,
    PRIMARY KEY (instance, time_ms)
);
";

/// Columns later schemas added to `events`, each added to an older
/// database when it is opened.
const ADDED_EVENT_COLUMNS: &[&str] = &["result", "answered_by", "instance"];

/// How long [`SqliteStore::open`] keeps trying a database another process
/// is opening or writing.
pub const OPEN_BUSY_PATIENCE: Duration = Duration::from_secs(10);

/// Whether `error` is SQLite's "try again later".
fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// The connection and where it is, shared with the pin store.
#[derive(Debug)]
struct Inner {
    connection: Mutex<Connection>,
    path: PathBuf,
    notices: NoticeBus,
}

impl Inner {
    fn location(&self) -> String {
        self.path.display().to_string()
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
            location: self.location(),
            what,
            source: Box::new(source),
        })
    }

    /// Every row `sql` answers for `params`, each made by `row`.
    fn all_rows<T>(
        &self,
        what: &'static str,
        sql: &str,
        params: impl rusqlite::Params,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, StoreError> {
        self.with(what, |c| {
            let mut statement = c.prepare(sql)?;
            let rows = statement.query_map(params, row)?;
            rows.collect()
        })
    }

    /// The directory beside the database (the state directory).
    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }
}

/// The state database in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`.
    ///
    /// Several processes may open one state database at the same moment
    /// (a daemon starting while `quiver status` or `catalog assemble` runs,
    /// all on a fresh HOME). SQLite answers some of those races with
    /// `SQLITE_BUSY` without calling the busy handler (switching a new file
    /// to WAL, recovering a WAL another opener just created), so a busy
    /// open is tried again, for up to [`OPEN_BUSY_PATIENCE`].
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let deadline = std::time::Instant::now() + OPEN_BUSY_PATIENCE;
        let mut pause = Duration::from_millis(5);
        loop {
            match SqliteStore::open_once(path) {
                Err(Opening::Sqlite(source))
                    if is_busy(&source) && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(Opening::Sqlite(source)) => {
                    return Err(StoreError::Open {
                        location: path.display().to_string(),
                        source: Box::new(source),
                    });
                }
                Err(Opening::Store(error)) => return Err(error),
                Ok(store) => return Ok(store),
            }
        }
    }

    fn open_once(path: &Path) -> Result<SqliteStore, Opening> {
        // Sessions and the activity log are private: the file is made
        // 0600 before SQLite opens it (its -wal and -shm files take the
        // database's mode), and set again in case it existed.
        restrict_to_owner(path, true)?;
        let connection = Connection::open(path)?;
        connection.busy_timeout(Duration::from_secs(5))?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "NORMAL")?;
        for suffix in ["-wal", "-shm"] {
            let mut companion = path.as_os_str().to_owned();
            companion.push(suffix);
            restrict_to_owner(Path::new(&companion), false)?;
        }
        let found: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
        if found > SCHEMA_VERSION {
            return Err(Opening::Store(StoreError::NewerSchema {
                location: path.display().to_string(),
                found,
                known: SCHEMA_VERSION,
            }));
        }
        // One write transaction, taken through the busy handler, so that
        // two openers creating the tables never interleave.
        connection
            .execute_batch(&format!("BEGIN IMMEDIATE; {SCHEMA}"))
            .and_then(|()| add_event_columns(&connection))
            .and_then(|()| {
                connection
                    .execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))
            })?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                connection: Mutex::new(connection),
                path: path.to_path_buf(),
                notices: NoticeBus::default(),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn with<T>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        self.inner.with(what, f)
    }

    /// Every row `sql` answers for `params`, each made by `row`.
    fn all_rows<T>(
        &self,
        what: &'static str,
        sql: &str,
        params: impl rusqlite::Params,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, StoreError> {
        self.inner.all_rows(what, sql, params, row)
    }

    fn notify(&self, notice: Notice) {
        self.inner.notices.send(notice);
    }

    fn credential_file(&self, server: &str) -> PathBuf {
        self.inner
            .dir()
            .join(OAUTH_DIR)
            .join(format!("{server}.json"))
    }

    fn read_approval(&self, id: i64) -> Result<Option<ApprovalRecord>, StoreError> {
        let row = self.with("reading an approval", |c| {
            c.query_row(
                &format!("{APPROVAL_COLUMNS} WHERE id = ?1"),
                params![id],
                raw_approval,
            )
            .optional()
        })?;
        row.map(RawApproval::into_record).transpose()
    }

    /// Abandons `instance`'s pending approvals with `reason`; their ids.
    fn abandon(
        connection: &rusqlite::Transaction<'_>,
        instance: &str,
        reason: &str,
    ) -> rusqlite::Result<Vec<i64>> {
        let mut statement = connection.prepare(
            "UPDATE approvals SET state = 'abandoned', reason = ?2, closed_ms = ?3
             WHERE instance = ?1 AND state = 'pending' RETURNING id",
        )?;
        let rows = statement.query_map(params![instance, reason, now_ms()], |row| row.get(0))?;
        let mut ids = rows.collect::<rusqlite::Result<Vec<i64>>>()?;
        ids.sort_unstable();
        Ok(ids)
    }

    fn notify_abandoned(&self, instance: &str, ids: &[i64]) {
        for id in ids {
            self.notify(Notice::ApprovalClosed {
                id: *id,
                instance: instance.to_owned(),
                state: ApprovalState::Abandoned,
            });
        }
    }
}

/// Why one attempt to open failed: SQLite's error (busy ones are tried
/// again) or one of ours.
enum Opening {
    Sqlite(rusqlite::Error),
    Store(StoreError),
}

impl From<rusqlite::Error> for Opening {
    fn from(error: rusqlite::Error) -> Self {
        Opening::Sqlite(error)
    }
}

impl From<StoreError> for Opening {
    fn from(error: StoreError) -> Self {
        Opening::Store(error)
    }
}

/// Adds the events' columns of later schemas to a database made before
/// them (inside the opening transaction, so two openers never both add
/// them).
fn add_event_columns(connection: &Connection) -> rusqlite::Result<()> {
    let mut statement = connection.prepare("SELECT name FROM pragma_table_info('events')")?;
    let columns = statement
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for column in ADDED_EVENT_COLUMNS {
        if !columns.iter().any(|c| c == column) {
            connection.execute_batch(&format!("ALTER TABLE events ADD COLUMN {column} TEXT"))?;
        }
    }
    Ok(())
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn location(&self) -> String {
        self.inner.location()
    }

    fn is_shared(&self) -> bool {
        false
    }

    fn notices(&self) -> tokio::sync::broadcast::Receiver<Notice> {
        self.inner.notices.subscribe()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.with("checking the database", |c| {
            c.query_row("SELECT 1", [], |_| Ok(()))
        })
    }

    fn pin_store(&self) -> Arc<dyn PinStore> {
        Arc::new(SqlitePins {
            inner: self.inner.clone(),
        })
    }

    async fn flush_pins(&self) -> Result<(), StoreError> {
        // Each pin write is durable when `put_pins` returns.
        Ok(())
    }

    async fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
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
        self.notify(Notice::Session {
            id: session.id.clone(),
        });
        Ok(())
    }

    async fn set_session_grants(&self, id: &str, grants: &[String]) -> Result<bool, StoreError> {
        let grants = json_text(grants);
        let updated = self.with("updating a session's grant", |c| {
            c.execute(
                "UPDATE sessions SET grants = ?2 WHERE id = ?1",
                params![id, grants],
            )
        })?;
        self.notify(Notice::Session { id: id.to_owned() });
        Ok(updated > 0)
    }

    async fn set_session_model(
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
        self.notify(Notice::Session { id: id.to_owned() });
        Ok(updated > 0)
    }

    async fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        let removed = self.with("deleting a session", |c| {
            let transaction = c.transaction()?;
            transaction.execute("DELETE FROM messages WHERE session = ?1", params![id])?;
            let removed = transaction.execute("DELETE FROM sessions WHERE id = ?1", params![id])?;
            transaction.commit()?;
            Ok(removed)
        })?;
        self.notify(Notice::Session { id: id.to_owned() });
        Ok(removed > 0)
    }

    async fn subagents(&self, id: &str) -> Result<Vec<String>, StoreError> {
        self.all_rows(
            "listing subagents",
            "SELECT id FROM sessions WHERE parent = ?1 ORDER BY id",
            params![id],
            |row| row.get(0),
        )
    }

    async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
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

    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let rows = self.all_rows(
            "listing sessions",
            &format!("{SESSION_COLUMNS} ORDER BY s.created_ms, s.id"),
            [],
            raw_session,
        )?;
        rows.into_iter().map(RawSession::into_record).collect()
    }

    async fn append_message(&self, session: &str, message: &Message) -> Result<u64, StoreError> {
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

    async fn messages(&self, session: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = self.all_rows(
            "reading messages",
            "SELECT seq, created_ms, body FROM messages WHERE session = ?1 ORDER BY seq",
            params![session],
            |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, String>(2)?,
                ))
            },
        )?;
        rows.into_iter()
            .map(|(seq, created_ms, body)| stored_message(session, seq, created_ms, &body))
            .collect()
    }

    async fn claim_turn(
        &self,
        session: &str,
        _instance: &str,
    ) -> Result<Option<TurnClaim>, StoreError> {
        let path = turn_lock_path(self.inner.dir(), session);
        match crate::lock_file::try_lock_path(&path) {
            Ok(held) => Ok(held.map(|lock| TurnClaim::new(crate::Held(lock)))),
            Err(source) => Err(StoreError::Query {
                location: path.display().to_string(),
                what: "taking the session's turn lock",
                source: Box::new(source),
            }),
        }
    }

    async fn record_event(&self, event: &EventRecord) -> Result<i64, StoreError> {
        let arguments = event.arguments.to_string();
        let result = event.result.as_ref().map(Value::to_string);
        let status = status_text(event.status);
        let id = self.with("storing an event", |c| {
            c.execute(
                "INSERT INTO events (time_ms, instance, session, call_id, tool, via_bridge, arguments, status, duration_ms, detail, line, result, answered_by)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    event.time_ms,
                    event.instance,
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
        })?;
        self.notify(Notice::Event { id });
        Ok(id)
    }

    async fn last_event_id(&self) -> Result<i64, StoreError> {
        self.with("reading the last event id", |c| {
            c.query_row("SELECT COALESCE(MAX(id), 0) FROM events", [], |row| {
                row.get(0)
            })
        })
    }

    async fn events(
        &self,
        session: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.all_rows("reading events", &format!(
                "{EVENT_COLUMNS} WHERE id > ?1 AND (?2 IS NULL OR session = ?2) ORDER BY id LIMIT ?3"
            ), params![after, session, limit], raw_event)?;
        rows.into_iter().map(RawEvent::into_record).collect()
    }

    async fn add_gateway_client(
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

    async fn gateway_client_by_token(
        &self,
        token_sha256: &str,
    ) -> Result<Option<GatewayClient>, StoreError> {
        let row = self.with("reading a gateway client", |c| {
            c.query_row(
                "SELECT name, grants, created_ms FROM gateway_clients WHERE token_sha256 = ?1",
                params![token_sha256],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
        })?;
        row.map(|(name, grants, created_ms): (String, String, i64)| {
            Ok(GatewayClient {
                name,
                grants: parse_grants(&grants)?,
                created_ms,
            })
        })
        .transpose()
    }

    async fn gateway_clients(&self) -> Result<Vec<GatewayClient>, StoreError> {
        let rows = self.all_rows(
            "listing gateway clients",
            "SELECT name, grants, created_ms FROM gateway_clients ORDER BY name",
            [],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                ))
            },
        )?;
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

    async fn remove_gateway_client(&self, name: &str) -> Result<bool, StoreError> {
        let removed = self.with("removing a gateway client", |c| {
            c.execute("DELETE FROM gateway_clients WHERE name = ?1", params![name])
        })?;
        Ok(removed > 0)
    }

    async fn request_approval(&self, request: &NewApproval) -> Result<ApprovalRecord, StoreError> {
        let requested_ms = now_ms();
        let id = self.with("storing an approval request", |c| {
            c.execute(
                "INSERT INTO approvals (instance, session, call_id, tool, via_bridge, arguments, digest, requested_ms, state)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending')",
                params![
                    request.instance,
                    request.session,
                    clamp_i64(request.call_id),
                    request.tool,
                    request.via_bridge,
                    request.arguments.to_string(),
                    request.digest,
                    requested_ms
                ],
            )?;
            Ok(c.last_insert_rowid())
        })?;
        self.notify(Notice::ApprovalRequested {
            id,
            instance: request.instance.clone(),
        });
        Ok(ApprovalRecord {
            id,
            instance: request.instance.clone(),
            session: request.session.clone(),
            call_id: request.call_id,
            tool: request.tool.clone(),
            via_bridge: request.via_bridge,
            arguments: request.arguments.clone(),
            digest: request.digest.clone(),
            requested_ms,
            state: ApprovalState::Pending,
            decision: None,
            reason: None,
            answered_by: None,
            closed_ms: None,
        })
    }

    async fn answer_approval(
        &self,
        id: i64,
        answer: &ApprovalAnswer,
    ) -> Result<AnswerOutcome, StoreError> {
        let updated = self.with("answering an approval", |c| {
            c.execute(
                "UPDATE approvals SET state = 'answered', decision = ?2, reason = ?3, answered_by = ?4, closed_ms = ?5
                 WHERE id = ?1 AND state = 'pending' AND (?6 IS NULL OR digest = ?6)",
                params![
                    id,
                    answer.decision,
                    answer.reason,
                    answer.answered_by,
                    now_ms(),
                    answer.digest
                ],
            )
        })?;
        let Some(record) = self.read_approval(id)? else {
            return Ok(AnswerOutcome::Unknown);
        };
        if updated == 0 {
            return Ok(match record.state {
                ApprovalState::Pending => AnswerOutcome::DigestMismatch {
                    expected: record.digest,
                },
                _ => AnswerOutcome::Closed(record),
            });
        }
        self.notify(Notice::ApprovalClosed {
            id,
            instance: record.instance.clone(),
            state: ApprovalState::Answered,
        });
        Ok(AnswerOutcome::Answered(record))
    }

    async fn withdraw_approval(&self, id: i64, reason: &str) -> Result<bool, StoreError> {
        let instance: Option<String> = self.with("withdrawing an approval", |c| {
            c.query_row(
                "UPDATE approvals SET state = 'withdrawn', reason = ?2, closed_ms = ?3
                 WHERE id = ?1 AND state = 'pending' RETURNING instance",
                params![id, reason, now_ms()],
                |row| row.get(0),
            )
            .optional()
        })?;
        let Some(instance) = instance else {
            return Ok(false);
        };
        self.notify(Notice::ApprovalClosed {
            id,
            instance,
            state: ApprovalState::Withdrawn,
        });
        Ok(true)
    }

    async fn approval(&self, id: i64) -> Result<Option<ApprovalRecord>, StoreError> {
        self.read_approval(id)
    }

    async fn pending_approvals(
        &self,
        session: Option<&str>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let rows = self.all_rows("listing pending approvals", &format!(
                "{APPROVAL_COLUMNS} WHERE state = 'pending' AND (?1 IS NULL OR session = ?1) ORDER BY id"
            ), params![session], raw_approval)?;
        rows.into_iter().map(RawApproval::into_record).collect()
    }

    async fn closed_approvals(
        &self,
        session: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.all_rows(
            "listing answered approvals",
            &format!(
                "{APPROVAL_COLUMNS} WHERE state <> 'pending' AND (?1 IS NULL OR session = ?1)
                 ORDER BY closed_ms DESC, id DESC LIMIT ?2"
            ),
            params![session, limit],
            raw_approval,
        )?;
        rows.into_iter().map(RawApproval::into_record).collect()
    }

    async fn register_instance(&self, instance: &InstanceRecord) -> Result<Vec<i64>, StoreError> {
        let now = now_ms();
        let abandoned = self.with("registering the instance", |c| {
            let transaction = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let abandoned = SqliteStore::abandon(
                &transaction,
                &instance.id,
                &format!(
                    "instance {} restarted before anyone answered",
                    instance.id
                ),
            )?;
            transaction.execute(
                "INSERT OR REPLACE INTO instances (id, host, pid, version, listen, started_ms, heartbeat_ms, stopped_ms, stop_reason)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, NULL, NULL)",
                params![
                    instance.id,
                    instance.host,
                    instance.pid,
                    instance.version,
                    instance.listen,
                    now
                ],
            )?;
            transaction.commit()?;
            Ok(abandoned)
        })?;
        self.notify_abandoned(&instance.id, &abandoned);
        self.notify(Notice::Instance {
            id: instance.id.clone(),
        });
        Ok(abandoned)
    }

    async fn renew_lease(&self, id: &str) -> Result<bool, StoreError> {
        let renewed = self.with("renewing the instance's lease", |c| {
            c.execute(
                "UPDATE instances SET heartbeat_ms = ?2 WHERE id = ?1 AND stopped_ms IS NULL",
                params![id, now_ms()],
            )
        })?;
        Ok(renewed > 0)
    }

    async fn expire_leases(&self, lease: Duration) -> Result<Vec<ExpiredInstance>, StoreError> {
        let now = now_ms();
        let cutoff = now.saturating_sub(duration_ms(lease));
        let expired = self.with("expiring leases", |c| {
            let transaction = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let stale: Vec<(String, i64)> = {
                let mut statement = transaction.prepare(
                    "SELECT id, heartbeat_ms FROM instances WHERE stopped_ms IS NULL AND heartbeat_ms < ?1 ORDER BY id",
                )?;
                let rows = statement.query_map(params![cutoff], |row| Ok((row.get(0)?, row.get(1)?)))?;
                rows.collect::<rusqlite::Result<Vec<_>>>()?
            };
            let mut expired = Vec::new();
            for (id, heartbeat) in stale {
                let reason = lease_expired_reason(&id, now - heartbeat);
                let abandoned = SqliteStore::abandon(&transaction, &id, &reason)?;
                transaction.execute(
                    "UPDATE instances SET stopped_ms = ?2, stop_reason = ?3 WHERE id = ?1",
                    params![id, now, reason],
                )?;
                expired.push(ExpiredInstance { id, abandoned });
            }
            transaction.commit()?;
            Ok(expired)
        })?;
        for instance in &expired {
            self.notify_abandoned(&instance.id, &instance.abandoned);
            self.notify(Notice::Instance {
                id: instance.id.clone(),
            });
        }
        Ok(expired)
    }

    async fn stop_instance(&self, id: &str, reason: &str) -> Result<(), StoreError> {
        let abandoned = self.with("recording the instance's stop", |c| {
            let transaction = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let abandoned = SqliteStore::abandon(
                &transaction,
                id,
                &format!("instance {id} stopped before anyone answered ({reason})"),
            )?;
            transaction.execute(
                "UPDATE instances SET stopped_ms = ?2, stop_reason = ?3 WHERE id = ?1 AND stopped_ms IS NULL",
                params![id, now_ms(), reason],
            )?;
            transaction.commit()?;
            Ok(abandoned)
        })?;
        self.notify_abandoned(id, &abandoned);
        self.notify(Notice::Instance { id: id.to_owned() });
        Ok(())
    }

    async fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError> {
        self.all_rows("listing instances", "SELECT id, host, pid, version, listen, started_ms, heartbeat_ms, stopped_ms, stop_reason
                 FROM instances ORDER BY stopped_ms IS NOT NULL, started_ms, id", [], |row| {
                Ok(InstanceRecord {
                    id: row.get(0)?,
                    host: row.get(1)?,
                    pid: row.get(2)?,
                    version: row.get(3)?,
                    listen: row.get(4)?,
                    started_ms: row.get(5)?,
                    heartbeat_ms: row.get(6)?,
                    stopped_ms: row.get(7)?,
                    stop_reason: row.get(8)?,
                })
            })
    }

    async fn credentials(&self, server: &str) -> Result<Option<(Value, i64)>, StoreError> {
        let path = self.credential_file(server);
        credential_files::load(&path)
    }

    async fn save_credentials(&self, server: &str, credentials: &Value) -> Result<(), StoreError> {
        credential_files::save(&self.credential_file(server), credentials)?;
        self.notify(Notice::Credentials {
            server: server.to_owned(),
        });
        Ok(())
    }

    async fn clear_credentials(&self, server: &str) -> Result<bool, StoreError> {
        let removed = credential_files::remove(&self.credential_file(server))?;
        self.notify(Notice::Credentials {
            server: server.to_owned(),
        });
        Ok(removed)
    }

    async fn record_savings(&self, sample: &SavingsSample) -> Result<(), StoreError> {
        self.with("storing a savings sample", |c| {
            c.execute(
                "INSERT OR REPLACE INTO savings (instance, time_ms, point) VALUES (?1, ?2, ?3)",
                params![sample.instance, sample.time_ms, sample.point.to_string()],
            )
        })?;
        Ok(())
    }

    async fn latest_savings(&self) -> Result<Vec<SavingsSample>, StoreError> {
        let rows = self.all_rows("reading savings", "SELECT s.instance, s.time_ms, s.point FROM savings s
                 WHERE s.time_ms = (SELECT MAX(time_ms) FROM savings t WHERE t.instance = s.instance)
                 ORDER BY s.instance", [], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, String>(2)?,
                ))
            })?;
        rows.into_iter()
            .map(|(instance, time_ms, point)| {
                Ok(SavingsSample {
                    point: serde_json::from_str(&point).map_err(|e| StoreError::Corrupt {
                        what: "savings sample",
                        detail: format!("instance `{instance}`: {e}"),
                    })?,
                    instance,
                    time_ms,
                })
            })
            .collect()
    }

    async fn export_rows(&self, table: &str) -> Result<Vec<Value>, StoreError> {
        let table = crate::copy::table(table)?;
        if table.name == "credentials" {
            return credential_files::export(&self.inner.dir().join(OAUTH_DIR));
        }
        self.all_rows(
            "exporting a table",
            &format!(
                "SELECT {} FROM {} ORDER BY {}",
                table.column_list(),
                table.name,
                table.order
            ),
            [],
            |row| export_row(table, row),
        )
    }

    async fn import_rows(&self, table: &str, rows: &[Value]) -> Result<(), StoreError> {
        let table = crate::copy::table(table)?;
        if table.name == "credentials" {
            for row in rows {
                let server = crate::copy::cell(row, "server", Column::Text)?;
                let text = crate::copy::cell(row, "credentials", Column::Text)?;
                let credentials: Value = serde_json::from_str(text.as_str().unwrap_or_default())
                    .map_err(|e| StoreError::Corrupt {
                        what: "credentials to import",
                        detail: e.to_string(),
                    })?;
                credential_files::save(
                    &self.credential_file(server.as_str().unwrap_or_default()),
                    &credentials,
                )?;
            }
            return Ok(());
        }
        let mut values = Vec::with_capacity(rows.len());
        for row in rows {
            let mut cells = Vec::with_capacity(table.columns.len());
            for (name, column) in table.columns {
                cells.push(Cell(crate::copy::cell(row, name, *column)?.clone()));
            }
            values.push(cells);
        }
        let placeholders = (1..=table.columns.len())
            .map(|n| format!("?{n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({placeholders})",
            table.name,
            table.column_list()
        );
        self.with("importing a table", |c| {
            let transaction = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut statement = transaction.prepare(&sql)?;
                for cells in &values {
                    statement.execute(params_from_iter(cells.iter()))?;
                }
            }
            transaction.commit()
        })
    }
}

/// One exported value as a SQLite parameter.
struct Cell(Value);

impl rusqlite::ToSql for Cell {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match &self.0 {
            Value::Null => ToSqlOutput::Owned(rusqlite::types::Value::Null),
            Value::Bool(b) => ToSqlOutput::Owned(rusqlite::types::Value::Integer(i64::from(*b))),
            Value::Number(n) => {
                ToSqlOutput::Owned(rusqlite::types::Value::Integer(n.as_i64().unwrap_or(0)))
            }
            Value::String(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            other => ToSqlOutput::Owned(rusqlite::types::Value::Text(other.to_string())),
        })
    }
}

/// A row of `table` as exported: its columns by name, typed.
fn export_row(table: &Table, row: &rusqlite::Row<'_>) -> rusqlite::Result<Value> {
    let mut object = serde_json::Map::new();
    for (index, (name, column)) in table.columns.iter().enumerate() {
        let value = match column {
            Column::Text => Value::from(row.get::<_, String>(index)?),
            Column::OptText => row
                .get::<_, Option<String>>(index)?
                .map_or(Value::Null, Value::from),
            Column::Int => Value::from(row.get::<_, i64>(index)?),
            Column::OptInt => row
                .get::<_, Option<i64>>(index)?
                .map_or(Value::Null, Value::from),
            Column::Bool => Value::from(row.get::<_, bool>(index)?),
        };
        object.insert((*name).to_owned(), value);
    }
    Ok(Value::Object(object))
}

/// The reason an instance's abandoned approvals and its record give when
/// its lease ran out.
pub(crate) fn lease_expired_reason(instance: &str, silent_ms: i64) -> String {
    format!(
        "instance {instance} stopped renewing its lease ({} s without a heartbeat): it was killed or lost the store",
        silent_ms / 1000
    )
}

/// The lock file of `session`'s turns under `dir`: named by a digest of
/// the id, so any id makes a plain file name.
pub fn turn_lock_path(dir: &Path, session: &str) -> PathBuf {
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(session.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    dir.join(TURNS_DIR).join(format!("{digest}.lock"))
}

/// The accepted tool definitions in the database, read and written in
/// place (synchronously) by the MCP host.
#[derive(Debug)]
struct SqlitePins {
    inner: Arc<Inner>,
}

impl PinStore for SqlitePins {
    fn pins(&self, source: &str) -> Result<Vec<Pin>, PinStoreError> {
        let rows = self
            .inner.all_rows("reading accepted tool definitions", "SELECT tool, hash, shape, definition, accepted_ms, accepted_by FROM tool_pins WHERE source = ?1 ORDER BY tool", params![source], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, i64>(4)?,
                        row.get::<_, String>(5)?,
                    ))
                })
            .map_err(|e| PinStoreError(e.to_string()))?;
        rows.into_iter()
            .map(
                |(tool, hash, shape, definition, accepted_ms, accepted_by)| {
                    pin_from_row(
                        &self.inner.location(),
                        source,
                        tool,
                        hash,
                        shape,
                        &definition,
                        accepted_ms,
                        accepted_by,
                    )
                },
            )
            .collect()
    }

    fn put_pins(&self, source: &str, pins: &[Pin]) -> Result<(), PinStoreError> {
        self.inner
            .with("storing accepted tool definitions", |c| {
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
            .map_err(|e| PinStoreError(e.to_string()))?;
        self.inner.notices.send(Notice::Pins {
            source: source.to_owned(),
        });
        Ok(())
    }
}

/// A pin read back from its columns; an unreadable definition names the
/// store, tool and source.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pin_from_row(
    location: &str,
    source: &str,
    tool: String,
    hash: String,
    shape: String,
    definition: &str,
    accepted_ms: i64,
    accepted_by: String,
) -> Result<Pin, PinStoreError> {
    let definition = serde_json::from_str(definition).map_err(|e| {
        PinStoreError(format!(
            "{location}: the accepted definition of `{tool}` ({source}) is unreadable: {e}"
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
}

const SESSION_COLUMNS: &str =
    "SELECT s.id, s.kind, s.parent, s.grants, s.model, s.context_tokens, s.created_ms,
    (SELECT COUNT(*) FROM messages m WHERE m.session = s.id) FROM sessions s";

/// A session's columns as read, before their text is parsed (shared with
/// the PostgreSQL backend).
pub(crate) struct RawSession {
    pub(crate) id: String,
    pub(crate) kind: String,
    pub(crate) parent: Option<String>,
    pub(crate) grants: String,
    pub(crate) model: Option<String>,
    pub(crate) context_tokens: i64,
    pub(crate) created_ms: i64,
    pub(crate) messages: i64,
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
    pub(crate) fn into_record(self) -> Result<SessionRecord, StoreError> {
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

/// A stored message read back.
pub(crate) fn stored_message(
    session: &str,
    seq: i64,
    created_ms: i64,
    body: &str,
) -> Result<StoredMessage, StoreError> {
    let message = serde_json::from_str(body).map_err(|e| StoreError::Corrupt {
        what: "message",
        detail: format!("session `{session}` message {seq}: {e}"),
    })?;
    Ok(StoredMessage {
        seq: u64::try_from(seq).unwrap_or(0),
        created_ms,
        message,
    })
}

const EVENT_COLUMNS: &str = "SELECT id, time_ms, instance, session, call_id, tool, via_bridge, arguments, status, duration_ms, detail, line, result, answered_by FROM events";

/// An event's columns as read (shared with the PostgreSQL backend).
pub(crate) struct RawEvent {
    pub(crate) id: i64,
    pub(crate) time_ms: i64,
    pub(crate) instance: Option<String>,
    pub(crate) session: String,
    pub(crate) call_id: i64,
    pub(crate) tool: String,
    pub(crate) via_bridge: bool,
    pub(crate) arguments: String,
    pub(crate) status: String,
    pub(crate) duration_ms: i64,
    pub(crate) detail: Option<String>,
    pub(crate) line: String,
    pub(crate) result: Option<String>,
    pub(crate) answered_by: Option<String>,
}

fn raw_event(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawEvent> {
    Ok(RawEvent {
        id: row.get(0)?,
        time_ms: row.get(1)?,
        instance: row.get(2)?,
        session: row.get(3)?,
        call_id: row.get(4)?,
        tool: row.get(5)?,
        via_bridge: row.get(6)?,
        arguments: row.get(7)?,
        status: row.get(8)?,
        duration_ms: row.get(9)?,
        detail: row.get(10)?,
        line: row.get(11)?,
        result: row.get(12)?,
        answered_by: row.get(13)?,
    })
}

impl RawEvent {
    pub(crate) fn into_record(self) -> Result<EventRecord, StoreError> {
        let id = self.id;
        let result = self
            .result
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|e| StoreError::Corrupt {
                what: "event result",
                detail: format!("event {id}: {e}"),
            })?;
        Ok(EventRecord {
            id,
            time_ms: self.time_ms,
            instance: self.instance,
            session: self.session,
            call_id: u64::try_from(self.call_id).unwrap_or(0),
            tool: self.tool,
            via_bridge: self.via_bridge,
            arguments: serde_json::from_str(&self.arguments).map_err(|e| StoreError::Corrupt {
                what: "event arguments",
                detail: format!("event {id}: {e}"),
            })?,
            status: parse_status(&self.status)?,
            duration_ms: u64::try_from(self.duration_ms).unwrap_or(0),
            detail: self.detail,
            result,
            answered_by: self.answered_by,
            line: self.line,
        })
    }
}

const APPROVAL_COLUMNS: &str = "SELECT id, instance, session, call_id, tool, via_bridge, arguments, digest, requested_ms, state, decision, reason, answered_by, closed_ms FROM approvals";

/// An approval's columns as read (shared with the PostgreSQL backend).
pub(crate) struct RawApproval {
    pub(crate) id: i64,
    pub(crate) instance: String,
    pub(crate) session: String,
    pub(crate) call_id: i64,
    pub(crate) tool: String,
    pub(crate) via_bridge: bool,
    pub(crate) arguments: String,
    pub(crate) digest: String,
    pub(crate) requested_ms: i64,
    pub(crate) state: String,
    pub(crate) decision: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) answered_by: Option<String>,
    pub(crate) closed_ms: Option<i64>,
}

fn raw_approval(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawApproval> {
    Ok(RawApproval {
        id: row.get(0)?,
        instance: row.get(1)?,
        session: row.get(2)?,
        call_id: row.get(3)?,
        tool: row.get(4)?,
        via_bridge: row.get(5)?,
        arguments: row.get(6)?,
        digest: row.get(7)?,
        requested_ms: row.get(8)?,
        state: row.get(9)?,
        decision: row.get(10)?,
        reason: row.get(11)?,
        answered_by: row.get(12)?,
        closed_ms: row.get(13)?,
    })
}

impl RawApproval {
    pub(crate) fn into_record(self) -> Result<ApprovalRecord, StoreError> {
        let id = self.id;
        Ok(ApprovalRecord {
            id,
            state: ApprovalState::parse(&self.state)?,
            arguments: serde_json::from_str(&self.arguments).map_err(|e| StoreError::Corrupt {
                what: "approval arguments",
                detail: format!("approval {id}: {e}"),
            })?,
            instance: self.instance,
            session: self.session,
            call_id: u64::try_from(self.call_id).unwrap_or(0),
            tool: self.tool,
            via_bridge: self.via_bridge,
            digest: self.digest,
            requested_ms: self.requested_ms,
            decision: self.decision,
            reason: self.reason,
            answered_by: self.answered_by,
            closed_ms: self.closed_ms,
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

/// A grant list as stored (a JSON array).
pub(crate) fn json_text(grants: &[String]) -> String {
    Value::from(grants.to_vec()).to_string()
}

/// A stored grant list read back.
pub(crate) fn parse_grants(text: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        what: "grants",
        detail: format!("`{text}`: {e}"),
    })
}

/// `value` as a signed 64-bit column (saturating).
pub(crate) fn clamp_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// OAuth credentials as files in the state directory: `oauth/NAME.json`,
/// mode 0600 in a 0700 directory, replaced atomically (written beside it,
/// synced, renamed over it), so a reader sees the old tokens or the new
/// ones, never a part. No error carries a token.
pub(crate) mod credential_files {
    use super::*;

    /// Distinguishes the temporary files of concurrent saves in one process.
    static SAVES: AtomicU64 = AtomicU64::new(0);

    fn failed(path: &Path, what: &'static str, error: std::io::Error) -> StoreError {
        StoreError::Query {
            location: path.display().to_string(),
            what,
            source: Box::new(error),
        }
    }

    /// The credentials at `path` and when they were written (`None`: no
    /// file).
    pub(crate) fn load(path: &Path) -> Result<Option<(Value, i64)>, StoreError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(failed(path, "reading OAuth credentials", error)),
        };
        let modified = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .map(crate::records::millis)
            .unwrap_or(0);
        let credentials = serde_json::from_slice(&bytes).map_err(|error| StoreError::Corrupt {
            what: "OAuth credentials",
            detail: format!(
                "{} is not a token file (line {}, column {}); log in again",
                path.display(),
                error.line(),
                error.column()
            ),
        })?;
        Ok(Some((credentials, modified)))
    }

    /// Replaces the file at `path` with `credentials`.
    pub(crate) fn save(path: &Path, credentials: &Value) -> Result<(), StoreError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| failed(path, "making the OAuth credentials' directory", e))?;
        }
        let text = serde_json::to_vec_pretty(credentials)
            .map_err(|e| failed(path, "encoding OAuth credentials", std::io::Error::other(e)))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temporary = dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            SAVES.fetch_add(1, Ordering::Relaxed)
        ));
        let written =
            write_private(&temporary, &text).and_then(|()| std::fs::rename(&temporary, path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(failed(path, "writing OAuth credentials", error));
        }
        Ok(())
    }

    /// Removes the file at `path`; whether there was one.
    pub(crate) fn remove(path: &Path) -> Result<bool, StoreError> {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(failed(path, "removing OAuth credentials", error)),
        }
    }

    /// Every credential file under `dir`, by server name, as exported rows.
    pub(crate) fn export(dir: &Path) -> Result<Vec<Value>, StoreError> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(failed(dir, "listing OAuth credentials", error)),
        };
        let mut servers: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let server = name.strip_suffix(".json")?;
                (!server.starts_with('.')).then(|| server.to_owned())
            })
            .collect();
        servers.sort();
        let mut rows = Vec::new();
        for server in servers {
            if let Some((credentials, stored_ms)) = load(&dir.join(format!("{server}.json")))? {
                rows.push(serde_json::json!({
                    "server": server,
                    "credentials": credentials.to_string(),
                    "stored_ms": stored_ms,
                }));
            }
        }
        Ok(rows)
    }

    fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        file.write_all(bytes)?;
        file.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            kind: SessionKind::Chat,
            parent: None,
            grants: vec!["core".into()],
            model: None,
            context_tokens: 32_000,
            created_ms: now_ms(),
            messages: 0,
        }
    }

    #[tokio::test]
    async fn two_connections_appending_to_one_session_wait_for_each_other() {
        // Two handles on one file are two writers, as two processes are.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quiver.db");
        let first = SqliteStore::open(&path).unwrap();
        let second = SqliteStore::open(&path).unwrap();
        first.create_session(&session("a")).await.unwrap();
        let writers: Vec<_> = [first.clone(), second, first.clone()]
            .into_iter()
            .enumerate()
            .map(|(writer, store)| {
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    for n in 0..100 {
                        runtime
                            .block_on(
                                store.append_message("a", &Message::user(format!("{writer}-{n}"))),
                            )
                            .unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let positions: Vec<u64> = first
            .messages("a")
            .await
            .unwrap()
            .iter()
            .map(|m| m.seq)
            .collect();
        assert_eq!(positions, (1..=300).collect::<Vec<u64>>());
    }

    #[tokio::test]
    async fn an_older_event_log_gets_the_added_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let old = SCHEMA.replace(
            "    line TEXT NOT NULL,\n    result TEXT,\n    answered_by TEXT,\n    instance TEXT\n",
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
        let store = SqliteStore::open(&path).unwrap();
        let mut record = store.events(None, 0, 10).await.unwrap().remove(0);
        assert_eq!(
            (
                record.result.clone(),
                record.answered_by.clone(),
                record.instance.clone()
            ),
            (None, None, None)
        );
        record.result = Some(serde_json::json!("done"));
        record.instance = Some("a".into());
        store.record_event(&record).await.unwrap();
        let stored = store.events(None, 1, 10).await.unwrap().remove(0);
        assert_eq!(stored.result, Some(serde_json::json!("done")));
        assert_eq!(stored.instance.as_deref(), Some("a"));
        drop(store);
        // Opening it again finds the columns there.
        SqliteStore::open(&path).unwrap();
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let error = SqliteStore::open(&path).unwrap_err();
        assert!(
            matches!(error, StoreError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1),
            "{error}"
        );
        assert_eq!(error.code(), "store_schema_newer");
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
                    std::thread::spawn(move || SqliteStore::open(&path).map(|_| ()))
                })
                .collect();
            for opener in openers {
                let opened = opener.join().unwrap();
                assert!(opened.is_ok(), "round {round}: {opened:?}");
            }
        }
    }

    #[tokio::test]
    async fn credential_files_are_private_and_replaced_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("quiver.db")).unwrap();
        assert!(store.credentials("gh").await.unwrap().is_none());
        store
            .save_credentials("gh", &serde_json::json!({"access_token": "one"}))
            .await
            .unwrap();
        store
            .save_credentials("gh", &serde_json::json!({"access_token": "two"}))
            .await
            .unwrap();
        let (stored, _) = store.credentials("gh").await.unwrap().unwrap();
        assert_eq!(stored["access_token"], "two");
        let file = dir.path().join(OAUTH_DIR).join("gh.json");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&dir.path().join(OAUTH_DIR)), 0o700);
        let left = std::fs::read_dir(dir.path().join(OAUTH_DIR))
            .unwrap()
            .count();
        assert_eq!(left, 1, "no temporary file is left behind");
        std::fs::write(&file, "{not json").unwrap();
        let error = store.credentials("gh").await.unwrap_err().to_string();
        assert!(
            error.contains("gh.json") && error.contains("line 1"),
            "{error}"
        );
        assert!(!error.contains("not json"), "{error}");
        assert!(store.clear_credentials("gh").await.unwrap());
        assert!(!store.clear_credentials("gh").await.unwrap());
    }

    #[test]
    fn turn_lock_files_are_named_by_digest() {
        let dir = Path::new("/state");
        assert_ne!(turn_lock_path(dir, "a/../b"), turn_lock_path(dir, "a"));
        assert!(turn_lock_path(dir, "a").starts_with("/state/turns"));
    }
}
