//! 1,000 concurrent calls from 50 sessions, half of them waiting for
//! approval at the same time: the others finish while those wait (a call
//! waiting for approval blocks nobody), and afterwards every call has
//! exactly one final event, in its own session's feed, with its own tool
//! and arguments: none lost, none misattributed.

use quiver_tests::dispatch as dispatch_support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dispatch_support::{approver, drain, fixture, stored_approvals};
use quiver_dispatch::approval::Decision;
use quiver_dispatch::{ApprovalPolicy, Guardrails, Status};
use serde_json::json;

const SESSIONS: usize = 50;
const CALLS: usize = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_calls_none_lost_or_misattributed() {
    let (_dir, queue) = stored_approvals().await;
    let policy =
        ApprovalPolicy::new(["mcp_github_create_issue"], Duration::from_secs(600)).unwrap();
    let f = Arc::new(fixture(Guardrails::default(), policy, approver(&queue)));
    let sessions: Vec<_> = (0..SESSIONS)
        .map(|i| f.session(&format!("session-{i}"), &["*"]))
        .collect();
    let mut receivers: Vec<_> = sessions.iter().map(|s| s.subscribe()).collect();
    let mut all = f.feed.subscribe_all();

    let mut approved_calls = Vec::new();
    let mut free_calls = Vec::new();
    for n in 0..CALLS {
        let session = sessions[n % SESSIONS].clone();
        let f = f.clone();
        let needs_approval = n.is_multiple_of(2);
        let task = tokio::spawn(async move {
            let tag = format!("{}#{n}", session.id());
            let result = if needs_approval {
                f.call(
                    &session,
                    "tool_call",
                    json!({"name": "mcp_github_create_issue", "arguments": {"repo": tag, "title": "t"}}),
                )
                .await
            } else {
                f.call(&session, "read_file", json!({"path": tag})).await
            };
            (n, result)
        });
        if needs_approval {
            approved_calls.push(task);
        } else {
            free_calls.push(task);
        }
    }
    // Every call that needs no approval finishes while 500 others wait.
    for task in free_calls {
        let (n, result) = task.await.unwrap();
        assert_eq!(result.unwrap()["ran"], "read_file", "call {n}");
    }
    while queue.waiting() < CALLS / 2 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Approve the calls whose tag number is a multiple of 4, deny the others.
    for pending in queue.pending(None).await.unwrap() {
        let tag = pending.arguments["repo"].as_str().unwrap().to_owned();
        assert!(tag.starts_with(&format!("{}#", pending.session)), "{tag}");
        let n: usize = tag.rsplit('#').next().unwrap().parse().unwrap();
        let decision = if n.is_multiple_of(4) {
            Decision::Approve
        } else {
            Decision::Deny {
                reason: "no".into(),
            }
        };
        queue
            .answer(pending.id, None, &decision, "test")
            .await
            .unwrap();
    }
    for task in approved_calls {
        let (n, result) = task.await.unwrap();
        if n.is_multiple_of(4) {
            assert_eq!(
                result.unwrap()["arguments"]["repo"]
                    .as_str()
                    .unwrap()
                    .rsplit('#')
                    .next(),
                Some(n.to_string().as_str())
            );
        } else {
            assert_eq!(result.unwrap_err().code(), "approval_denied", "call {n}");
        }
    }

    let mut finals_total = 0;
    for (i, receiver) in receivers.iter_mut().enumerate() {
        let id = format!("session-{i}");
        let events = drain(receiver);
        let mut by_call: HashMap<u64, Vec<Status>> = HashMap::new();
        for event in &events {
            assert_eq!(event.session, id);
            let tag = event
                .arguments
                .get("repo")
                .or_else(|| event.arguments.get("path"))
                .and_then(|v| v.as_str())
                .unwrap();
            assert!(tag.starts_with(&format!("{id}#")), "{tag} in {id}");
            let n: usize = tag.rsplit('#').next().unwrap().parse().unwrap();
            assert_eq!(n % SESSIONS, i);
            let expected_tool = if n.is_multiple_of(2) {
                "mcp_github_create_issue"
            } else {
                "read_file"
            };
            assert_eq!(event.tool, expected_tool);
            assert_eq!(event.via_bridge, n.is_multiple_of(2));
            let expected = match (n % 2, n % 4) {
                (1, _) => Status::Ok,
                (_, 0) if event.status.is_final() => Status::Ok,
                _ if event.status.is_final() => Status::Denied,
                _ => Status::AwaitingApproval,
            };
            assert_eq!(event.status, expected, "{tag}");
            by_call.entry(event.call_id).or_default().push(event.status);
        }
        assert_eq!(by_call.len(), CALLS / SESSIONS, "{id}");
        for statuses in by_call.values() {
            assert_eq!(statuses.iter().filter(|s| s.is_final()).count(), 1);
            assert!(statuses.last().unwrap().is_final());
        }
        finals_total += by_call.len();
    }
    assert_eq!(finals_total, CALLS);
    let everything = drain(&mut all);
    assert_eq!(everything.len(), CALLS + CALLS / 2);
    assert_eq!(queue.waiting(), 0);
    assert!(queue.pending(None).await.unwrap().is_empty());
}
