//! `run_command` does not hand the daemon's environment to commands: by
//! default they get only the variables programs need (`PATH`, `HOME`,
//! `LANG`, `LC_*`, ...), never a secret such as a model API key;
//! `run_command.env_inherit` widens or narrows that and
//! `run_command.env` sets variables of its own. Run through `quiver call`
//! with the secret in that process's environment, as an operator's
//! daemon would have it.

use quiver_tests::{arg, quiver_command};
use serde_json::{Value, json};

const PRINT: &str = "echo \"secret=${QUIVER_TEST_API_KEY:-unset} lc=${LC_QUIVER_TEST:-unset} \
                     path=${PATH:+set} ci=${CI_MODE:-unset}\"";

fn printed(extra: &str) -> String {
    let temp = tempfile::tempdir().unwrap();
    std::fs::create_dir(temp.path().join("ws")).unwrap();
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        format!(
            "serve:\n  state_dir: state\ncore_tools:\n  workspace: ws\n  run_command:\n    require_approval: false\n{extra}"
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
        .arg(json!({"command": PRINT}).to_string())
        .env("HOME", temp.path())
        .env("QUIVER_TEST_API_KEY", "sk-do-not-leak")
        .env("LC_QUIVER_TEST", "kept")
        .env_remove("CI_MODE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["exit_code"], 0, "{result}");
    result["stdout"].as_str().unwrap().trim().to_owned()
}

#[test]
fn the_default_list_keeps_path_and_locale_but_not_the_key() {
    assert_eq!(printed(""), "secret=unset lc=kept path=set ci=unset");
}

#[test]
fn set_variables_and_a_narrower_inherit_list() {
    assert_eq!(
        printed("    env_inherit: [PATH]\n    env: {CI_MODE: \"1\"}\n"),
        "secret=unset lc=unset path=set ci=1"
    );
}

#[test]
fn a_star_inherits_everything_as_an_operator_may_choose() {
    assert_eq!(
        printed("    env_inherit: [\"*\"]\n"),
        "secret=sk-do-not-leak lc=kept path=set ci=unset"
    );
}
