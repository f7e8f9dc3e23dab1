//! Persistence behind one contract, [`Store`]: sessions and their
//! messages, the activity log, the MCP gateway's client tokens, accepted
//! tool definitions (pins), approvals, the instances using the store and
//! their leases, MCP servers' OAuth credentials and savings samples.
//!
//! Two backends keep it ([`settings::Backend`]):
//! - [`sqlite::SqliteStore`], the embedded default: `quiver.db` in the
//!   state directory, one short transaction per write on one connection
//!   (WAL journal, so readers in other processes never block the daemon).
//! - `postgres::PgStore` (feature `postgres`): a PostgreSQL database that
//!   several instances share, over a connection pool, with versioned
//!   migrations and `LISTEN`/`NOTIFY` so that what one instance writes
//!   reaches the others at once ([`notices`]).
//!
//! [`open`] picks the backend a config names. Everything above this crate
//! holds an `Arc<dyn Store>` and never knows which it is; the one test
//! suite of the contract runs against both.

pub mod copy;
mod error;
pub mod lock_file;
pub mod notices;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod records;
pub mod settings;
pub mod sqlite;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use quiver_model::Message;
use quiver_tool::integrity::PinStore;

pub use error::{BoxError, StoreError};
pub use notices::Notice;
pub use records::{
    AnswerOutcome, ApprovalAnswer, ApprovalRecord, ApprovalState, EventRecord, ExpiredInstance,
    GatewayClient, InstanceRecord, NewApproval, SavingsSample, SessionKind, SessionRecord,
    StoredMessage, millis, now_ms,
};
pub use settings::{Backend, StoreConfig};

/// The database file in the state directory (the SQLite backend).
pub const DATABASE_FILE: &str = "quiver.db";

/// A turn's claim on its session: while it is held no other turn of the
/// session runs, in this process or any other using the store. Released
/// by [`TurnClaim::release`] once the turn's messages are stored (so the
/// next turn, on any instance, finds it free), or when dropped (and,
/// should the process die, when the lock goes with it or its instance's
/// lease runs out).
pub struct TurnClaim {
    held: Option<Box<dyn ClaimHold>>,
}

/// What a backend holds for a claim, and how it lets go.
pub trait ClaimHold: Send + Sync {
    /// Lets go now (the claim is free for others once this returns).
    fn release(self: Box<Self>) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;
}

impl<T: Send + Sync + 'static> ClaimHold for Held<T> {
    fn release(self: Box<Self>) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        drop(self);
        Box::pin(std::future::ready(()))
    }
}

/// A value whose drop is the release (a file lock).
pub struct Held<T>(pub T);

impl TurnClaim {
    /// A claim that holds `held` until released or dropped.
    pub fn new(held: impl ClaimHold + 'static) -> TurnClaim {
        TurnClaim {
            held: Some(Box::new(held)),
        }
    }

    /// Releases the claim, waiting until others can take it.
    pub async fn release(mut self) {
        if let Some(held) = self.held.take() {
            held.release().await;
        }
    }
}

impl std::fmt::Debug for TurnClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnClaim").finish_non_exhaustive()
    }
}

/// Everything Quiver keeps. Every method is one short transaction; a
/// write is durable when it returns, and its [`Notice`] is sent to every
/// instance using the store once it is.
#[async_trait::async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    // ---- what it is -------------------------------------------------------

    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// The store as errors and status name it: the file, or
    /// `user@host:port/database` (never a password).
    fn location(&self) -> String;

    /// The backend and where it is, in one phrase for people:
    /// `sqlite STATE_DIR/quiver.db`, `postgres user@host:port/database`.
    fn describe(&self) -> String {
        let (backend, location) = (self.backend(), self.location());
        if location.starts_with(backend.as_str()) {
            location
        } else {
            format!("{} {location}", backend.as_str())
        }
    }

    /// Whether other instances may use the store at once (they renew
    /// leases and tell each other of changes); `false` for SQLite, whose
    /// file belongs to one daemon.
    fn is_shared(&self) -> bool;

    /// The notices of changes from now on, this instance's and others'.
    fn notices(&self) -> tokio::sync::broadcast::Receiver<Notice>;

    /// Whether the store answers now (`/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    /// The accepted tool definitions, as the MCP host reads and writes
    /// them (synchronously, under its own locks).
    fn pin_store(&self) -> Arc<dyn PinStore>;

    /// Waits until every pin written so far through [`Store::pin_store`]
    /// is durable (an acceptance is answered after this).
    async fn flush_pins(&self) -> Result<(), StoreError>;

    // ---- sessions and messages ---------------------------------------------

    /// Stores a new session (its message count is ignored);
    /// [`StoreError::SessionExists`] when the id is taken.
    async fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError>;

    /// Replaces a session's grant; whether the session was there.
    async fn set_session_grants(&self, id: &str, grants: &[String]) -> Result<bool, StoreError>;

    /// Changes a session's model and context size; whether it was there.
    async fn set_session_model(
        &self,
        id: &str,
        model: Option<&str>,
        context_tokens: u64,
    ) -> Result<bool, StoreError>;

    /// Deletes a session and its messages; whether it was there. Its
    /// activity log entries stay, as do its subagents: delete them first.
    async fn delete_session(&self, id: &str) -> Result<bool, StoreError>;

    /// The ids of the sessions whose parent is `id`, sorted.
    async fn subagents(&self, id: &str) -> Result<Vec<String>, StoreError>;

    /// One session, if stored.
    async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError>;

    /// Every stored session, oldest first.
    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError>;

    /// Appends `message` to `session`; returns its 1-based position.
    async fn append_message(&self, session: &str, message: &Message) -> Result<u64, StoreError>;

    /// A session's messages, in order.
    async fn messages(&self, session: &str) -> Result<Vec<StoredMessage>, StoreError>;

    /// Claims `session` for one turn of `instance`; `None` when a turn of
    /// it is running (here or in another process or instance).
    async fn claim_turn(
        &self,
        session: &str,
        instance: &str,
    ) -> Result<Option<TurnClaim>, StoreError>;

    // ---- activity log ---------------------------------------------------------

    /// Appends an event; returns its id. Ids grow in the order events are
    /// stored, so a reader that has seen id N has seen every id below it.
    async fn record_event(&self, event: &EventRecord) -> Result<i64, StoreError>;

    /// The id of the newest event (0 when there is none).
    async fn last_event_id(&self) -> Result<i64, StoreError>;

    /// Events after id `after` (of one session, or all), oldest first,
    /// at most `limit`.
    async fn events(
        &self,
        session: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError>;

    // ---- gateway clients --------------------------------------------------------

    /// Stores a gateway client with the sha256 (hex) of its token;
    /// [`StoreError::ClientExists`] when the name is taken.
    async fn add_gateway_client(
        &self,
        name: &str,
        token_sha256: &str,
        grants: &[String],
    ) -> Result<GatewayClient, StoreError>;

    /// The gateway client whose token has this sha256 (hex).
    async fn gateway_client_by_token(
        &self,
        token_sha256: &str,
    ) -> Result<Option<GatewayClient>, StoreError>;

    /// Every gateway client, by name.
    async fn gateway_clients(&self) -> Result<Vec<GatewayClient>, StoreError>;

    /// Removes a gateway client; whether it existed.
    async fn remove_gateway_client(&self, name: &str) -> Result<bool, StoreError>;

    // ---- approvals ------------------------------------------------------------------

    /// Stores an approval request, pending; returns it with its id.
    async fn request_approval(&self, request: &NewApproval) -> Result<ApprovalRecord, StoreError>;

    /// Answers a pending request (only if its digest is the one given,
    /// when given). A request answered, withdrawn or abandoned before is
    /// [`AnswerOutcome::Closed`], as it was closed.
    async fn answer_approval(
        &self,
        id: i64,
        answer: &ApprovalAnswer,
    ) -> Result<AnswerOutcome, StoreError>;

    /// Closes a pending request without an answer (its call stopped
    /// waiting); whether it was still pending.
    async fn withdraw_approval(&self, id: i64, reason: &str) -> Result<bool, StoreError>;

    /// One request, whatever its state.
    async fn approval(&self, id: i64) -> Result<Option<ApprovalRecord>, StoreError>;

    /// The pending requests (of one session, or all), oldest first.
    async fn pending_approvals(
        &self,
        session: Option<&str>,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;

    /// The last `limit` closed requests (of one session, or all), newest
    /// first.
    async fn closed_approvals(
        &self,
        session: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;

    // ---- instances and leases -----------------------------------------------------------

    /// Records `instance` as running, its lease starting now (the store's
    /// clock). What an earlier run of the same id left pending (it did not
    /// stop cleanly) is abandoned first; returns those ids.
    async fn register_instance(&self, instance: &InstanceRecord) -> Result<Vec<i64>, StoreError>;

    /// Renews `id`'s lease; `false` when the instance is no longer
    /// recorded as running (another found its lease expired).
    async fn renew_lease(&self, id: &str) -> Result<bool, StoreError>;

    /// Marks every running instance whose lease is older than `lease` as
    /// stopped, abandoning the approvals it left pending (with the reason
    /// saying so) and releasing its turns; returns what was found.
    async fn expire_leases(
        &self,
        lease: std::time::Duration,
    ) -> Result<Vec<ExpiredInstance>, StoreError>;

    /// Records `id` as stopped with `reason`, abandoning what it left
    /// pending.
    async fn stop_instance(&self, id: &str, reason: &str) -> Result<(), StoreError>;

    /// Every instance recorded, running ones first, then by start.
    async fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError>;

    // ---- OAuth credentials ------------------------------------------------------------

    /// An MCP server's stored OAuth credentials (rmcp's
    /// `StoredCredentials` as JSON) and when they were stored.
    async fn credentials(&self, server: &str) -> Result<Option<(Value, i64)>, StoreError>;

    /// Replaces an MCP server's OAuth credentials.
    async fn save_credentials(&self, server: &str, credentials: &Value) -> Result<(), StoreError>;

    /// Removes an MCP server's OAuth credentials; whether there were any.
    async fn clear_credentials(&self, server: &str) -> Result<bool, StoreError>;

    // ---- savings -----------------------------------------------------------------------

    /// Stores one sample of an instance's savings totals.
    async fn record_savings(&self, sample: &SavingsSample) -> Result<(), StoreError>;

    /// Each instance's newest sample.
    async fn latest_savings(&self) -> Result<Vec<SavingsSample>, StoreError>;

    // ---- whole-store copy -------------------------------------------------------------

    /// Every row of `table` (one of [`copy::TABLES`]), in key order, as
    /// JSON objects: what `quiver store migrate` copies and checksums.
    async fn export_rows(&self, table: &str) -> Result<Vec<Value>, StoreError>;

    /// Inserts rows exported by [`Store::export_rows`] into `table`, as
    /// they are (ids kept); the table must be empty.
    async fn import_rows(&self, table: &str, rows: &[Value]) -> Result<(), StoreError>;
}

/// Opens the store `config` names: `quiver.db` in `state_dir` for SQLite,
/// the database at `store.url` for PostgreSQL (connected, schema brought
/// up to date, listener started; a database that cannot be reached within
/// `store.connect_timeout_s` is [`StoreError::Unavailable`]). Must be
/// called inside a tokio runtime.
pub async fn open(config: &StoreConfig, state_dir: &Path) -> Result<Arc<dyn Store>, StoreError> {
    match config.backend {
        Backend::Sqlite => Ok(Arc::new(sqlite::SqliteStore::open(
            &state_dir.join(DATABASE_FILE),
        )?)),
        #[cfg(feature = "postgres")]
        Backend::Postgres => Ok(Arc::new(postgres::PgStore::connect(config).await?)),
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => Err(StoreError::BackendMissing("postgres")),
    }
}
