//! Approvals kept in the store, so that any instance using it can list and
//! answer them: a call that needs approval stores its request and waits;
//! an answer given through any instance's API or console is stored, and
//! the store's notice wakes the call on the instance it runs on (in this
//! process for SQLite; through `NOTIFY` for PostgreSQL). A request whose
//! call stops waiting (timeout, turn gone) is withdrawn; one whose
//! instance dies is abandoned by whoever finds its lease expired.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use quiver_dispatch::BoxFuture;
use quiver_dispatch::approval::{ApprovalRequest, Approver, Decision};
use quiver_store::{
    AnswerOutcome, ApprovalAnswer, ApprovalRecord, ApprovalState, NewApproval, Notice, Store,
    StoreError,
};

/// Answers remembered for [`Approvals::answered_by`] (the activity
/// record of a call's outcome names who answered its approval).
const REMEMBERED: usize = 256;

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// No request has this id.
    #[error("no pending approval with id {0}")]
    Unknown(i64),
    /// It was answered, withdrawn or abandoned already.
    #[error("{}", closed_message(.0))]
    Closed(Box<ApprovalRecord>),
    /// The digest does not match the request's arguments.
    #[error("approval {id} is for arguments with digest {expected}, not {given}")]
    DigestMismatch {
        /// The request.
        id: i64,
        /// Its digest.
        expected: String,
        /// The digest the answer named.
        given: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn closed_message(record: &ApprovalRecord) -> String {
    match record.state {
        ApprovalState::Answered => format!(
            "approval {} was answered already by {} ({})",
            record.id,
            record.answered_by.as_deref().unwrap_or("someone"),
            record.decision.as_deref().unwrap_or("?")
        ),
        state => format!(
            "approval {} is no longer pending: {} ({})",
            record.id,
            state.as_str(),
            record.reason.as_deref().unwrap_or("no reason given")
        ),
    }
}

/// A closed request as the API shows who answered it: the fields a client
/// that came too late needs (`answered_by`, `decision`, `answered_ms`), and
/// how it ended.
pub fn answered_json(record: &ApprovalRecord) -> Value {
    json!({
        "id": record.id,
        "instance": record.instance,
        "call_id": record.call_id,
        "session": record.session,
        "tool": record.tool,
        "state": record.state,
        "answered_by": record.answered_by,
        "answered_ms": record.closed_ms,
        "decision": record.decision,
        "reason": record.reason,
    })
}

/// A pending request as `GET /v1/approvals` lists it.
pub fn pending_json(record: &ApprovalRecord) -> Value {
    json!({
        "id": record.id,
        "instance": record.instance,
        "requested_ms": record.requested_ms,
        "session": record.session,
        "call_id": record.call_id,
        "tool": record.tool,
        "via_bridge": record.via_bridge,
        "arguments": record.arguments,
        "digest": record.digest,
    })
}

/// This instance's side of the approvals in the store: its waiting calls,
/// and answers through it.
pub struct Approvals {
    store: Arc<dyn Store>,
    instance: String,
    /// Calls of this instance waiting, by request id.
    waiting: Mutex<HashMap<i64, oneshot::Sender<Decision>>>,
    /// Who answered this instance's recent calls, by call id.
    answered: Mutex<VecDeque<(u64, String)>>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// `quiver_approvals_pending`: this instance's calls waiting for an answer.
fn pending_gauge() -> metrics::Gauge {
    metrics::gauge!("quiver_approvals_pending")
}

/// What a closed request decides for the call that waited.
fn decision_of(record: &ApprovalRecord) -> Decision {
    match (record.state, record.decision.as_deref()) {
        (ApprovalState::Answered, Some("approve")) => Decision::Approve,
        (ApprovalState::Answered, Some("approve_for_session")) => Decision::ApproveForSession,
        _ => Decision::Deny {
            reason: record
                .reason
                .clone()
                .unwrap_or_else(|| format!("the approval was {}", record.state.as_str())),
        },
    }
}

impl Approvals {
    /// The approvals of `instance` in `store`; [`Approvals::watch`] must
    /// run for answers to reach the waiting calls.
    pub fn new(store: Arc<dyn Store>, instance: &str) -> Arc<Approvals> {
        pending_gauge().increment(0.0);
        Arc::new(Approvals {
            store,
            instance: instance.to_owned(),
            waiting: Mutex::default(),
            answered: Mutex::default(),
        })
    }

    /// Wakes the waiting calls as the store says their requests closed;
    /// runs until the store's notices end.
    pub async fn watch(self: Arc<Self>) {
        let mut notices = self.store.notices();
        loop {
            match notices.recv().await {
                Ok(Notice::ApprovalClosed { id, instance, .. }) if instance == self.instance => {
                    self.deliver(id).await;
                }
                Ok(Notice::Resync) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    // Some answers may have gone by unseen: ask again for
                    // every call still waiting.
                    let ids: Vec<i64> = self.lock_waiting().keys().copied().collect();
                    for id in ids {
                        self.deliver(id).await;
                    }
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    }

    fn lock_waiting(&self) -> std::sync::MutexGuard<'_, HashMap<i64, oneshot::Sender<Decision>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands request `id`'s outcome to its waiting call, if it is closed
    /// and the call still waits here.
    async fn deliver(&self, id: i64) {
        if !self.lock_waiting().contains_key(&id) {
            return;
        }
        let record = match self.store.approval(id).await {
            Ok(Some(record)) if record.state != ApprovalState::Pending => record,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(%error, id, "cannot read an approval's answer; it is read again on the next notice");
                return;
            }
        };
        let Some(sender) = self.lock_waiting().remove(&id) else {
            return;
        };
        if let Some(by) = &record.answered_by {
            let mut answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
            if answered.len() >= REMEMBERED {
                answered.pop_front();
            }
            answered.push_back((record.call_id, by.clone()));
        }
        let _ = sender.send(decision_of(&record));
    }

    /// Who answered the approval of this instance's call `call_id`, if it
    /// waited for one lately.
    pub fn answered_by(&self, call_id: u64) -> Option<String> {
        self.answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .rev()
            .find(|(call, _)| *call == call_id)
            .map(|(_, by)| by.clone())
    }

    /// How many of this instance's calls wait for an answer.
    pub fn waiting(&self) -> usize {
        self.lock_waiting().len()
    }

    /// Every pending request in the store (of one session, or all),
    /// whichever instance asked, oldest first.
    pub async fn pending(&self, session: Option<&str>) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.store.pending_approvals(session).await
    }

    /// The last `limit` closed requests, newest first.
    pub async fn closed(
        &self,
        session: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.store.closed_approvals(session, limit).await
    }

    /// Answers request `id` as `by` (only for arguments with digest
    /// `digest`, when given); returns the request as answered.
    pub async fn answer(
        &self,
        id: i64,
        digest: Option<&str>,
        decision: &Decision,
        by: &str,
    ) -> Result<ApprovalRecord, AnswerError> {
        let answer = ApprovalAnswer {
            decision: decision.word().to_owned(),
            reason: match decision {
                Decision::Deny { reason } => Some(reason.clone()),
                _ => None,
            },
            answered_by: by.to_owned(),
            digest: digest.map(str::to_owned),
        };
        match self.store.answer_approval(id, &answer).await? {
            AnswerOutcome::Answered(record) => Ok(record),
            AnswerOutcome::Unknown => Err(AnswerError::Unknown(id)),
            AnswerOutcome::Closed(record) => Err(AnswerError::Closed(Box::new(record))),
            AnswerOutcome::DigestMismatch { expected } => Err(AnswerError::DigestMismatch {
                id,
                expected,
                given: digest.unwrap_or_default().to_owned(),
            }),
        }
    }

    async fn wait(self: Arc<Self>, request: ApprovalRequest) -> Decision {
        let new = NewApproval {
            instance: self.instance.clone(),
            session: request.session,
            call_id: request.call_id,
            tool: request.tool,
            via_bridge: request.via_bridge,
            arguments: request.arguments,
            digest: request.digest,
        };
        let record = match self.store.request_approval(&new).await {
            Ok(record) => record,
            Err(error) => {
                return Decision::Deny {
                    reason: format!("the approval request could not be stored: {error}"),
                };
            }
        };
        let (sender, receiver) = oneshot::channel();
        self.lock_waiting().insert(record.id, sender);
        pending_gauge().increment(1.0);
        let _withdraw = Withdraw {
            approvals: self.clone(),
            id: record.id,
        };
        // An answer may have come between storing the request and waiting.
        self.deliver(record.id).await;
        receiver.await.unwrap_or(Decision::Deny {
            reason: "the approvals of this instance went away".to_owned(),
        })
    }
}

/// Withdraws a request whose call stops waiting before it was answered.
struct Withdraw {
    approvals: Arc<Approvals>,
    id: i64,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        pending_gauge().decrement(1.0);
        if self.approvals.lock_waiting().remove(&self.id).is_none() {
            // Answered: nothing to withdraw.
            return;
        }
        let approvals = self.approvals.clone();
        let id = self.id;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let reason = "the call stopped waiting before anyone answered (the approval timed out, or its turn ended)";
                if let Err(error) = approvals.store.withdraw_approval(id, reason).await {
                    tracing::warn!(%error, id, "an approval that nobody waits for could not be withdrawn");
                }
            });
        }
    }
}

/// The approver of an instance: its calls' requests go to the store.
#[derive(Debug, Clone)]
pub struct StoredApprover(pub Arc<Approvals>);

impl Approver for StoredApprover {
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        Box::pin(self.0.clone().wait(request))
    }
}
