//! What running turns produce as it happens, for the API's streams: the
//! model's text as it streams in (`message.delta`), each whole answer with
//! its usage (`message.done`), and the session's tool activity
//! (`activity`), all on one broadcast channel in the order they happened
//! (the activity through the session's [`EventObserver`], called in the
//! turn's own task, so nothing reorders it).
//!
//! Two readers: `POST /v1/sessions/ID/messages?stream=true` (the turn's
//! items, then `turn.done` with the outcome or `error`), and the session
//! feed `GET /v1/sessions/ID/events`, which sends the stored activity
//! records (with their log ids, for replay) and puts the message items
//! between them where they happened (see [`OrderedMessages`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use quiver_agent::TurnLog;
use quiver_dispatch::{Event, EventObserver, Session};
use quiver_model::{FinishReason, Message, StreamDelta, Usage};
use quiver_store::{EventRecord, Store, StoreError};

/// `message.delta`: a piece of an answer.
pub const MESSAGE_DELTA: &str = "message.delta";
/// `message.done`: a whole answer, as stored.
pub const MESSAGE_DONE: &str = "message.done";
/// `activity`: a tool call's event (the feed's record shape).
pub const ACTIVITY: &str = "activity";
/// `turn.done`: the turn's outcome (the JSON a plain POST answers).
pub const TURN_DONE: &str = "turn.done";
/// `error`: the turn failed (`{"error": code, "message"}`).
pub const TURN_ERROR: &str = "error";

/// Longest a message item waits on the session feed for the activity
/// records that came before it (the log writer may have dropped them).
const ACTIVITY_WAIT: Duration = Duration::from_secs(2);

/// One thing a turn produced.
#[derive(Debug, Clone)]
pub struct TurnItem {
    /// The session.
    pub session: String,
    /// [`MESSAGE_DELTA`], [`MESSAGE_DONE`] or [`ACTIVITY`].
    pub event: &'static str,
    /// Its JSON.
    pub data: Value,
}

/// The channel of every session's turn items.
pub type TurnItems = broadcast::Sender<Arc<TurnItem>>;

fn send(items: &TurnItems, session: &str, event: &'static str, data: impl FnOnce() -> Value) {
    // Nobody watching: nothing is built.
    if items.receiver_count() > 0 {
        let item = TurnItem {
            session: session.to_owned(),
            event,
            data: data(),
        };
        let _ = items.send(Arc::new(item));
    }
}

/// Has `session`'s tool events go into `items` as they are recorded.
pub(crate) fn observe(session: &Session, items: &TurnItems, instance: &str) {
    let items = items.clone();
    let id = session.id().to_owned();
    let instance = instance.to_owned();
    session.set_observer(Some(EventObserver(Arc::new(move |event: &Arc<Event>| {
        send(&items, &id, ACTIVITY, || {
            json!(EventRecord::from_event(event, Some(&instance)))
        });
    }))));
}

/// A turn's log: messages to the session's rows as they happen, and the
/// model's output to the turn items.
pub(crate) struct StreamingLog {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) session: String,
    pub(crate) items: TurnItems,
}

#[async_trait::async_trait]
impl TurnLog for StreamingLog {
    async fn append(&mut self, message: &Message) -> Result<(), StoreError> {
        self.store
            .append_message(&self.session, message)
            .await
            .map(|_| ())
    }

    fn delta(&mut self, step: u32, delta: StreamDelta<'_>) {
        let session = &self.session;
        send(&self.items, session, MESSAGE_DELTA, || match delta {
            StreamDelta::Text(text) => json!({"session": session, "step": step, "text": text}),
            StreamDelta::ToolCall { index, id, name } => json!({
                "session": session, "step": step,
                "tool_call": {"index": index, "id": id, "name": name},
            }),
        });
    }

    fn message_done(&mut self, step: u32, message: &Message, usage: Usage, finish: &FinishReason) {
        let session = &self.session;
        send(&self.items, session, MESSAGE_DONE, || {
            json!({
                "session": session,
                "step": step,
                "message": message,
                "usage": usage,
                "finish": finish.as_str(),
            })
        });
    }
}

/// The key an activity item and its stored record share.
fn activity_key(record: &Value) -> (Value, Value, Value, Value) {
    (
        record["time_ms"].clone(),
        record["call_id"].clone(),
        record["tool"].clone(),
        record["status"].clone(),
    )
}

/// Puts a session's message items between its stored activity records
/// where they happened. The records come from the log writer, a step
/// behind the turn; the turn items carry the same activity in the true
/// order. A message item is held until every activity item before it has
/// been sent as a record (or [`ACTIVITY_WAIT`] passed).
pub(crate) struct OrderedMessages {
    session: String,
    /// Activity seen in the turn items and not yet sent as a record, with
    /// the position of the item.
    unsent: VecDeque<(u64, (Value, Value, Value, Value))>,
    /// Records sent before their turn item came.
    early: Vec<(Value, Value, Value, Value)>,
    /// Message items waiting, with their position.
    held: VecDeque<(u64, Arc<TurnItem>, tokio::time::Instant)>,
    position: u64,
}

impl OrderedMessages {
    pub(crate) fn new(session: String) -> OrderedMessages {
        OrderedMessages {
            session,
            unsent: VecDeque::new(),
            early: Vec::new(),
            held: VecDeque::new(),
            position: 0,
        }
    }

    /// Takes in a turn item (of any session).
    pub(crate) fn item(&mut self, item: Arc<TurnItem>) {
        if item.session != self.session {
            return;
        }
        self.position += 1;
        if item.event == ACTIVITY {
            let key = activity_key(&item.data);
            match self.early.iter().position(|k| *k == key) {
                Some(at) => {
                    self.early.swap_remove(at);
                }
                None => self.unsent.push_back((self.position, key)),
            }
        } else {
            self.held
                .push_back((self.position, item, tokio::time::Instant::now()));
        }
    }

    /// Notes that `record` (of this session) was sent.
    pub(crate) fn record_sent(&mut self, record: &EventRecord) {
        let key = activity_key(&json!(record));
        match self.unsent.iter().position(|(_, k)| *k == key) {
            Some(at) => {
                self.unsent.remove(at);
            }
            None => {
                self.early.push(key);
                // Bounded: a record whose item this reader never sees (it
                // subscribed in between) is not kept for ever.
                if self.early.len() > 1024 {
                    self.early.remove(0);
                }
            }
        }
    }

    /// The next message item whose earlier activity was all sent.
    pub(crate) fn ready(&mut self) -> Option<Arc<TurnItem>> {
        let (position, _, since) = self.held.front()?;
        let blocked = self.unsent.front().is_some_and(|(at, _)| at < position);
        if blocked && since.elapsed() < ACTIVITY_WAIT {
            return None;
        }
        if blocked {
            // The records are not coming (the log writer fell behind and
            // dropped them): stop waiting for those before this item.
            let position = *position;
            self.unsent.retain(|(at, _)| *at > position);
        }
        self.held.pop_front().map(|(_, item, _)| item)
    }

    /// When the first held item stops waiting, if one waits.
    pub(crate) fn deadline(&self) -> Option<tokio::time::Instant> {
        self.held
            .front()
            .map(|(_, _, since)| *since + ACTIVITY_WAIT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(event: &'static str, data: Value) -> Arc<TurnItem> {
        Arc::new(TurnItem {
            session: "s".into(),
            event,
            data,
        })
    }

    fn record(time_ms: i64) -> EventRecord {
        EventRecord {
            id: 1,
            time_ms,
            instance: None,
            session: "s".into(),
            call_id: 7,
            tool: "echo".into(),
            via_bridge: false,
            arguments: Value::Null,
            status: quiver_dispatch::Status::Ok,
            duration_ms: 0,
            detail: None,
            result: None,
            answered_by: None,
            line: String::new(),
        }
    }

    #[tokio::test]
    async fn a_message_waits_for_the_activity_before_it_and_not_after() {
        let mut order = OrderedMessages::new("s".into());
        order.item(item(MESSAGE_DONE, json!({"step": 1})));
        assert!(order.ready().is_some(), "nothing came before it");
        order.item(item(ACTIVITY, json!(record(5))));
        order.item(item(MESSAGE_DELTA, json!({"step": 2})));
        assert!(order.ready().is_none(), "its activity is not sent yet");
        order.record_sent(&record(5));
        assert_eq!(order.ready().unwrap().data["step"], 2);
        // A record sent before its item does not hold later messages.
        order.record_sent(&record(9));
        order.item(item(ACTIVITY, json!(record(9))));
        order.item(item(MESSAGE_DONE, json!({"step": 2})));
        assert!(order.ready().is_some());
        // Other sessions' items are not this feed's.
        let mut other = (*item(MESSAGE_DONE, json!({}))).clone();
        other.session = "t".into();
        order.item(Arc::new(other));
        assert!(order.ready().is_none());
    }
}
