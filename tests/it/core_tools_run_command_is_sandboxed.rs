//! `run_command` runs in the Landlock sandbox by default: a command can
//! read the system and read and write the workspace and its own temporary
//! directory, but not the state directory (database, token), the config
//! file, the user's home, or the daemon's `/proc/PID/environ`, where its
//! secrets are. Run through `quiver call`, with a secret in that process's
//! environment. With `sandbox: off` the same command reaches them, which
//! is why the sandbox is the default.

use quiver_tests::{arg, quiver_command};
use serde_json::{Value, json};

const PROBE: &str = "check() { if eval \"$2\" >/dev/null 2>&1; then echo \"$1=yes\"; else echo \"$1=no\"; fi; }; \
    check db 'cat \"$STATE/quiver.db\"'; \
    check config 'cat \"$CONFIG\"'; \
    check home 'ls \"$HOMEDIR\"'; \
    check environ 'tr \"\\0\" \"\\n\" < /proc/$PPID/environ | grep -q QUIVER_TEST_SECRET'; \
    check workspace 'echo x > inside.txt && cat inside.txt'; \
    check tmp 'echo x > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"'; \
    check system 'cat /etc/hostname || cat /etc/os-release'";

fn probe(sandbox: &str) -> String {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    std::fs::create_dir_all(home.join("secrets")).unwrap();
    std::fs::create_dir(temp.path().join("ws")).unwrap();
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        format!(
            "serve:\n  state_dir: state\ncore_tools:\n  workspace: ws\n  run_command:\n    require_approval: false\n    sandbox: {sandbox}\n    env:\n      STATE: {state}\n      CONFIG: {config}\n      HOMEDIR: {home}\n",
            state = temp.path().join("state").display(),
            config = config.display(),
            home = home.display(),
        ),
    )
    .unwrap();
    let output = quiver_command()
        .args([
            "call",
            "run_command",
            "--config",
            arg(&config),
            "--arguments",
        ])
        .arg(json!({"command": PROBE}).to_string())
        .env("HOME", &home)
        .env("QUIVER_TEST_SECRET", "sk-keep-out")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    result["stdout"].as_str().unwrap().trim().replace('\n', " ")
}

#[test]
fn a_sandboxed_command_reaches_the_workspace_and_nothing_secret() {
    // Quiver's machines and CI run kernels with Landlock; a kernel
    // without it fails here rather than passing untested.
    assert!(
        quiver_core_tools::sandbox::landlock_available(),
        "this kernel does not enforce Landlock"
    );
    assert_eq!(
        probe("landlock"),
        "db=no config=no home=no environ=no workspace=yes tmp=yes system=yes"
    );
}

#[test]
fn without_the_sandbox_the_same_command_reaches_everything() {
    assert_eq!(
        probe("off"),
        "db=yes config=yes home=yes environ=yes workspace=yes tmp=yes system=yes"
    );
}
