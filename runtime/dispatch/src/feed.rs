//! The activity feed: one event per status of every call, per session
//! (a tokio broadcast channel each) and for the whole process.
//!
//! A call that needs approval gives two events (`awaiting approval`, then
//! its outcome); any other call gives one. Arguments are copied with the
//! configured keys (`feed.redact`, compared case-insensitively, at any
//! depth) replaced by `"[redacted]"`; a call's result is redacted the same
//! way and cut to [`MAX_RESULT_CHARS`] of JSON text. A receiver that falls more than
//! `feed.capacity` events behind loses the oldest and is told how many
//! (tokio's `RecvError::Lagged`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};
use tokio::sync::broadcast;

use crate::session::Session;

/// The value that replaces a redacted argument.
pub const REDACTED: &str = "[redacted]";

/// Longest result an event carries, in characters of its JSON text; a
/// longer one becomes that much of its text and a note of what was cut,
/// so a tool that returns megabytes cannot grow the log or the feed.
pub const MAX_RESULT_CHARS: usize = 4096;

/// Default feed capacity, in events.
pub const DEFAULT_CAPACITY: usize = 1024;

/// Where a call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The tool answered.
    Ok,
    /// The call failed (unknown tool, invalid arguments, tool error).
    Error,
    /// A hook, guardrail or approver refused it (an approval that timed
    /// out under `on_timeout: deny` too).
    Denied,
    /// Waiting for an approver.
    AwaitingApproval,
    /// The tool did not answer in time.
    TimedOut,
    /// Not a call: a source offered a new or changed tool definition that
    /// is held out of the catalog until an operator accepts it.
    Quarantined,
    /// Not a call: a tool's definition changed and is served (renamed,
    /// accepted by an operator, or changed under trust `all`).
    DefinitionChanged,
}

impl Status {
    /// `ok`, `error`, `denied`, `awaiting approval`, `timed out`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Denied => "denied",
            Status::AwaitingApproval => "awaiting approval",
            Status::TimedOut => "timed out",
            Status::Quarantined => "quarantined",
            Status::DefinitionChanged => "definition changed",
        }
    }

    /// Whether this is a call's last event.
    pub fn is_final(self) -> bool {
        self != Status::AwaitingApproval
    }
}

/// One event of the feed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Event {
    /// When it happened.
    pub time: SystemTime,
    /// The call (0 for calls that never reached the chain: bridge answers
    /// and calls that could not be resolved).
    pub call_id: u64,
    /// The session's id.
    pub session: String,
    /// The real tool's name (for unresolved calls: the name asked for).
    pub tool: String,
    /// Whether the call came through `tool_call`.
    pub via_bridge: bool,
    /// The arguments, redacted.
    pub arguments: Value,
    /// The status.
    pub status: Status,
    /// Time since the call entered the dispatcher.
    pub duration: Duration,
    /// The error message, or a note.
    pub detail: Option<String>,
    /// What the tool answered, redacted like the arguments and cut to
    /// [`MAX_RESULT_CHARS`] (`None` for an error or a call still waiting).
    pub result: Option<Value>,
}

impl Event {
    /// The one way an event is made: `status` of the call of `tool` in
    /// `session`, now; no call id (a bridge answer or an unresolved call),
    /// no arguments, no duration and no detail until the builder methods
    /// below set them.
    pub fn new(session: &Session, tool: impl Into<String>, status: Status) -> Event {
        Event {
            time: SystemTime::now(),
            call_id: 0,
            session: session.id().to_owned(),
            tool: tool.into(),
            via_bridge: false,
            arguments: Value::Null,
            status,
            duration: Duration::ZERO,
            detail: None,
            result: None,
        }
    }

    /// The call it belongs to, and whether it came through `tool_call`.
    pub fn call(mut self, call_id: u64, via_bridge: bool) -> Event {
        self.call_id = call_id;
        self.via_bridge = via_bridge;
        self
    }

    /// The call's arguments, redacted by the session's feed settings.
    pub fn arguments(mut self, session: &Session, arguments: &Value) -> Event {
        self.arguments = session.feed().redact(arguments);
        self
    }

    /// Time since the call entered the dispatcher.
    pub fn duration(mut self, duration: Duration) -> Event {
        self.duration = duration;
        self
    }

    /// The error message, or a note.
    pub fn detail(mut self, detail: Option<String>) -> Event {
        self.detail = detail;
        self
    }

    /// What the tool answered, redacted by the session's feed settings and
    /// cut to [`MAX_RESULT_CHARS`].
    pub fn result(mut self, session: &Session, result: &Value) -> Event {
        self.result = Some(bounded(session.feed().redact(result)));
        self
    }

    /// One line for the CLI:
    /// `mcp_github_create_issue via tool_call  ok  120 ms`.
    pub fn render(&self) -> String {
        let via = if self.via_bridge {
            " via tool_call"
        } else {
            ""
        };
        if matches!(
            self.status,
            Status::AwaitingApproval | Status::Quarantined | Status::DefinitionChanged
        ) {
            format!("{}{via}  {}", self.tool, self.status.label())
        } else {
            format!(
                "{}{via}  {}  {} ms",
                self.tool,
                self.status.label(),
                self.duration.as_millis()
            )
        }
    }
}

/// The process-wide feed: redaction settings, capacity, and the stream of
/// every session's events.
#[derive(Debug)]
pub struct ActivityFeed {
    redact: HashSet<String>,
    capacity: usize,
    all: broadcast::Sender<Arc<Event>>,
}

impl Default for ActivityFeed {
    fn default() -> Self {
        ActivityFeed::new(Vec::<String>::new(), DEFAULT_CAPACITY)
    }
}

impl ActivityFeed {
    /// A feed redacting `redact` keys, keeping `capacity` events per receiver.
    pub fn new<I, S>(redact: I, capacity: usize) -> ActivityFeed
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let capacity = capacity.max(1);
        ActivityFeed {
            redact: redact
                .into_iter()
                .map(|k| k.as_ref().to_lowercase())
                .collect(),
            capacity,
            all: broadcast::channel(capacity).0,
        }
    }

    /// Events per receiver before the oldest are dropped.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Every session's events from now on.
    pub fn subscribe_all(&self) -> broadcast::Receiver<Arc<Event>> {
        self.all.subscribe()
    }

    /// Publishes an event that belongs to no call (a tool source's
    /// definition change); its `session` is empty.
    pub fn announce(&self, event: Event) {
        self.publish(Arc::new(event));
    }

    pub(crate) fn publish(&self, event: Arc<Event>) {
        // No receiver is not an error: nobody is watching.
        let _ = self.all.send(event);
    }

    /// A copy of `arguments` with the configured keys redacted.
    pub fn redact(&self, arguments: &Value) -> Value {
        if self.redact.is_empty() {
            return arguments.clone();
        }
        match arguments {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        if self.redact.contains(&k.to_lowercase()) {
                            (k.clone(), Value::String(REDACTED.to_owned()))
                        } else {
                            (k.clone(), self.redact(v))
                        }
                    })
                    .collect::<Map<String, Value>>(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.redact(v)).collect()),
            other => other.clone(),
        }
    }
}

/// `value`, or when its JSON text is longer than [`MAX_RESULT_CHARS`] the
/// first that many characters of it followed by how much was cut.
fn bounded(value: Value) -> Value {
    let text = value.to_string();
    let total = text.chars().count();
    if total <= MAX_RESULT_CHARS {
        return value;
    }
    let kept: String = text.chars().take(MAX_RESULT_CHARS).collect();
    Value::String(format!(
        "{kept}… ({} of {total} characters cut)",
        total - MAX_RESULT_CHARS
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_result_is_cut_and_says_so() {
        let short = serde_json::json!({"text": "hello"});
        assert_eq!(bounded(short.clone()), short);
        let long = serde_json::json!({"text": "é".repeat(MAX_RESULT_CHARS * 2)});
        let Value::String(cut) = bounded(long) else {
            panic!("a long result stays a string")
        };
        assert!(cut.starts_with("{\"text\":\"éé"), "{cut}");
        assert!(
            cut.ends_with(&format!(
                "… ({} of {} characters cut)",
                MAX_RESULT_CHARS + 11,
                MAX_RESULT_CHARS * 2 + 11
            )),
            "the note of what was cut is missing"
        );
    }
    use serde_json::json;

    #[test]
    fn redaction_is_case_insensitive_and_deep() {
        let feed = ActivityFeed::new(["token", "Password"], 8);
        let out =
            feed.redact(&json!({"TOKEN": "t", "nested": [{"password": "p", "x": 1}], "y": 2}));
        assert_eq!(
            out,
            json!({"TOKEN": REDACTED, "nested": [{"password": REDACTED, "x": 1}], "y": 2})
        );
    }

    #[test]
    fn render_names_the_real_tool() {
        let feed = Arc::new(ActivityFeed::new(["token"], 8));
        let session = Session::new("s", quiver_tool::scope::Scope::all(), feed);
        let mut event = Event::new(&session, "mcp_github_create_issue", Status::Ok)
            .call(1, true)
            .duration(Duration::from_millis(120));
        assert_eq!(
            event.render(),
            "mcp_github_create_issue via tool_call  ok  120 ms"
        );
        event.via_bridge = false;
        event.status = Status::AwaitingApproval;
        assert_eq!(event.render(), "mcp_github_create_issue  awaiting approval");
    }
}
