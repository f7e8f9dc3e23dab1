//! What the store keeps, as every backend reads and writes it: sessions
//! and their messages, activity events, gateway clients, approvals,
//! instances and savings points. Plain data with serde shapes (the API
//! shows most of them as they are); no behaviour beyond conversions.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use quiver_dispatch::{Event, Status};
use quiver_model::Message;

use crate::StoreError;

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

/// A duration in whole milliseconds, as the backends store it.
pub(crate) fn duration_ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
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
    /// `chat` or `gateway`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Chat => "chat",
            SessionKind::Gateway => "gateway",
        }
    }

    /// The kind a stored word names.
    pub fn parse(text: &str) -> Result<SessionKind, StoreError> {
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
    /// The instance whose dispatcher recorded it (`None` in a log written
    /// before instances were named).
    pub instance: Option<String>,
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
    /// The record of a live event (id 0 until stored), recorded by
    /// `instance`.
    pub fn from_event(event: &Event, instance: Option<&str>) -> EventRecord {
        EventRecord {
            id: 0,
            time_ms: millis(event.time),
            instance: instance.map(str::to_owned),
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

/// An event status as stored.
pub fn status_text(status: Status) -> &'static str {
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

/// The status a stored word names.
pub fn parse_status(text: &str) -> Result<Status, StoreError> {
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

/// Where an approval request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for an answer.
    Pending,
    /// Answered (see its decision).
    Answered,
    /// Its call stopped waiting (the approval timed out, or the turn
    /// ended) before anyone answered.
    Withdrawn,
    /// The instance whose call waited for it went away (stopped, or its
    /// lease ran out); see the reason.
    Abandoned,
}

impl ApprovalState {
    /// The word stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Answered => "answered",
            ApprovalState::Withdrawn => "withdrawn",
            ApprovalState::Abandoned => "abandoned",
        }
    }

    /// The state a stored word names.
    pub fn parse(text: &str) -> Result<ApprovalState, StoreError> {
        [
            ApprovalState::Pending,
            ApprovalState::Answered,
            ApprovalState::Withdrawn,
            ApprovalState::Abandoned,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
        .ok_or_else(|| StoreError::Corrupt {
            what: "approval state",
            detail: format!("`{text}`"),
        })
    }
}

/// An approval asked for: what a waiting call stores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewApproval {
    /// The instance whose call waits.
    pub instance: String,
    /// The call's session.
    pub session: String,
    /// The call's id (unique within its instance).
    pub call_id: u64,
    /// The real tool.
    pub tool: String,
    /// Whether the call came through `tool_call`.
    pub via_bridge: bool,
    /// The arguments, redacted as in the feed.
    pub arguments: Value,
    /// sha256 (hex) of the canonical JSON of the full arguments.
    pub digest: String,
}

/// An approval request as stored: asked, and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRecord {
    /// The id to answer (unique in the store, whichever instance asked).
    pub id: i64,
    /// The instance whose call waits (or waited).
    pub instance: String,
    /// The call's session.
    pub session: String,
    /// The call's id (unique within its instance).
    pub call_id: u64,
    /// The real tool.
    pub tool: String,
    /// Whether the call came through `tool_call`.
    pub via_bridge: bool,
    /// The arguments, redacted as in the feed.
    pub arguments: Value,
    /// sha256 (hex) of the canonical JSON of the full arguments.
    pub digest: String,
    /// When it was asked, milliseconds since the Unix epoch.
    pub requested_ms: i64,
    /// Where it stands.
    pub state: ApprovalState,
    /// `approve`, `approve_for_session` or `deny` (answered ones).
    pub decision: Option<String>,
    /// The denial's reason, or why it was withdrawn or abandoned.
    pub reason: Option<String>,
    /// Who answered.
    pub answered_by: Option<String>,
    /// When it was answered, withdrawn or abandoned.
    pub closed_ms: Option<i64>,
}

/// An answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalAnswer {
    /// `approve`, `approve_for_session` or `deny`.
    pub decision: String,
    /// The denial's reason.
    pub reason: Option<String>,
    /// Who answers (`console`, `api`, a program's own name).
    pub answered_by: String,
    /// When given: the answer holds only for arguments with this digest.
    pub digest: Option<String>,
}

/// What answering an approval request did.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerOutcome {
    /// Answered now: the request as stored.
    Answered(ApprovalRecord),
    /// No request has this id.
    Unknown,
    /// It was answered, withdrawn or abandoned before: as stored.
    Closed(ApprovalRecord),
    /// The digest given is not the request's.
    DigestMismatch {
        /// The request's digest.
        expected: String,
    },
}

/// One running Quiver process using the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceRecord {
    /// Its id (`serve.instance_id`, else kept in its state directory).
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its Quiver version.
    pub version: String,
    /// Where it listens, when it serves HTTP.
    pub listen: Option<String>,
    /// When it started, milliseconds since the Unix epoch (the store's
    /// clock).
    pub started_ms: i64,
    /// When it last renewed its lease (the store's clock).
    pub heartbeat_ms: i64,
    /// When it stopped, or was found gone; `None` while it runs.
    pub stopped_ms: Option<i64>,
    /// Why it stopped (`stopped`, `lease expired ...`, `restarted`).
    pub stop_reason: Option<String>,
}

/// What [`crate::Store::expire_leases`] found: an instance whose lease ran
/// out, and the approvals it left waiting, now abandoned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredInstance {
    /// The instance.
    pub id: String,
    /// Its pending approvals, now abandoned.
    pub abandoned: Vec<i64>,
}

/// One sample of an instance's savings totals, as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SavingsSample {
    /// The instance.
    pub instance: String,
    /// When, milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// The totals (the daemon's `savings::Point`).
    pub point: Value,
}
