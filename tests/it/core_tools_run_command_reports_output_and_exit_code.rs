//! `run_command` reports the exit code (or the signal), stdout and stderr
//! separately, cuts long output in the middle past
//! `run_command.max_output_bytes` saying how much was cut, runs in the
//! directory asked for (inside the workspace, symlinks inside resolved),
//! with stdin empty, and names a shell that cannot start.

use quiver_tests::core_tools as core_tools_support;

use core_tools_support::{env, symlink};
use serde_json::json;

const CONFIG: &str = "core_tools:\n  workspace: ws\n  run_command:\n    require_approval: false\n    max_output_bytes: 1024\n";

#[tokio::test]
async fn exit_code_and_both_streams_are_reported() {
    let env = env(CONFIG).await;
    let result = env
        .call(
            "run_command",
            json!({"command": "echo out; echo err >&2; exit 3"}),
        )
        .await
        .unwrap();
    assert_eq!(result["exit_code"], 3);
    assert_eq!(result["success"], false);
    assert_eq!(result["signal"], json!(null));
    assert_eq!(result["stdout"], "out\n");
    assert_eq!(result["stderr"], "err\n");
    assert_eq!(
        (
            result["stdout_truncated"].as_bool(),
            result["stderr_truncated"].as_bool()
        ),
        (Some(false), Some(false))
    );
    let result = env
        .call("run_command", json!({"command": "kill -TERM $$"}))
        .await
        .unwrap();
    assert_eq!(result["exit_code"], json!(null));
    assert_eq!(result["signal"], 15);
    // stdin is empty, so a command reading it ends at once.
    let result = env
        .call("run_command", json!({"command": "cat; echo eof"}))
        .await
        .unwrap();
    assert_eq!(result["stdout"], "eof\n");
}

#[tokio::test]
async fn long_output_keeps_its_start_and_end() {
    let env = env(CONFIG).await;
    let result = env
        .call(
            "run_command",
            json!({"command": "echo FIRST; head -c 100000 /dev/zero | tr '\\0' x; echo; echo LAST"}),
        )
        .await
        .unwrap();
    let stdout = result["stdout"].as_str().unwrap();
    assert_eq!(result["stdout_truncated"], true);
    assert_eq!(result["stdout_bytes"], 6 + 100_000 + 1 + 5);
    assert!(stdout.starts_with("FIRST\nxxx"), "{}", &stdout[..20]);
    assert!(stdout.ends_with("xxx\nLAST\n"));
    let cut = 6 + 100_000 + 1 + 5 - 1024;
    assert!(
        stdout.contains(&format!("[quiver: {cut} bytes cut]")),
        "{stdout}"
    );
    assert!(stdout.len() < 1024 + 40);
}

#[tokio::test]
async fn runs_in_the_directory_asked_for() {
    let env = env(CONFIG).await;
    std::fs::create_dir_all(env.ws_path("sub/deeper")).unwrap();
    symlink("sub/deeper", env.ws_path("shortcut"));
    let result = env
        .call("run_command", json!({"command": "pwd -P; echo $PWD"}))
        .await
        .unwrap();
    let root = env.ws.display().to_string();
    assert_eq!(result["stdout"], format!("{root}\n{root}\n"));
    assert_eq!(result["cwd"], ".");
    let result = env
        .call(
            "run_command",
            json!({"command": "pwd -P", "cwd": "shortcut"}),
        )
        .await
        .unwrap();
    assert_eq!(result["stdout"], format!("{root}/sub/deeper\n"));
    assert_eq!(result["cwd"], "sub/deeper");
    let error = env
        .error("run_command", json!({"command": "pwd", "cwd": "missing"}))
        .await;
    assert_eq!(error["error"], "not_found", "{error}");
}

#[tokio::test]
async fn a_shell_that_cannot_start_is_named() {
    let env = env(
        "core_tools:\n  workspace: ws\n  run_command:\n    require_approval: false\n    shell: [/nonexistent/shell, -c]\n",
    ).await;
    let error = env.error("run_command", json!({"command": "true"})).await;
    assert_eq!(error["error"], "spawn_failed", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/shell"),
        "{error}"
    );
}

#[tokio::test]
async fn arguments_outside_the_schema_are_refused_before_running() {
    let env = env(CONFIG).await;
    for arguments in [
        json!({}),
        json!({"command": ""}),
        json!({"command": "true", "timeout_s": 0}),
        json!({"command": "true", "timeout_s": 61}),
        json!({"command": "true", "shell": "bash"}),
    ] {
        let error = env.error("run_command", arguments.clone()).await;
        assert_eq!(error["error"], "invalid_arguments", "{arguments}: {error}");
    }
}
