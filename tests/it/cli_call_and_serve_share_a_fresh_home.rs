//! A new user's first steps, in a fresh empty directory with a fresh HOME
//! and the embedded default: `quiver call read_file` finds the core tools
//! (the call runs on the same runtime as the daemon), every directory it
//! made under the state directory is private, and `quiver serve --stdio`
//! then starts on that state directory and answers the MCP handshake.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn quiver_in(home: &Path, cwd: &Path) -> Command {
    // A HOME of this test's own: the shared scratch one may hold state.
    let mut command = quiver_tests::quiver_command();
    command.env("HOME", home).current_dir(cwd);
    command
}

fn directories_under(root: &Path, found: &mut Vec<(String, u32)>) {
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        let metadata = entry.metadata().unwrap();
        if metadata.is_dir() {
            found.push((
                entry.path().display().to_string(),
                metadata.permissions().mode() & 0o777,
            ));
            directories_under(&entry.path(), found);
        }
    }
}

#[test]
fn call_then_serve_stdio_with_a_fresh_home() {
    let temp = tempfile::tempdir().unwrap();
    let (home, work) = (temp.path().join("home"), temp.path().join("work"));
    std::fs::create_dir(&home).unwrap();
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("a.txt"), "hello from a.txt\n").unwrap();

    let output = quiver_in(&home, &work)
        .args(["call", "read_file", "--wait-s", "0", "--arguments"])
        .arg(json!({"path": "a.txt"}).to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("hello from a.txt"),
        "{result}"
    );

    let state = home.join(".local/state/quiver");
    let mut made = vec![(state.display().to_string(), 0)];
    made[0].1 = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    directories_under(&state, &mut made);
    for (dir, mode) in &made {
        assert_eq!(*mode, 0o700, "{dir} is mode {mode:o}");
    }

    let mut serve = quiver_tests::KillOnDrop(
        quiver_in(&home, &work)
            .args(["serve", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdin = serve.0.stdin.take().unwrap();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    });
    writeln!(stdin, "{initialize}").unwrap();
    let mut line = String::new();
    BufReader::new(serve.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
        let mut stderr = String::new();
        let _ = std::io::Read::read_to_string(&mut serve.0.stderr.take().unwrap(), &mut stderr);
        panic!("serve --stdio answered {line:?} ({e}); stderr: {stderr}")
    });
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
    drop(stdin);
}
