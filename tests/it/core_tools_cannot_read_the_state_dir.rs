//! The core file tools never reach the daemon's secrets, even when they lie
//! inside the workspace: the token, the database, plugin state and the
//! config file are refused with `path_protected`, directly, through a
//! symlink, and in listings and searches. The embedded default started in
//! `$HOME` (whose state directory is then inside its workspace) too, and
//! there it does not offer `run_command`, whose sandbox can only allow the
//! workspace as a whole.

use quiver_tests::{arg, quiver_command};
use serde_json::Value;

fn call(command: &mut std::process::Command, tool: &str, arguments: &str) -> Value {
    let output = command
        .args(["call", tool, "--wait-s", "0", "--arguments", arguments])
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn state_token_db_and_config_are_protected() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        "core_tools:\n  workspace: .\nserve:\n  state_dir: state\n",
    )
    .unwrap();
    std::fs::write(temp.path().join("notes.txt"), "secret-free\n").unwrap();
    let with_config = |tool: &str, arguments: &str| {
        let mut command = quiver_command();
        command.current_dir(temp.path());
        {
            let output = command
                .args(["call", tool, "--config", arg(&config), "--wait-s", "0"])
                .args(["--arguments", arguments])
                .output()
                .unwrap();
            serde_json::from_slice::<Value>(&output.stdout).unwrap_or_else(|_| {
                panic!(
                    "{}\n{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                )
            })
        }
    };
    // The first call makes the state directory and its database.
    let ok = with_config("read_file", r#"{"path": "notes.txt"}"#);
    assert_eq!(ok["content"], "secret-free\n", "{ok}");
    let state = std::fs::canonicalize(temp.path().join("state")).unwrap();
    std::fs::write(state.join("token"), "t0ken\n").unwrap();
    std::os::unix::fs::symlink("state/token", temp.path().join("innocent.txt")).unwrap();
    for path in [
        "state/token",
        "state/quiver.db",
        "./state/../state/token",
        "innocent.txt",
        "quiver.yaml",
        state.join("token").to_str().unwrap(),
        // Files that do not exist (yet) answer the same: nothing tells
        // what the state directory holds.
        "state/not-there-yet",
        "state/no-dir/no-file",
    ] {
        let error = with_config("read_file", &format!(r#"{{"path": "{path}"}}"#));
        assert_eq!(error["error"], "path_protected", "{path}: {error}");
    }
    let error = with_config("write_file", r#"{"path": "state/token", "content": "x"}"#);
    assert_eq!(error["error"], "path_protected", "{error}");
    assert_eq!(
        std::fs::read_to_string(state.join("token")).unwrap(),
        "t0ken\n"
    );
    let error = with_config("list_dir", r#"{"path": "state"}"#);
    assert_eq!(error["error"], "path_protected", "{error}");
    let listing = with_config("list_dir", r#"{"path": ".", "depth": 3}"#);
    assert!(!listing.to_string().contains("quiver.db"), "{listing}");
    assert!(!listing.to_string().contains("\"state\""), "{listing}");
    let found = with_config("search_files", r#"{"pattern": "t0ken"}"#);
    assert!(!found.to_string().contains("state/token"), "{found}");
}

#[test]
fn the_embedded_default_in_home_keeps_its_state_out_of_reach() {
    let home = quiver_command()
        .get_envs()
        .find(|(k, _)| *k == "HOME")
        .and_then(|(_, v)| v.map(std::path::PathBuf::from))
        .unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let mut first = quiver_command();
    first.current_dir(&home);
    // Makes the default state directory and its database.
    call(&mut first, "list_dir", r#"{"path": "."}"#);
    let token = home.join(".local/state/quiver/token");
    if !token.exists() {
        std::fs::write(&token, "t0ken\n").unwrap();
    }
    for path in [
        ".local/state/quiver/quiver.db",
        ".local/state/quiver/token",
        ".local/state/quiver",
    ] {
        let mut command = quiver_command();
        command.current_dir(&home);
        let error = call(
            &mut command,
            "read_file",
            &format!(r#"{{"path": "{path}"}}"#),
        );
        assert_eq!(error["error"], "path_protected", "{path}: {error}");
    }
    let mut command = quiver_command();
    command.current_dir(&home);
    let error = call(
        &mut command,
        "run_command",
        r#"{"command": "cat .local/state/quiver/token"}"#,
    );
    assert_eq!(error["error"], "unknown_tool", "{error}");
}
