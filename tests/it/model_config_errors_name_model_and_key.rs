//! `quiver config check` on the `models:` section: a good file passes
//! (with its `${VAR}` keys expanded), and a missing `model`, an unset key
//! variable, an unknown provider or a `default_model` that names no model
//! are errors naming the file, line, key and what is allowed.

use quiver_tests::{arg, quiver};

fn check(text: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiver.yaml");
    std::fs::write(&path, text).unwrap();
    let output = quiver(&["config", "check", arg(&path)]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (
        output.status.success(),
        stderr.replace(&path.display().to_string(), "quiver.yaml"),
    )
}

const GOOD: &str = "models:
  local:
    provider: openai
    base_url: http://127.0.0.1:8080/v1
    model: qwen2.5-7b-instruct
    context_tokens: 32768
  claude:
    provider: anthropic
    model: claude-sonnet-4-5
    api_key: \"${HOME}\"
default_model: local
";

#[test]
fn a_good_models_section_passes() {
    let (ok, stderr) = check(GOOD);
    assert!(ok, "{stderr}");
}

#[test]
fn errors_name_the_model_and_key() {
    let (ok, stderr) = check(&GOOD.replace("${HOME}", "${QUIVER_TEST_NEVER_SET_KEY}"));
    assert!(!ok);
    assert!(
        stderr.contains("quiver.yaml:10:14: `models.claude.api_key`: environment variable `QUIVER_TEST_NEVER_SET_KEY` is not set"),
        "{stderr}"
    );

    let (ok, stderr) = check(&GOOD.replace("    model: qwen2.5-7b-instruct\n", ""));
    assert!(!ok);
    assert!(
        stderr.contains("`models.local.model`: missing `model`"),
        "{stderr}"
    );

    let (ok, stderr) = check(&GOOD.replace("provider: anthropic", "provider: claude"));
    assert!(!ok);
    assert!(
        stderr.contains("quiver.yaml:8:15: `models.claude.provider`")
            && stderr.contains("allowed: openai, anthropic"),
        "{stderr}"
    );

    let (ok, stderr) = check(&GOOD.replace("default_model: local", "default_model: gpt"));
    assert!(!ok);
    assert!(
        stderr.contains("quiver.yaml:11:16: `default_model`: `gpt` is not a configured model; allowed: claude, local"),
        "{stderr}"
    );
}
