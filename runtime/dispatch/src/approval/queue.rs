//! An API-driven approver: requests wait in a queue until they are
//! answered by id (the daemon exposes [`ApprovalQueue::pending`] and
//! [`ApprovalQueue::answer`]). A request whose call gave up (timeout, or
//! the caller went away) leaves the queue by itself. Each answer is
//! recorded with who gave it and when ([`ApprovalQueue::answered`], the
//! last [`MAX_ANSWERED`]), so a client that comes too late can say who
//! answered first.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use tokio::sync::oneshot;

use super::{ApprovalRequest, Approver, Decision};
use crate::BoxFuture;

/// A request waiting for an answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PendingApproval {
    /// The id to answer.
    pub id: u64,
    /// When it was asked.
    pub requested_at: SystemTime,
    /// What is asked.
    pub request: ApprovalRequest,
}

/// Who answered, for answers given without a name (code in this process).
const LOCAL: &str = "local";

/// Answers kept for [`ApprovalQueue::answered`]; older ones are forgotten.
pub const MAX_ANSWERED: usize = 256;

/// A request that was answered: who answered it, when, and how.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AnsweredApproval {
    /// The request's id.
    pub id: u64,
    /// The call it was for.
    pub call_id: u64,
    /// The call's session.
    pub session: String,
    /// The real tool.
    pub tool: String,
    /// Who answered, as the answering side names itself (the daemon's API
    /// names its caller: `console`, `api`, or the program that said who it
    /// is, such as `quiver chat`).
    pub answered_by: String,
    /// When, in milliseconds since the Unix epoch.
    pub answered_ms: i64,
    /// `approve`, `approve_for_session` or `deny`.
    pub decision: &'static str,
}

impl Decision {
    /// `approve`, `approve_for_session` or `deny`.
    pub fn word(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::ApproveForSession => "approve_for_session",
            Decision::Deny { .. } => "deny",
        }
    }
}

/// An answer that could not be delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No pending request has this id (answered already, or gave up).
    #[error("no pending approval with id {0}")]
    NotPending(u64),
    /// Another client answered the request first.
    #[error("approval {} was answered already by {} ({})", .0.id, .0.answered_by, .0.decision)]
    AnsweredAlready(Box<AnsweredApproval>),
    /// The digest does not match the request's arguments.
    #[error("approval {id} is for arguments with digest {expected}, not {given}")]
    DigestMismatch {
        /// The request.
        id: u64,
        /// Its digest.
        expected: String,
        /// The digest the answer named.
        given: String,
    },
}

#[derive(Debug, Default)]
struct Inner {
    next: AtomicU64,
    pending: Mutex<BTreeMap<u64, (PendingApproval, oneshot::Sender<Decision>)>>,
    answered: Mutex<VecDeque<AnsweredApproval>>,
}

/// The queue; clone it freely (clones share the queue).
#[derive(Debug, Clone, Default)]
pub struct ApprovalQueue {
    inner: Arc<Inner>,
}

/// Removes a request from the queue when its call stops waiting.
struct Withdraw {
    inner: Arc<Inner>,
    id: u64,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let removed = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        if removed.is_some() {
            pending_gauge().decrement(1.0);
        }
    }
}

/// `quiver_approvals_pending`: requests waiting for an answer, in every
/// queue of the process (the daemon has one).
fn pending_gauge() -> metrics::Gauge {
    metrics::gauge!("quiver_approvals_pending")
}

impl ApprovalQueue {
    /// An empty queue.
    pub fn new() -> ApprovalQueue {
        // The series exists (at 0) before the first request waits.
        pending_gauge().increment(0.0);
        ApprovalQueue::default()
    }

    /// The requests waiting, oldest first.
    pub fn pending(&self) -> Vec<PendingApproval> {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Number of requests waiting.
    pub fn len(&self) -> usize {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Answers request `id` (recorded as answered by `local`: code in
    /// this process).
    pub fn answer(&self, id: u64, decision: Decision) -> Result<(), AnswerError> {
        self.answer_as(id, None, decision, LOCAL)
    }

    /// Answers request `id`, only if its arguments digest is `digest` (when
    /// given): what the person saw is what gets approved. Recorded as
    /// answered by `local`; see [`ApprovalQueue::answer_as`].
    pub fn answer_checked(
        &self,
        id: u64,
        digest: Option<&str>,
        decision: Decision,
    ) -> Result<(), AnswerError> {
        self.answer_as(id, digest, decision, LOCAL)
    }

    /// The answers given so far (the last [`MAX_ANSWERED`]), oldest first.
    pub fn answered(&self) -> Vec<AnsweredApproval> {
        self.lock_answered().iter().cloned().collect()
    }

    /// How the request for call `call_id` was answered, if it was (and is
    /// among the last [`MAX_ANSWERED`]).
    pub fn answer_for_call(&self, call_id: u64) -> Option<AnsweredApproval> {
        self.lock_answered()
            .iter()
            .rev()
            .find(|a| a.call_id == call_id)
            .cloned()
    }

    fn lock_answered(&self) -> std::sync::MutexGuard<'_, VecDeque<AnsweredApproval>> {
        self.inner
            .answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers request `id` as `by`, only if its arguments digest is
    /// `digest` (when given). A request answered already is
    /// [`AnswerError::AnsweredAlready`], naming who answered it.
    pub fn answer_as(
        &self,
        id: u64,
        digest: Option<&str>,
        decision: Decision,
        by: &str,
    ) -> Result<(), AnswerError> {
        let mut pending = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some((entry, _)) = pending.get(&id) else {
            drop(pending);
            return Err(match self.lock_answered().iter().find(|a| a.id == id) {
                Some(answered) => AnswerError::AnsweredAlready(Box::new(answered.clone())),
                None => AnswerError::NotPending(id),
            });
        };
        if let Some(given) = digest
            && given != entry.request.digest
        {
            return Err(AnswerError::DigestMismatch {
                id,
                expected: entry.request.digest.clone(),
                given: given.to_owned(),
            });
        }
        let Some((entry, sender)) = pending.remove(&id) else {
            return Err(AnswerError::NotPending(id));
        };
        pending_gauge().decrement(1.0);
        // Recorded while the pending map is still locked, so a second
        // answer always finds who gave the first.
        let mut answered = self.lock_answered();
        if answered.len() >= MAX_ANSWERED {
            answered.pop_front();
        }
        answered.push_back(AnsweredApproval {
            id,
            call_id: entry.request.call_id,
            session: entry.request.session,
            tool: entry.request.tool,
            answered_by: by.to_owned(),
            answered_ms: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            decision: decision.word(),
        });
        drop(answered);
        sender
            .send(decision)
            .map_err(|_| AnswerError::NotPending(id))
    }
}

impl Approver for ApprovalQueue {
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (sender, receiver) = oneshot::channel();
        let entry = PendingApproval {
            id,
            requested_at: SystemTime::now(),
            request,
        };
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, (entry, sender));
        pending_gauge().increment(1.0);
        let withdraw = Withdraw {
            inner: self.inner.clone(),
            id,
        };
        Box::pin(async move {
            let _withdraw = withdraw;
            receiver.await.unwrap_or(Decision::Deny {
                reason: "the approval queue went away".to_owned(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(digest: &str) -> ApprovalRequest {
        ApprovalRequest {
            call_id: 1,
            session: "s".into(),
            tool: "t".into(),
            via_bridge: false,
            arguments: json!({}),
            digest: digest.into(),
        }
    }

    #[tokio::test]
    async fn answers_reach_the_waiting_call_once() {
        let queue = ApprovalQueue::new();
        let waiting = tokio::spawn(queue.decide(request("abc")));
        while queue.is_empty() {
            tokio::task::yield_now().await;
        }
        let id = queue.pending()[0].id;
        assert!(matches!(
            queue.answer_checked(id, Some("zzz"), Decision::Approve),
            Err(AnswerError::DigestMismatch { .. })
        ));
        queue
            .answer_as(id, Some("abc"), Decision::Approve, "console")
            .unwrap();
        assert_eq!(waiting.await.unwrap(), Decision::Approve);
        let Err(AnswerError::AnsweredAlready(first)) = queue.answer(
            id,
            Decision::Deny {
                reason: "late".into(),
            },
        ) else {
            panic!("a second answer is refused naming the first")
        };
        assert_eq!(
            (first.answered_by.as_str(), first.decision, first.call_id),
            ("console", "approve", 1)
        );
        assert_eq!(queue.answer_for_call(1).unwrap().answered_by, "console");
        assert_eq!(
            queue.answer(99, Decision::Approve),
            Err(AnswerError::NotPending(99))
        );
    }

    #[tokio::test]
    async fn a_call_that_stops_waiting_leaves_the_queue() {
        let queue = ApprovalQueue::new();
        let future = queue.decide(request("abc"));
        assert_eq!(queue.len(), 1);
        drop(future);
        assert!(queue.is_empty());
    }
}
