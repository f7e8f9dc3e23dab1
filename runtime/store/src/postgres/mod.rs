//! The shared backend: a PostgreSQL database that every instance pointed
//! at it uses at once.
//!
//! - **Connections**: a pool (deadpool) of `store.pool_size` connections;
//!   one that the server closed is replaced on the next call, so calls fail
//!   with [`StoreError::Unavailable`] while the server is away and succeed
//!   again, without a restart, once it is back.
//! - **Schema**: versioned migrations (refinery) applied at connect under
//!   an advisory lock, so two instances starting together never race; a
//!   database migrated by a newer Quiver is [`StoreError::NewerSchema`].
//! - **Notices**: each write sends its [`Notice`] with `pg_notify` inside
//!   its transaction (delivered at commit, never for a rolled-back write);
//!   one more connection per instance `LISTEN`s and passes them on, made
//!   again when it drops ([`Notice::Resync`] then says some may be lost).
//! - **Order**: events are inserted under one transaction-scoped advisory
//!   lock, so their ids become visible in the order they grow (a reader
//!   that saw id N never later finds a smaller one).
//! - **Time**: leases and heartbeats use the server's clock, so instances
//!   on hosts whose clocks differ agree on who is gone.
//! - **Text**: PostgreSQL text cannot hold NUL; a NUL in a free-text
//!   column (a tool's error detail) is stored as U+FFFD. JSON is stored as
//!   text exactly as written (its NULs are escaped).

mod listener;
mod pins;

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

use quiver_model::Message;
use quiver_tool::integrity::PinStore;

use crate::copy::Column;
use crate::notices::{CHANNEL, Notice, NoticeBus};
use crate::records::{
    AnswerOutcome, ApprovalAnswer, ApprovalRecord, ApprovalState, EventRecord, ExpiredInstance,
    GatewayClient, InstanceRecord, NewApproval, SavingsSample, SessionRecord, StoredMessage,
    duration_ms, now_ms, status_text,
};
use crate::settings::StoreConfig;
use crate::sqlite::{
    RawApproval, RawEvent, RawSession, clamp_i64, json_text, lease_expired_reason, parse_grants,
    stored_message,
};
use crate::{Backend, Store, StoreError, TurnClaim};

/// The server's clock, in milliseconds since the Unix epoch.
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// The advisory lock key events are inserted under (any constant no other
/// program uses: "quiver.events").
const EVENTS_LOCK: i64 = 0x7175_6976_6572_0001;

/// The advisory lock key migrations run under.
const MIGRATIONS_LOCK: i64 = 0x7175_6976_6572_0002;

/// The table refinery records applied migrations in.
const MIGRATIONS_TABLE: &str = "quiver_schema_history";

/// The migrations, oldest first: `V<version>__<name>`.
const MIGRATIONS: &[(&str, &str)] = &[("V1__initial", include_str!("migrations/V1__initial.sql"))];

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// A PostgreSQL store.
pub struct PgStore {
    shared: Arc<Shared>,
    pins: Arc<pins::CachedPins>,
    listener: tokio::task::JoinHandle<()>,
}

/// What the store's handles and its background tasks share.
pub(crate) struct Shared {
    pub(crate) pool: Pool,
    pub(crate) location: String,
    pub(crate) notices: NoticeBus,
    pub(crate) lease: Duration,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("location", &self.shared.location)
            .finish_non_exhaustive()
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.listener.abort();
        self.pins.stop();
    }
}

/// `text` with each NUL (which PostgreSQL text cannot hold) as U+FFFD.
fn clean(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(text)
    }
}

fn clean_opt(text: Option<&str>) -> Option<Cow<'_, str>> {
    text.map(clean)
}

/// Whether `error` says the server could not be reached or went away
/// (rather than refusing the statement).
fn is_connection_error(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    if let Some(db) = error.as_db_error() {
        let code = db.code().code();
        return code.starts_with("08") || code.starts_with("57P");
    }
    std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>())
        || error.to_string().starts_with("error connecting")
}

impl Shared {
    /// A connection from the pool.
    pub(crate) async fn client(&self) -> Result<Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|error| StoreError::Unavailable {
                location: self.location.clone(),
                detail: pool_error(&error),
            })
    }

    /// `error` of a statement, as the contract says it.
    pub(crate) fn fail(&self, what: &'static str, error: tokio_postgres::Error) -> StoreError {
        if is_connection_error(&error) {
            StoreError::Unavailable {
                location: self.location.clone(),
                detail: format!("{what}: {}", one_line(&error)),
            }
        } else {
            StoreError::Query {
                location: self.location.clone(),
                what,
                // The driver's own text is `db error`: the server's
                // message and code say what was refused.
                source: one_line(&error).into(),
            }
        }
    }

    /// Sends `notice` inside the transaction (delivered at its commit).
    pub(crate) async fn notify(
        &self,
        transaction: &tokio_postgres::Transaction<'_>,
        notice: &Notice,
    ) -> Result<(), StoreError> {
        transaction
            .execute(
                "SELECT pg_notify($1, $2)",
                &[&CHANNEL, &NoticeBus::payload(notice)],
            )
            .await
            .map_err(|e| self.fail("sending a notice", e))?;
        Ok(())
    }
}

/// A pool error in one line, the server's own words kept.
fn pool_error(error: &deadpool_postgres::PoolError) -> String {
    match error {
        deadpool_postgres::PoolError::Backend(e) => one_line(e),
        deadpool_postgres::PoolError::Timeout(_) => {
            "no connection within store.connect_timeout_s (the server is slow or not answering)"
                .to_owned()
        }
        other => other.to_string(),
    }
}

/// A driver error with its cause, in one line.
fn one_line(error: &tokio_postgres::Error) -> String {
    let mut text = error.to_string();
    if let Some(db) = error.as_db_error() {
        text = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
    } else if let Some(source) = std::error::Error::source(error) {
        let cause = source.to_string();
        if !text.contains(&cause) {
            text = format!("{text}: {cause}");
        }
    }
    text.replace('\n', " ")
}

impl PgStore {
    /// Connects to the database of `config` (within
    /// `store.connect_timeout_s`), brings its schema up to date, reads the
    /// accepted tool definitions and starts listening for notices.
    pub async fn connect(config: &StoreConfig) -> Result<PgStore, StoreError> {
        let url = config.url.as_ref().ok_or(StoreError::Settings {
            key: "store.url",
            detail: "`store.backend: postgres` needs `store.url`".into(),
        })?;
        let location = format!("postgres {}", url.redacted());
        let mut pg: tokio_postgres::Config =
            url.expose()
                .parse()
                .map_err(|error: tokio_postgres::Error| StoreError::Settings {
                    key: "store.url",
                    detail: format!("`{}` is not a usable URL: {error}", url.redacted()),
                })?;
        pg.connect_timeout(config.connect_timeout);
        if pg.get_application_name().is_none() {
            pg.application_name("quiver");
        }
        let manager = Manager::from_config(
            pg.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size as usize)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(config.connect_timeout))
            .wait_timeout(Some(config.connect_timeout.max(Duration::from_secs(5))))
            .build()
            .map_err(|error| StoreError::Open {
                location: location.clone(),
                source: Box::new(error),
            })?;
        let shared = Arc::new(Shared {
            pool,
            location,
            notices: NoticeBus::default(),
            lease: config.lease,
        });
        migrate(&shared, &pg, config.connect_timeout).await?;
        let pins = pins::CachedPins::load(shared.clone()).await?;
        // Listening before the store is handed out: a notice of a write
        // made right after start is never missed.
        let (listening, listens) = tokio::sync::oneshot::channel();
        let listener = tokio::spawn(listener::listen(
            shared.clone(),
            pg,
            Arc::downgrade(&pins),
            listening,
        ));
        let outcome = tokio::time::timeout(config.connect_timeout, listens).await;
        let failed = match outcome {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(detail))) => Some(format!("cannot listen for notices: {detail}")),
            Ok(Err(_)) => Some("the notice listener stopped".to_owned()),
            Err(_) => Some(
                "the notice listener did not connect within store.connect_timeout_s".to_owned(),
            ),
        };
        if let Some(detail) = failed {
            listener.abort();
            pins.stop();
            return Err(StoreError::Unavailable {
                location: shared.location.clone(),
                detail,
            });
        }
        Ok(PgStore {
            shared,
            pins,
            listener,
        })
    }

    async fn client(&self) -> Result<Object, StoreError> {
        self.shared.client().await
    }

    fn fail(&self, what: &'static str, error: tokio_postgres::Error) -> StoreError {
        self.shared.fail(what, error)
    }

    /// One statement in a transaction that also sends `notice`; returns
    /// the rows it answered.
    async fn write(
        &self,
        what: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        notice: Option<Notice>,
    ) -> Result<Vec<Row>, StoreError> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        let rows = transaction
            .query(sql, params)
            .await
            .map_err(|e| self.fail(what, e))?;
        if let Some(notice) = notice {
            self.shared.notify(&transaction, &notice).await?;
        }
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        Ok(rows)
    }

    async fn read(
        &self,
        what: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        client
            .query(sql, params)
            .await
            .map_err(|e| self.fail(what, e))
    }

    /// Abandons `instance`'s pending approvals and drops its turn claims,
    /// inside `transaction`; the abandoned ids.
    async fn abandon(
        &self,
        transaction: &tokio_postgres::Transaction<'_>,
        instance: &str,
        reason: &str,
    ) -> Result<Vec<i64>, StoreError> {
        let what = "abandoning an instance's approvals";
        let rows = transaction
            .query(
                &format!(
                    "UPDATE approvals SET state = 'abandoned', reason = $2, closed_ms = {NOW_MS}
                     WHERE instance = $1 AND state = 'pending' RETURNING id"
                ),
                &[&instance, &clean(reason)],
            )
            .await
            .map_err(|e| self.fail(what, e))?;
        transaction
            .execute("DELETE FROM turn_claims WHERE instance = $1", &[&instance])
            .await
            .map_err(|e| self.fail(what, e))?;
        let mut ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        ids.sort_unstable();
        for id in &ids {
            self.shared
                .notify(
                    transaction,
                    &Notice::ApprovalClosed {
                        id: *id,
                        instance: instance.to_owned(),
                        state: ApprovalState::Abandoned,
                    },
                )
                .await?;
        }
        Ok(ids)
    }

    async fn read_approval(&self, id: i64) -> Result<Option<ApprovalRecord>, StoreError> {
        let rows = self
            .read(
                "reading an approval",
                &format!("{APPROVAL_COLUMNS} WHERE id = $1"),
                &[&id],
            )
            .await?;
        rows.first().map(raw_approval).transpose()
    }
}

/// Applies the migrations this build knows, under an advisory lock, on a
/// connection of its own.
async fn migrate(
    shared: &Shared,
    pg: &tokio_postgres::Config,
    timeout: Duration,
) -> Result<(), StoreError> {
    let unavailable = |detail: String| StoreError::Unavailable {
        location: shared.location.clone(),
        detail,
    };
    let (mut client, connection) = match tokio::time::timeout(timeout, pg.connect(NoTls)).await {
        Ok(Ok(pair)) => pair,
        Ok(Err(error)) => return Err(unavailable(one_line(&error))),
        Err(_) => {
            return Err(unavailable(format!(
                "no answer within {} s (store.connect_timeout_s)",
                timeout.as_secs()
            )));
        }
    };
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let outcome = async {
        client
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATIONS_LOCK])
            .await
            .map_err(|e| shared.fail("waiting for the migration lock", e))?;
        let migrations = MIGRATIONS
            .iter()
            .map(|(name, sql)| refinery_core::Migration::unapplied(name, sql))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| StoreError::Open {
                location: shared.location.clone(),
                source: Box::new(error),
            })?;
        let mut runner = refinery_core::Runner::new(&migrations)
            .set_abort_missing(true)
            .set_abort_divergent(true);
        runner.set_migration_table_name(MIGRATIONS_TABLE);
        let ran = runner.run_async(&mut client).await;
        match ran {
            Ok(report) => {
                for applied in report.applied_migrations() {
                    tracing::info!(store = %shared.location, migration = %applied, "store schema migrated");
                }
                Ok(())
            }
            Err(error) => Err(match error.kind() {
                refinery_core::error::Kind::MissingVersion(newer) => StoreError::NewerSchema {
                    location: shared.location.clone(),
                    found: i64::from(newer.version()),
                    known: SCHEMA_VERSION,
                },
                _ => StoreError::Open {
                    location: shared.location.clone(),
                    source: Box::new(error),
                },
            }),
        }
    }
    .await;
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATIONS_LOCK])
        .await;
    drop(client);
    driver.abort();
    outcome
}

const SESSION_COLUMNS: &str =
    "SELECT s.id, s.kind, s.parent, s.grants, s.model, s.context_tokens, s.created_ms,
    (SELECT COUNT(*) FROM messages m WHERE m.session = s.id) FROM sessions s";

fn raw_session(row: &Row) -> Result<SessionRecord, StoreError> {
    RawSession {
        id: row.get(0),
        kind: row.get(1),
        parent: row.get(2),
        grants: row.get(3),
        model: row.get(4),
        context_tokens: row.get(5),
        created_ms: row.get(6),
        messages: row.get(7),
    }
    .into_record()
}

const EVENT_COLUMNS: &str = "SELECT id, time_ms, instance, session, call_id, tool, via_bridge, arguments, status, duration_ms, detail, line, result, answered_by FROM events";

fn raw_event(row: &Row) -> Result<EventRecord, StoreError> {
    RawEvent {
        id: row.get(0),
        time_ms: row.get(1),
        instance: row.get(2),
        session: row.get(3),
        call_id: row.get(4),
        tool: row.get(5),
        via_bridge: row.get(6),
        arguments: row.get(7),
        status: row.get(8),
        duration_ms: row.get(9),
        detail: row.get(10),
        line: row.get(11),
        result: row.get(12),
        answered_by: row.get(13),
    }
    .into_record()
}

const APPROVAL_COLUMNS: &str = "SELECT id, instance, session, call_id, tool, via_bridge, arguments, digest, requested_ms, state, decision, reason, answered_by, closed_ms FROM approvals";

fn raw_approval(row: &Row) -> Result<ApprovalRecord, StoreError> {
    RawApproval {
        id: row.get(0),
        instance: row.get(1),
        session: row.get(2),
        call_id: row.get(3),
        tool: row.get(4),
        via_bridge: row.get(5),
        arguments: row.get(6),
        digest: row.get(7),
        requested_ms: row.get(8),
        state: row.get(9),
        decision: row.get(10),
        reason: row.get(11),
        answered_by: row.get(12),
        closed_ms: row.get(13),
    }
    .into_record()
}

fn instance_record(row: &Row) -> InstanceRecord {
    InstanceRecord {
        id: row.get(0),
        host: row.get(1),
        pid: u32::try_from(row.get::<_, i64>(2)).unwrap_or(0),
        version: row.get(3),
        listen: row.get(4),
        started_ms: row.get(5),
        heartbeat_ms: row.get(6),
        stopped_ms: row.get(7),
        stop_reason: row.get(8),
    }
}

/// A turn claim's row: released by a statement (awaited by
/// [`TurnClaim::release`]); when dropped unreleased, by a task of its own,
/// tried again until the server takes it (a claim left behind would hold
/// the session).
struct ClaimRelease {
    shared: Arc<Shared>,
    session: String,
    instance: String,
}

impl ClaimRelease {
    async fn delete(&self) -> Result<(), StoreError> {
        let client = self.shared.client().await?;
        client
            .execute(
                "DELETE FROM turn_claims WHERE session = $1 AND instance = $2",
                &[&self.session, &self.instance],
            )
            .await
            .map(drop)
            .map_err(|e| self.shared.fail("releasing a turn", e))
    }

    /// Deletes the row, trying again in the background until it is gone.
    async fn until_released(self) {
        let mut pause = Duration::from_millis(100);
        for _ in 0..600 {
            match self.delete().await {
                Ok(()) => return,
                Err(error) => {
                    tracing::warn!(%error, session = %self.session, "turn not released yet; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

impl crate::ClaimHold for ClaimRelease {
    fn release(self: Box<Self>) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        let this = *self;
        Box::pin(async move {
            if this.delete().await.is_err() {
                // Released later; the turn's answer need not wait for it.
                tokio::spawn(this.until_released());
            }
        })
    }
}

/// Dropped without release (the turn's task was cancelled): released in
/// the background.
struct ReleaseOnDrop(Option<ClaimRelease>);

impl crate::ClaimHold for ReleaseOnDrop {
    fn release(mut self: Box<Self>) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        let claim = self.0.take();
        Box::pin(async move {
            if let Some(claim) = claim {
                Box::new(claim).release().await;
            }
        })
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        if let (Some(claim), Ok(runtime)) = (self.0.take(), tokio::runtime::Handle::try_current()) {
            runtime.spawn(claim.until_released());
        }
    }
}

#[async_trait::async_trait]
impl Store for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    fn location(&self) -> String {
        self.shared.location.clone()
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn notices(&self) -> tokio::sync::broadcast::Receiver<Notice> {
        self.shared.notices.subscribe()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.read("checking the database", "SELECT 1", &[])
            .await
            .map(drop)
    }

    fn pin_store(&self) -> Arc<dyn PinStore> {
        self.pins.clone()
    }

    async fn flush_pins(&self) -> Result<(), StoreError> {
        self.pins.flush().await
    }

    async fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let rows = self
            .write(
                "creating a session",
                "INSERT INTO sessions (id, kind, parent, grants, model, context_tokens, created_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING RETURNING id",
                &[
                    &session.id,
                    &session.kind.as_str(),
                    &session.parent,
                    &json_text(&session.grants),
                    &session.model,
                    &clamp_i64(session.context_tokens),
                    &session.created_ms,
                ],
                Some(Notice::Session {
                    id: session.id.clone(),
                }),
            )
            .await?;
        if rows.is_empty() {
            return Err(StoreError::SessionExists(session.id.clone()));
        }
        Ok(())
    }

    async fn set_session_grants(&self, id: &str, grants: &[String]) -> Result<bool, StoreError> {
        let rows = self
            .write(
                "updating a session's grant",
                "UPDATE sessions SET grants = $2 WHERE id = $1 RETURNING id",
                &[&id, &json_text(grants)],
                Some(Notice::Session { id: id.to_owned() }),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn set_session_model(
        &self,
        id: &str,
        model: Option<&str>,
        context_tokens: u64,
    ) -> Result<bool, StoreError> {
        let rows = self
            .write(
                "updating a session's model",
                "UPDATE sessions SET model = $2, context_tokens = $3 WHERE id = $1 RETURNING id",
                &[&id, &model, &clamp_i64(context_tokens)],
                Some(Notice::Session { id: id.to_owned() }),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        let what = "deleting a session";
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        transaction
            .execute("DELETE FROM messages WHERE session = $1", &[&id])
            .await
            .map_err(|e| self.fail(what, e))?;
        let removed = transaction
            .execute("DELETE FROM sessions WHERE id = $1", &[&id])
            .await
            .map_err(|e| self.fail(what, e))?;
        self.shared
            .notify(&transaction, &Notice::Session { id: id.to_owned() })
            .await?;
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        Ok(removed > 0)
    }

    async fn subagents(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let rows = self
            .read(
                "listing subagents",
                "SELECT id FROM sessions WHERE parent = $1 ORDER BY id",
                &[&id],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let rows = self
            .read(
                "reading a session",
                &format!("{SESSION_COLUMNS} WHERE s.id = $1"),
                &[&id],
            )
            .await?;
        rows.first().map(raw_session).transpose()
    }

    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let rows = self
            .read(
                "listing sessions",
                &format!("{SESSION_COLUMNS} ORDER BY s.created_ms, s.id"),
                &[],
            )
            .await?;
        rows.iter().map(raw_session).collect()
    }

    async fn append_message(&self, session: &str, message: &Message) -> Result<u64, StoreError> {
        let body = serde_json::to_string(message).map_err(|e| StoreError::Corrupt {
            what: "message",
            detail: e.to_string(),
        })?;
        let what = "storing a message";
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        // One writer per session at a time, so two instances never take
        // the same position.
        transaction
            .execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                &[&session],
            )
            .await
            .map_err(|e| self.fail(what, e))?;
        let row = transaction
            .query_one(
                "INSERT INTO messages (session, seq, created_ms, body)
                 SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3 FROM messages WHERE session = $1
                 RETURNING seq",
                &[&session, &now_ms(), &body],
            )
            .await
            .map_err(|e| self.fail(what, e))?;
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }

    async fn messages(&self, session: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = self
            .read(
                "reading messages",
                "SELECT seq, created_ms, body FROM messages WHERE session = $1 ORDER BY seq",
                &[&session],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let body: String = row.get(2);
                stored_message(session, row.get(0), row.get(1), &body)
            })
            .collect()
    }

    async fn claim_turn(
        &self,
        session: &str,
        instance: &str,
    ) -> Result<Option<TurnClaim>, StoreError> {
        let lease = duration_ms(self.shared.lease);
        let rows = self
            .write(
                "claiming a turn",
                &format!(
                    "INSERT INTO turn_claims (session, instance, claimed_ms) VALUES ($1, $2, {NOW_MS})
                     ON CONFLICT (session) DO UPDATE SET instance = EXCLUDED.instance, claimed_ms = EXCLUDED.claimed_ms
                     WHERE NOT EXISTS (
                         SELECT 1 FROM instances i WHERE i.id = turn_claims.instance
                         AND i.stopped_ms IS NULL AND i.heartbeat_ms > {NOW_MS} - $3)
                     RETURNING session"
                ),
                &[&session, &instance, &lease],
                None,
            )
            .await?;
        Ok((!rows.is_empty()).then(|| {
            TurnClaim::new(ReleaseOnDrop(Some(ClaimRelease {
                shared: self.shared.clone(),
                session: session.to_owned(),
                instance: instance.to_owned(),
            })))
        }))
    }

    async fn record_event(&self, event: &EventRecord) -> Result<i64, StoreError> {
        let what = "storing an event";
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        // Ids become visible in the order they are given.
        transaction
            .execute("SELECT pg_advisory_xact_lock($1)", &[&EVENTS_LOCK])
            .await
            .map_err(|e| self.fail(what, e))?;
        let result = event.result.as_ref().map(Value::to_string);
        let row = transaction
            .query_one(
                "INSERT INTO events (time_ms, instance, session, call_id, tool, via_bridge, arguments, status, duration_ms, detail, line, result, answered_by)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
                &[
                    &event.time_ms,
                    &clean_opt(event.instance.as_deref()),
                    &clean(&event.session),
                    &clamp_i64(event.call_id),
                    &clean(&event.tool),
                    &event.via_bridge,
                    &event.arguments.to_string(),
                    &status_text(event.status),
                    &clamp_i64(event.duration_ms),
                    &clean_opt(event.detail.as_deref()),
                    &clean(&event.line),
                    &result,
                    &clean_opt(event.answered_by.as_deref()),
                ],
            )
            .await
            .map_err(|e| self.fail(what, e))?;
        let id: i64 = row.get(0);
        self.shared
            .notify(&transaction, &Notice::Event { id })
            .await?;
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        Ok(id)
    }

    async fn last_event_id(&self) -> Result<i64, StoreError> {
        let rows = self
            .read(
                "reading the last event id",
                "SELECT COALESCE(MAX(id), 0)::bigint FROM events",
                &[],
            )
            .await?;
        Ok(rows.first().map_or(0, |r| r.get(0)))
    }

    async fn events(
        &self,
        session: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .read(
                "reading events",
                &format!(
                    "{EVENT_COLUMNS} WHERE id > $1 AND ($2::text IS NULL OR session = $2) ORDER BY id LIMIT $3"
                ),
                &[&after, &session, &limit],
            )
            .await?;
        rows.iter().map(raw_event).collect()
    }

    async fn add_gateway_client(
        &self,
        name: &str,
        token_sha256: &str,
        grants: &[String],
    ) -> Result<GatewayClient, StoreError> {
        let created_ms = now_ms();
        let rows = self
            .write(
                "adding a gateway client",
                "INSERT INTO gateway_clients (name, token_sha256, grants, created_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT DO NOTHING RETURNING name",
                &[&name, &token_sha256, &json_text(grants), &created_ms],
                None,
            )
            .await?;
        if rows.is_empty() {
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
        let rows = self
            .read(
                "reading a gateway client",
                "SELECT name, grants, created_ms FROM gateway_clients WHERE token_sha256 = $1",
                &[&token_sha256],
            )
            .await?;
        rows.first()
            .map(|row| {
                let grants: String = row.get(1);
                Ok(GatewayClient {
                    name: row.get(0),
                    grants: parse_grants(&grants)?,
                    created_ms: row.get(2),
                })
            })
            .transpose()
    }

    async fn gateway_clients(&self) -> Result<Vec<GatewayClient>, StoreError> {
        let rows = self
            .read(
                "listing gateway clients",
                "SELECT name, grants, created_ms FROM gateway_clients ORDER BY name",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let grants: String = row.get(1);
                Ok(GatewayClient {
                    name: row.get(0),
                    grants: parse_grants(&grants)?,
                    created_ms: row.get(2),
                })
            })
            .collect()
    }

    async fn remove_gateway_client(&self, name: &str) -> Result<bool, StoreError> {
        let rows = self
            .write(
                "removing a gateway client",
                "DELETE FROM gateway_clients WHERE name = $1 RETURNING name",
                &[&name],
                None,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn request_approval(&self, request: &NewApproval) -> Result<ApprovalRecord, StoreError> {
        let what = "storing an approval request";
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        let row = transaction
            .query_one(
                &format!(
                    "INSERT INTO approvals (instance, session, call_id, tool, via_bridge, arguments, digest, requested_ms, state)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, {NOW_MS}, 'pending') RETURNING id, requested_ms"
                ),
                &[
                    &request.instance,
                    &clean(&request.session),
                    &clamp_i64(request.call_id),
                    &clean(&request.tool),
                    &request.via_bridge,
                    &request.arguments.to_string(),
                    &request.digest,
                ],
            )
            .await
            .map_err(|e| self.fail(what, e))?;
        let id: i64 = row.get(0);
        self.shared
            .notify(
                &transaction,
                &Notice::ApprovalRequested {
                    id,
                    instance: request.instance.clone(),
                },
            )
            .await?;
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        Ok(ApprovalRecord {
            id,
            instance: request.instance.clone(),
            session: request.session.clone(),
            call_id: request.call_id,
            tool: request.tool.clone(),
            via_bridge: request.via_bridge,
            arguments: request.arguments.clone(),
            digest: request.digest.clone(),
            requested_ms: row.get(1),
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
        let what = "answering an approval";
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        let answered = transaction
            .query_opt(
                &format!(
                    "UPDATE approvals SET state = 'answered', decision = $2, reason = $3, answered_by = $4, closed_ms = {NOW_MS}
                     WHERE id = $1 AND state = 'pending' AND ($5::text IS NULL OR digest = $5) RETURNING instance"
                ),
                &[
                    &id,
                    &answer.decision,
                    &clean_opt(answer.reason.as_deref()),
                    &clean(&answer.answered_by),
                    &answer.digest,
                ],
            )
            .await
            .map_err(|e| self.fail(what, e))?;
        if let Some(row) = &answered {
            self.shared
                .notify(
                    &transaction,
                    &Notice::ApprovalClosed {
                        id,
                        instance: row.get(0),
                        state: ApprovalState::Answered,
                    },
                )
                .await?;
        }
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        let Some(record) = self.read_approval(id).await? else {
            return Ok(AnswerOutcome::Unknown);
        };
        Ok(match (answered, record.state) {
            (Some(_), _) => AnswerOutcome::Answered(record),
            (None, ApprovalState::Pending) => AnswerOutcome::DigestMismatch {
                expected: record.digest,
            },
            (None, _) => AnswerOutcome::Closed(record),
        })
    }

    async fn withdraw_approval(&self, id: i64, reason: &str) -> Result<bool, StoreError> {
        let what = "withdrawing an approval";
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        let row = transaction
            .query_opt(
                &format!(
                    "UPDATE approvals SET state = 'withdrawn', reason = $2, closed_ms = {NOW_MS}
                     WHERE id = $1 AND state = 'pending' RETURNING instance"
                ),
                &[&id, &clean(reason)],
            )
            .await
            .map_err(|e| self.fail(what, e))?;
        if let Some(row) = &row {
            self.shared
                .notify(
                    &transaction,
                    &Notice::ApprovalClosed {
                        id,
                        instance: row.get(0),
                        state: ApprovalState::Withdrawn,
                    },
                )
                .await?;
        }
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        Ok(row.is_some())
    }

    async fn approval(&self, id: i64) -> Result<Option<ApprovalRecord>, StoreError> {
        self.read_approval(id).await
    }

    async fn pending_approvals(
        &self,
        session: Option<&str>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let rows = self
            .read(
                "listing pending approvals",
                &format!(
                    "{APPROVAL_COLUMNS} WHERE state = 'pending' AND ($1::text IS NULL OR session = $1) ORDER BY id"
                ),
                &[&session],
            )
            .await?;
        rows.iter().map(raw_approval).collect()
    }

    async fn closed_approvals(
        &self,
        session: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .read(
                "listing answered approvals",
                &format!(
                    "{APPROVAL_COLUMNS} WHERE state <> 'pending' AND ($1::text IS NULL OR session = $1)
                     ORDER BY closed_ms DESC, id DESC LIMIT $2"
                ),
                &[&session, &limit],
            )
            .await?;
        rows.iter().map(raw_approval).collect()
    }

    async fn register_instance(&self, instance: &InstanceRecord) -> Result<Vec<i64>, StoreError> {
        let what = "registering the instance";
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        let abandoned = self
            .abandon(
                &transaction,
                &instance.id,
                &format!("instance {} restarted before anyone answered", instance.id),
            )
            .await?;
        transaction
            .execute(
                &format!(
                    "INSERT INTO instances (id, host, pid, version, listen, started_ms, heartbeat_ms, stopped_ms, stop_reason)
                     VALUES ($1, $2, $3, $4, $5, {NOW_MS}, {NOW_MS}, NULL, NULL)
                     ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,
                       version = EXCLUDED.version, listen = EXCLUDED.listen, started_ms = EXCLUDED.started_ms,
                       heartbeat_ms = EXCLUDED.heartbeat_ms, stopped_ms = NULL, stop_reason = NULL"
                ),
                &[
                    &instance.id,
                    &clean(&instance.host),
                    &i64::from(instance.pid),
                    &instance.version,
                    &instance.listen,
                ],
            )
            .await
            .map_err(|e| self.fail(what, e))?;
        self.shared
            .notify(
                &transaction,
                &Notice::Instance {
                    id: instance.id.clone(),
                },
            )
            .await?;
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        Ok(abandoned)
    }

    async fn renew_lease(&self, id: &str) -> Result<bool, StoreError> {
        let rows = self
            .write(
                "renewing the instance's lease",
                &format!(
                    "UPDATE instances SET heartbeat_ms = {NOW_MS} WHERE id = $1 AND stopped_ms IS NULL RETURNING id"
                ),
                &[&id],
                None,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn expire_leases(&self, lease: Duration) -> Result<Vec<ExpiredInstance>, StoreError> {
        let what = "expiring leases";
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        // Locked, so two instances expiring at once do it once.
        let stale = transaction
            .query(
                &format!(
                    "SELECT id, {NOW_MS} - heartbeat_ms FROM instances
                     WHERE stopped_ms IS NULL AND heartbeat_ms < {NOW_MS} - $1
                     ORDER BY id FOR UPDATE SKIP LOCKED"
                ),
                &[&duration_ms(lease)],
            )
            .await
            .map_err(|e| self.fail(what, e))?;
        let mut expired = Vec::new();
        for row in stale {
            let id: String = row.get(0);
            let reason = lease_expired_reason(&id, row.get(1));
            let abandoned = self.abandon(&transaction, &id, &reason).await?;
            transaction
                .execute(
                    &format!(
                        "UPDATE instances SET stopped_ms = {NOW_MS}, stop_reason = $2 WHERE id = $1"
                    ),
                    &[&id, &reason],
                )
                .await
                .map_err(|e| self.fail(what, e))?;
            self.shared
                .notify(&transaction, &Notice::Instance { id: id.clone() })
                .await?;
            expired.push(ExpiredInstance { id, abandoned });
        }
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        Ok(expired)
    }

    async fn stop_instance(&self, id: &str, reason: &str) -> Result<(), StoreError> {
        let what = "recording the instance's stop";
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        self.abandon(
            &transaction,
            id,
            &format!("instance {id} stopped before anyone answered ({reason})"),
        )
        .await?;
        transaction
            .execute(
                &format!(
                    "UPDATE instances SET stopped_ms = {NOW_MS}, stop_reason = $2 WHERE id = $1 AND stopped_ms IS NULL"
                ),
                &[&id, &clean(reason)],
            )
            .await
            .map_err(|e| self.fail(what, e))?;
        self.shared
            .notify(&transaction, &Notice::Instance { id: id.to_owned() })
            .await?;
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        Ok(())
    }

    async fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError> {
        let rows = self
            .read(
                "listing instances",
                "SELECT id, host, pid, version, listen, started_ms, heartbeat_ms, stopped_ms, stop_reason
                 FROM instances ORDER BY stopped_ms IS NOT NULL, started_ms, id",
                &[],
            )
            .await?;
        Ok(rows.iter().map(instance_record).collect())
    }

    async fn credentials(&self, server: &str) -> Result<Option<(Value, i64)>, StoreError> {
        let rows = self
            .read(
                "reading OAuth credentials",
                "SELECT credentials, stored_ms FROM credentials WHERE server = $1",
                &[&server],
            )
            .await?;
        rows.first()
            .map(|row| {
                let text: String = row.get(0);
                let credentials = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                    what: "OAuth credentials",
                    detail: format!("server `{server}`: {e}; log in again"),
                })?;
                Ok((credentials, row.get(1)))
            })
            .transpose()
    }

    async fn save_credentials(&self, server: &str, credentials: &Value) -> Result<(), StoreError> {
        self.write(
            "storing OAuth credentials",
            &format!(
                "INSERT INTO credentials (server, credentials, stored_ms) VALUES ($1, $2, {NOW_MS})
                 ON CONFLICT (server) DO UPDATE SET credentials = EXCLUDED.credentials, stored_ms = EXCLUDED.stored_ms"
            ),
            &[&server, &credentials.to_string()],
            Some(Notice::Credentials {
                server: server.to_owned(),
            }),
        )
        .await
        .map(drop)
    }

    async fn clear_credentials(&self, server: &str) -> Result<bool, StoreError> {
        let rows = self
            .write(
                "removing OAuth credentials",
                "DELETE FROM credentials WHERE server = $1 RETURNING server",
                &[&server],
                Some(Notice::Credentials {
                    server: server.to_owned(),
                }),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn record_savings(&self, sample: &SavingsSample) -> Result<(), StoreError> {
        self.write(
            "storing a savings sample",
            "INSERT INTO savings (instance, time_ms, point) VALUES ($1, $2, $3)
             ON CONFLICT (instance, time_ms) DO UPDATE SET point = EXCLUDED.point",
            &[&sample.instance, &sample.time_ms, &sample.point.to_string()],
            None,
        )
        .await
        .map(drop)
    }

    async fn latest_savings(&self) -> Result<Vec<SavingsSample>, StoreError> {
        let rows = self
            .read(
                "reading savings",
                "SELECT DISTINCT ON (instance) instance, time_ms, point FROM savings
                 ORDER BY instance, time_ms DESC",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let instance: String = row.get(0);
                let point: String = row.get(2);
                Ok(SavingsSample {
                    point: serde_json::from_str(&point).map_err(|e| StoreError::Corrupt {
                        what: "savings sample",
                        detail: format!("instance `{instance}`: {e}"),
                    })?,
                    instance,
                    time_ms: row.get(1),
                })
            })
            .collect()
    }

    async fn export_rows(&self, table: &str) -> Result<Vec<Value>, StoreError> {
        let table = crate::copy::table(table)?;
        let rows = self
            .read(
                "exporting a table",
                &format!(
                    "SELECT {} FROM {} ORDER BY {}",
                    table.column_list(),
                    table.name,
                    table.order
                ),
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                let mut object = serde_json::Map::new();
                for (index, (name, column)) in table.columns.iter().enumerate() {
                    let value = match column {
                        Column::Text => Value::from(row.get::<_, String>(index)),
                        Column::OptText => row
                            .get::<_, Option<String>>(index)
                            .map_or(Value::Null, Value::from),
                        Column::Int => Value::from(row.get::<_, i64>(index)),
                        Column::OptInt => row
                            .get::<_, Option<i64>>(index)
                            .map_or(Value::Null, Value::from),
                        Column::Bool => Value::from(row.get::<_, bool>(index)),
                    };
                    object.insert((*name).to_owned(), value);
                }
                Value::Object(object)
            })
            .collect())
    }

    async fn import_rows(&self, table: &str, rows: &[Value]) -> Result<(), StoreError> {
        let table = crate::copy::table(table)?;
        let what = "importing a table";
        let placeholders = (1..=table.columns.len())
            .map(|n| format!("${n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({placeholders})",
            table.name,
            table.column_list()
        );
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(|e| self.fail(what, e))?;
        let statement = transaction
            .prepare(&sql)
            .await
            .map_err(|e| self.fail(what, e))?;
        for row in rows {
            let mut cells: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
            for (name, column) in table.columns {
                let value = crate::copy::cell(row, name, *column)?;
                cells.push(match column {
                    Column::Text => {
                        Box::new(clean(value.as_str().unwrap_or_default()).into_owned())
                    }
                    Column::OptText => {
                        Box::new(value.as_str().map(|text| clean(text).into_owned()))
                    }
                    Column::Int => Box::new(value.as_i64().unwrap_or_default()),
                    Column::OptInt => Box::new(value.as_i64()),
                    Column::Bool => Box::new(value.as_bool().unwrap_or_default()),
                });
            }
            let params: Vec<&(dyn ToSql + Sync)> = cells
                .iter()
                .map(|c| c.as_ref() as &(dyn ToSql + Sync))
                .collect();
            transaction
                .execute(&statement, &params)
                .await
                .map_err(|e| self.fail(what, e))?;
        }
        if table.columns.first().is_some_and(|(name, _)| *name == "id")
            && matches!(table.columns[0].1, Column::Int)
        {
            // Identity columns go on after the ids brought in.
            transaction
                .execute(
                    &format!(
                        "SELECT setval(pg_get_serial_sequence('{0}', 'id'), GREATEST((SELECT MAX(id) FROM {0}), 1), (SELECT MAX(id) FROM {0}) IS NOT NULL)",
                        table.name
                    ),
                    &[],
                )
                .await
                .map_err(|e| self.fail(what, e))?;
        }
        transaction.commit().await.map_err(|e| self.fail(what, e))?;
        Ok(())
    }
}
