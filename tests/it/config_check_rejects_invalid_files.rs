//! Checks that `quiver config check FILE` exits non-zero for a wrong type,
//! an unknown word or an unknown key (the store section too), with an error naming the key, the
//! file, the line and column, and the allowed values.

use quiver_tests::{arg, quiver};

/// Runs `quiver config check` on `text` and returns the error line.
fn rejected(text: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiver.yaml");
    std::fs::write(&path, text).unwrap();
    let output = quiver(&["config", "check", arg(&path)]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{text:?} was accepted: {stderr}");
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("ok"),
        "{text:?}: stdout says ok"
    );
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line for {text:?}: {stderr}"))
        .to_owned();
    (path.display().to_string(), error)
}

fn assert_names(error: &str, file: &str, line_column: &str, key: &str, allowed: &str) {
    assert!(
        error.contains(&format!("{file}:{line_column}:")),
        "file, line and column {line_column}: {error}"
    );
    assert!(error.contains(&format!("`{key}`")), "key {key}: {error}");
    assert!(
        error.contains(&format!("allowed: {allowed}")),
        "allowed values {allowed}: {error}"
    );
}

#[test]
fn wrong_type() {
    let (file, error) = rejected("tools:\n  tool_search:\n    threshold_pct: lots\n");
    assert_names(
        &error,
        &file,
        "3:20",
        "tools.tool_search.threshold_pct",
        "an integer from 0 to 100",
    );
    let (file, error) = rejected("tools:\n  tool_search: 5\n");
    assert_names(
        &error,
        &file,
        "2:3",
        "tools.tool_search",
        "true, false or a map with keys enabled, threshold_pct",
    );
}

#[test]
fn unknown_word() {
    let (file, error) = rejected("tools:\n  tool_search:\n    enabled: maybe\n");
    assert_names(
        &error,
        &file,
        "3:14",
        "tools.tool_search.enabled",
        "auto, on, off",
    );
    assert!(error.contains("maybe"), "{error}");
    let (file, error) = rejected("tools:\n  tool_search:\n    mode: vector\n");
    assert_names(&error, &file, "3:11", "tools.tool_search.mode", "classic");
}

#[test]
fn unknown_key() {
    let (file, error) = rejected("tools:\n  tool_search:\n    enable: on\n");
    assert_names(
        &error,
        &file,
        "3:5",
        "tools.tool_search.enable",
        "keys enabled, threshold_pct, search_default_limit, max_search_limit, max_query_chars, max_query_words, listing, listing_max_tokens, eager, mode",
    );
    let (file, error) = rejected("tool:\n  tool_search: true\n");
    assert_names(&error, &file, "1:1", "tool", "key");
    let allowed = error.split_once("allowed: ").unwrap().1;
    assert!(allowed.contains("tools"), "{error}");
}

#[test]
fn missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.yaml");
    let output = quiver(&["config", "check", arg(&path)]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains(&path.display().to_string()));
}

#[test]
fn store_mistakes_name_the_key_and_never_the_password() {
    let (file, error) = rejected("store:\n  backend: postgress\n");
    assert_names(&error, &file, "2:12", "store.backend", "sqlite, postgres");
    assert!(error.contains("did you mean `postgres`"), "{error}");
    let (file, error) = rejected("store:\n  backend: postgres\n");
    assert_names(&error, &file, "2:12", "store.url", "a postgres:// URL");
    let (file, error) = rejected("store:\n  backend: postgres\n  url: \"mysql://u:pw9@h/d\"\n");
    assert_names(&error, &file, "3:8", "store.url", "a postgres:// URL");
    assert!(
        error.contains("`mysql://u@h/d` is not a postgres://"),
        "{error}"
    );
    assert!(!error.contains("pw9"), "the password was shown: {error}");
    let (file, error) = rejected("store:\n  lease_s: 0\n");
    assert_names(
        &error,
        &file,
        "2:12",
        "store.lease_s",
        "an integer from 1 to 3600",
    );
    let (file, error) = rejected("serve:\n  instance_id: \"bad id!\"\n");
    assert_names(
        &error,
        &file,
        "2:16",
        "serve.instance_id",
        "1 to 64 of [A-Za-z0-9._-]",
    );
}
