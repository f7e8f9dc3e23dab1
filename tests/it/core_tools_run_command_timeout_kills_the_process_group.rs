//! `run_command` never leaves a process behind: a command that runs past
//! its timeout is killed with everything it started (its whole process
//! group), a command dropped by the dispatch chain's own timeout likewise,
//! and a background job a finished command left is ended with it.
//! Each test marks its processes with a unique `sleep` argument and looks
//! for them in /proc afterwards.

use quiver_tests::core_tools as core_tools_support;

use std::time::{Duration, Instant};

use core_tools_support::{env, processes_with, wait_until_gone};
use quiver_dispatch::Status;
use serde_json::json;

const NO_APPROVAL: &str = "core_tools:\n  workspace: ws\n  run_command:\n    require_approval: false\n    timeout_s: 30\n";

#[tokio::test]
async fn a_command_past_its_timeout_is_killed_with_its_children() {
    let env = env(NO_APPROVAL).await;
    let mut events = env.session.subscribe();
    let started = Instant::now();
    let error = env
        .call(
            "run_command",
            json!({"command": "echo started; sleep 987.61 & sleep 987.62; echo never", "timeout_s": 1}),
        )
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(error.code(), "timed_out");
    assert_eq!(error.status(), Status::TimedOut);
    let error = error.to_json();
    assert_eq!(error["error"], "timed_out", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("ran longer than 1 s"), "{message}");
    assert!(
        message.contains("stdout so far:\nstarted\n\nstderr so far:"),
        "the output so far is shown: {message}"
    );
    let left = wait_until_gone("987.6", Duration::from_secs(3)).await;
    assert!(left.is_empty(), "processes left behind: {left:?}");
    let mut statuses = Vec::new();
    while let Ok(event) = events.try_recv() {
        statuses.push(event.status);
    }
    assert_eq!(statuses, [Status::TimedOut]);
}

#[tokio::test]
async fn the_chains_own_timeout_kills_the_group_too() {
    let env = env(&format!(
        "{NO_APPROVAL}guardrails:\n  call_timeout_ms: 500\n"
    ))
    .await;
    let error = env
        .call(
            "run_command",
            json!({"command": "sleep 876.51 & sleep 876.52"}),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "timed_out");
    assert!(error.to_string().contains("500 ms"), "{error}");
    let left = wait_until_gone("876.5", Duration::from_secs(3)).await;
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[tokio::test]
async fn background_jobs_end_with_the_command() {
    let env = env(NO_APPROVAL).await;
    let started = Instant::now();
    let result = env
        .call(
            "run_command",
            json!({"command": "sleep 765.41 & (sleep 765.42 >/dev/null 2>&1 &) ; echo done"}),
        )
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result["stdout"], "done\n");
    assert_eq!(result["exit_code"], 0);
    let left = wait_until_gone("765.4", Duration::from_secs(3)).await;
    assert!(left.is_empty(), "processes left behind: {left:?}");
    assert!(processes_with("765.4").is_empty());
}
