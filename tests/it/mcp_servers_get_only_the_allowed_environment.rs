//! A stdio MCP server does not inherit the daemon's whole environment: it
//! gets the variables of `mcp_servers.NAME.env_inherit` (by default the
//! same safe list `run_command` gets) and its own `env`, never a model API
//! key the daemon holds unless the operator lists it. Run through `quiver
//! status`, with the key in that process's environment only.

use quiver_tests::{arg, mcp_test_server, quiver_command};

fn server_environment(extra: &str) -> String {
    let temp = tempfile::tempdir().unwrap();
    let seen = temp.path().join("env.txt");
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        format!(
            "serve:\n  state_dir: state\ncore_tools:\n  workspace: .\nmcp_servers:\n  probe:\n    command: sh\n    args: [-c, 'env > {seen}; exec {server}']\n    env:\n      PROBE_SET: \"1\"\n{extra}",
            seen = seen.display(),
            server = mcp_test_server().display(),
        ),
    )
    .unwrap();
    let output = quiver_command()
        .args(["status", "--config", arg(&config), "--wait-s", "20"])
        .env("OPENAI_API_KEY", "sk-do-not-leak")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read_to_string(&seen).unwrap()
}

#[test]
fn the_default_allow_list_keeps_the_key_out() {
    let environment = server_environment("");
    assert!(!environment.contains("sk-do-not-leak"), "{environment}");
    assert!(
        environment.lines().any(|l| l.starts_with("PATH=")),
        "{environment}"
    );
    assert!(environment.contains("PROBE_SET=1"), "{environment}");
}

#[test]
fn an_operator_may_pass_more() {
    let environment = server_environment("    env_inherit: [PATH, OPENAI_API_KEY]\n");
    assert!(
        environment.contains("OPENAI_API_KEY=sk-do-not-leak"),
        "{environment}"
    );
    assert!(
        !environment.lines().any(|l| l.starts_with("HOME=")),
        "{environment}"
    );
}
