//! What changed in the store, told to every instance using it: the
//! SQLite backend tells its own process after each write; the PostgreSQL
//! backend sends each notice with the write's transaction (`NOTIFY`) and
//! every instance's listener passes it on. A notice says what to read
//! again, never the data itself.

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::records::ApprovalState;

/// The PostgreSQL channel notices travel on.
pub const CHANNEL: &str = "quiver_store";

/// Notices a receiver may fall behind by before it is told it lagged.
const CAPACITY: usize = 1024;

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notice {
    /// An activity event was stored.
    Event {
        /// Its log id.
        id: i64,
    },
    /// An approval was asked for.
    ApprovalRequested {
        /// Its id.
        id: i64,
        /// The instance whose call waits.
        instance: String,
    },
    /// An approval was answered, withdrawn or abandoned.
    ApprovalClosed {
        /// Its id.
        id: i64,
        /// The instance whose call waited.
        instance: String,
        /// How it ended.
        state: ApprovalState,
    },
    /// A session's record changed or it was deleted (its messages are read
    /// at each turn's start, so a new message is no notice).
    Session {
        /// Its id.
        id: String,
    },
    /// A source's accepted tool definitions changed.
    Pins {
        /// The source (`mcp-NAME`).
        source: String,
    },
    /// An MCP server's stored OAuth credentials changed.
    Credentials {
        /// The server.
        server: String,
    },
    /// An instance started, stopped or was found gone.
    Instance {
        /// Its id.
        id: String,
    },
    /// Notices may have been missed (the listener's connection was lost
    /// and made again): read again whatever is watched.
    Resync,
}

/// Where a backend sends its notices and receivers subscribe.
#[derive(Debug, Clone)]
pub struct NoticeBus {
    sender: broadcast::Sender<Notice>,
}

impl Default for NoticeBus {
    fn default() -> Self {
        NoticeBus {
            sender: broadcast::channel(CAPACITY).0,
        }
    }
}

impl NoticeBus {
    /// Tells every receiver (none listening is no error).
    pub fn send(&self, notice: Notice) {
        let _ = self.sender.send(notice);
    }

    /// A receiver of the notices sent from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.sender.subscribe()
    }

    /// The notice as the PostgreSQL backend sends it (JSON).
    pub fn payload(notice: &Notice) -> String {
        serde_json::to_string(notice).unwrap_or_default()
    }

    /// A payload read back; `None` for one this build does not know (sent
    /// by a newer instance), which is skipped.
    pub fn parse(payload: &str) -> Option<Notice> {
        serde_json::from_str(payload).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_read_back_and_unknown_ones_are_skipped() {
        let notice = Notice::ApprovalClosed {
            id: 7,
            instance: "a".into(),
            state: ApprovalState::Answered,
        };
        let payload = NoticeBus::payload(&notice);
        assert_eq!(
            payload,
            r#"{"kind":"approval_closed","id":7,"instance":"a","state":"answered"}"#
        );
        assert_eq!(NoticeBus::parse(&payload), Some(notice));
        assert_eq!(NoticeBus::parse(r#"{"kind":"from_the_future"}"#), None);
    }
}
