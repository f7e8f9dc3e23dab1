//! Arguments are validated against the real tool's JSON Schema before it
//! runs: on failure the tool is not invoked, and the error lists every
//! problem with its JSON pointer and carries the schema.

use quiver_tests::dispatch as dispatch_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use dispatch_support::{drain, fixture};
use quiver_dispatch::approval::DenyAll;
use quiver_dispatch::{ApprovalPolicy, Guardrails, Status};
use serde_json::json;

#[tokio::test]
async fn every_problem_is_reported_and_nothing_runs() {
    let f = fixture(
        Guardrails::default(),
        ApprovalPolicy::default(),
        Arc::new(DenyAll),
    );
    let session = f.session("s1", &["*"]);
    let mut events = session.subscribe();
    for (name, arguments) in [
        (
            "tool_call",
            json!({"name": "mcp_github_create_issue", "arguments": {"repo": 7, "tag": ["x"]}}),
        ),
        ("mcp_github_create_issue", json!({"repo": 7, "tag": ["x"]})),
    ] {
        let err = f.call(&session, name, arguments).await.unwrap_err();
        assert_eq!(err.code(), "invalid_arguments");
        let out = err.to_json();
        let mut pointers: Vec<String> = out["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pointer"].as_str().unwrap().to_owned())
            .collect();
        pointers.sort();
        // Missing `title` (at the root), `repo` not a string, `tag` not a string.
        assert_eq!(pointers, ["", "/repo", "/tag"], "{out}");
        assert_eq!(out["input_schema"]["required"], json!(["repo", "title"]));
        assert!(out["message"].as_str().unwrap().contains("title"), "{out}");
    }
    let missing = f.call(&session, "read_file", json!({})).await.unwrap_err();
    assert_eq!(missing.code(), "invalid_arguments");
    assert_eq!(f.invoked.load(Ordering::SeqCst), 0);

    let events = drain(&mut events);
    assert_eq!(events.len(), 3);
    assert!(events.iter().all(|e| e.status == Status::Error));
    assert_eq!(events[0].tool, "mcp_github_create_issue");
    assert!(events[0].via_bridge && !events[1].via_bridge);
}
