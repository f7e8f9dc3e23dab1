//! With the default `core_tools` settings, `run_command` waits for an
//! approval (added to the approval globs by
//! `ChainParts::from_config`): approved, it runs; denied or unanswered, it
//! never runs. The file tools need no approval, and
//! `run_command.require_approval: false` lets commands run at once.

use quiver_tests::core_tools as core_tools_support;

use std::sync::Arc;
use std::time::Duration;

use core_tools_support::{Env, env};
use quiver_dispatch::approval::{Decision, arguments_digest};
use quiver_dispatch::{DispatchError, Status};
use serde_json::{Value, json};

/// Starts a call in the background and waits until it is in the queue.
async fn pending_call(
    env: &Arc<Env>,
    arguments: Value,
) -> tokio::task::JoinHandle<Result<Value, DispatchError>> {
    let call = {
        let env = env.clone();
        tokio::spawn(async move { env.call("run_command", arguments).await })
    };
    while env.queue.waiting() == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    call
}

#[tokio::test]
async fn an_approved_command_runs_and_a_denied_one_never_does() {
    let env = Arc::new(env("core_tools:\n  workspace: ws\n").await);
    assert!(env.config.core_tools.run_command.require_approval);
    let arguments = json!({"command": "echo hello > ran.txt; echo done"});
    let call = pending_call(&env, arguments.clone()).await;
    let pending = env.queue.pending(None).await.unwrap();
    assert_eq!(pending.len(), 1);
    let request = &pending[0];
    assert_eq!(request.tool, "run_command");
    assert_eq!(request.arguments, arguments);
    assert_eq!(request.digest, arguments_digest(&arguments));
    // Nothing has run while the call waits.
    assert!(!env.ws_path("ran.txt").exists());
    env.queue
        .answer(
            pending[0].id,
            Some(&request.digest),
            &Decision::Approve,
            "test",
        )
        .await
        .unwrap();
    let result = call.await.unwrap().unwrap();
    assert_eq!(result["stdout"], "done\n");
    assert_eq!(result["exit_code"], 0);
    assert_eq!(
        std::fs::read_to_string(env.ws_path("ran.txt")).unwrap(),
        "hello\n"
    );

    let call = pending_call(&env, json!({"command": "touch denied.txt"})).await;
    let id = env.queue.pending(None).await.unwrap()[0].id;
    env.queue
        .answer(
            id,
            None,
            &Decision::Deny {
                reason: "not on my machine".into(),
            },
            "test",
        )
        .await
        .unwrap();
    let error = call.await.unwrap().unwrap_err();
    assert_eq!(error.code(), "approval_denied");
    assert!(error.to_string().contains("not on my machine"), "{error}");
    assert!(!env.ws_path("denied.txt").exists());
}

#[tokio::test]
async fn an_unanswered_command_times_out_without_running() {
    let env = env("core_tools:\n  workspace: ws\napproval:\n  timeout_s: 1\n").await;
    let mut events = env.session.subscribe();
    let error = env
        .call("run_command", json!({"command": "touch late.txt"}))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "approval_timed_out");
    assert!(env.queue.waiting() == 0);
    assert!(!env.ws_path("late.txt").exists());
    let mut statuses = Vec::new();
    while let Ok(event) = events.try_recv() {
        statuses.push(event.status);
    }
    assert_eq!(statuses, [Status::AwaitingApproval, Status::Denied]);
}

#[tokio::test]
async fn file_tools_run_without_asking() {
    let env = env("core_tools:\n  workspace: ws\n").await;
    env.call("write_file", json!({"path": "a.txt", "content": "x"}))
        .await
        .unwrap();
    env.call("read_file", json!({"path": "a.txt"}))
        .await
        .unwrap();
    env.call("list_dir", json!({})).await.unwrap();
    env.call("search_files", json!({"pattern": "x"}))
        .await
        .unwrap();
    assert!(env.queue.waiting() == 0);
}

#[tokio::test]
async fn require_approval_false_runs_at_once_and_approval_globs_still_apply() {
    let env =
        env("core_tools:\n  workspace: ws\n  run_command:\n    require_approval: false\n").await;
    let result = env
        .call("run_command", json!({"command": "echo now"}))
        .await
        .unwrap();
    assert_eq!(result["stdout"], "now\n");
    // The user's own approval globs keep working for core tools.
    let env = Arc::new(core_tools_support::env(
        "core_tools:\n  workspace: ws\n  run_command:\n    require_approval: false\napproval:\n  require: [run_command]\n  timeout_s: 600\n",
    ).await);
    let call = pending_call(&env, json!({"command": "echo asked"})).await;
    let id = env.queue.pending(None).await.unwrap()[0].id;
    env.queue
        .answer(id, None, &Decision::Approve, "test")
        .await
        .unwrap();
    assert_eq!(call.await.unwrap().unwrap()["stdout"], "asked\n");
}
