//! An API-driven approver: requests wait in a queue until they are
//! answered by id (the daemon exposes [`ApprovalQueue::pending`] and
//! [`ApprovalQueue::answer`]). A request whose call gave up (timeout, or
//! the caller went away) leaves the queue by itself.

use std::collections::BTreeMap;
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

/// An answer that could not be delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No pending request has this id (answered already, or gave up).
    #[error("no pending approval with id {0}")]
    NotPending(u64),
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

    /// Answers request `id`.
    pub fn answer(&self, id: u64, decision: Decision) -> Result<(), AnswerError> {
        self.answer_checked(id, None, decision)
    }

    /// Answers request `id`, only if its arguments digest is `digest` (when
    /// given): what the person saw is what gets approved.
    pub fn answer_checked(
        &self,
        id: u64,
        digest: Option<&str>,
        decision: Decision,
    ) -> Result<(), AnswerError> {
        let mut pending = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some((entry, _)) = pending.get(&id) else {
            return Err(AnswerError::NotPending(id));
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
        let Some((_, sender)) = pending.remove(&id) else {
            return Err(AnswerError::NotPending(id));
        };
        pending_gauge().decrement(1.0);
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
            .answer_checked(id, Some("abc"), Decision::Approve)
            .unwrap();
        assert_eq!(waiting.await.unwrap(), Decision::Approve);
        assert_eq!(
            queue.answer(id, Decision::Approve),
            Err(AnswerError::NotPending(id))
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
