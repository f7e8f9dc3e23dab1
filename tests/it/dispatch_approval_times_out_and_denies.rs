//! A call that needs approval waits for an answer in the store; when nobody
//! answers within the timeout it is denied (`on_timeout: deny`), the tool
//! never runs and the request is withdrawn. An answer of "approve for
//! this session" lets later calls of that tool through without asking;
//! an answer that names the wrong arguments digest is refused.

use quiver_tests::dispatch as dispatch_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dispatch_support::{approver, drain, fixture, stored_approvals};
use quiver_daemon::approvals::AnswerError;
use quiver_dispatch::approval::{Decision, arguments_digest};
use quiver_dispatch::{ApprovalPolicy, Guardrails, Status};
use serde_json::json;

#[tokio::test]
async fn unanswered_approval_times_out_and_denies() {
    let (_dir, queue) = stored_approvals().await;
    let policy = ApprovalPolicy::new(["mcp_github_create_*"], Duration::from_millis(50)).unwrap();
    let f = fixture(Guardrails::default(), policy, approver(&queue));
    let session = f.session("s1", &["*"]);
    let mut events = session.subscribe();
    let err = f
        .call(
            &session,
            "tool_call",
            json!({"name": "mcp_github_create_issue", "arguments": {"repo": "r", "title": "t", "token": "hunter2"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "approval_timed_out");
    assert_eq!(err.status(), Status::Denied);
    assert_eq!(queue.waiting(), 0);
    // The request was withdrawn, saying why.
    let mut closed = Vec::new();
    while closed.is_empty() {
        tokio::time::sleep(Duration::from_millis(2)).await;
        closed = queue.closed(None, 10).await.unwrap();
    }
    assert_eq!(closed[0].state, quiver_store::ApprovalState::Withdrawn);
    assert!(queue.pending(None).await.unwrap().is_empty());
    assert_eq!(f.invoked.load(Ordering::SeqCst), 0);
    let events = drain(&mut events);
    let statuses: Vec<Status> = events.iter().map(|e| e.status).collect();
    assert_eq!(statuses, [Status::AwaitingApproval, Status::Denied]);
    assert_eq!(events[0].call_id, events[1].call_id);
    assert_eq!(events[0].arguments["token"], "[redacted]");
    assert_eq!(
        events[0].render(),
        "mcp_github_create_issue via tool_call  awaiting approval"
    );
}

#[tokio::test]
async fn approve_for_session_skips_later_prompts_in_that_session_only() {
    let (_dir, queue) = stored_approvals().await;
    let policy = ApprovalPolicy::new(["mcp_github_create_*"], Duration::from_secs(600)).unwrap();
    let f = Arc::new(fixture(Guardrails::default(), policy, approver(&queue)));
    let one = f.session("one", &["*"]);
    let arguments = json!({"repo": "r", "title": "t"});
    let call = {
        let (f, one, arguments) = (f.clone(), one.clone(), arguments.clone());
        tokio::spawn(async move { f.call(&one, "mcp_github_create_issue", arguments).await })
    };
    while queue.waiting() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let pending = queue.pending(None).await.unwrap();
    assert_eq!(pending.len(), 1);
    let request = &pending[0];
    assert_eq!(
        (request.tool.as_str(), request.session.as_str()),
        ("mcp_github_create_issue", "one")
    );
    assert_eq!(request.digest, arguments_digest(&arguments));
    let wrong = queue
        .answer(
            pending[0].id,
            Some(&"0".repeat(64)),
            &Decision::Approve,
            "test",
        )
        .await;
    assert!(matches!(wrong, Err(AnswerError::DigestMismatch { .. })));
    queue
        .answer(
            pending[0].id,
            Some(&request.digest),
            &Decision::ApproveForSession,
            "test",
        )
        .await
        .unwrap();
    call.await.unwrap().unwrap();
    // No prompt for the same tool in the same session, other arguments too.
    f.call(
        &one,
        "mcp_github_create_issue",
        json!({"repo": "q", "title": "u"}),
    )
    .await
    .unwrap();
    assert_eq!(queue.waiting(), 0);
    assert_eq!(f.invoked.load(Ordering::SeqCst), 2);
    // Another session still has to ask.
    let two = f.session("two", &["*"]);
    let call = {
        let (f, two) = (f.clone(), two.clone());
        tokio::spawn(async move {
            f.call(
                &two,
                "mcp_github_create_issue",
                json!({"repo": "r", "title": "t"}),
            )
            .await
        })
    };
    while queue.waiting() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let id = queue.pending(None).await.unwrap()[0].id;
    queue
        .answer(
            id,
            None,
            &Decision::Deny {
                reason: "not today".into(),
            },
            "test",
        )
        .await
        .unwrap();
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.code(), "approval_denied");
    assert!(err.to_string().contains("not today"));
    assert_eq!(f.invoked.load(Ordering::SeqCst), 2);
}
