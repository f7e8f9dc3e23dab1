//! Checks that `quiver config check FILE` reports every problem of a file in
//! one run, one per line, with the closest known key for an unknown one; that
//! a YAML syntax error and a duplicate key read as such; and that a timeout
//! of zero is an error rather than a clamp.

use quiver_tests::{arg, quiver};

/// Runs `quiver config check` on `text`: the file's name and the error lines.
fn errors(text: &str) -> (String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiver.yaml");
    std::fs::write(&path, text).unwrap();
    let output = quiver(&["config", "check", arg(&path)]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{text:?} was accepted: {stderr}");
    let lines = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("error: "))
        .map(str::to_owned)
        .collect();
    (path.display().to_string(), lines)
}

#[test]
fn every_problem_is_reported_in_one_run() {
    let (file, lines) = errors(
        "tools:\n  tool_search:\n    enable: on\n    threshold_pct: lots\napproval:\n  timeout_s: 0\nplugins:\n  call_timeout_ms: -5\nguardrail:\n  default: deny\n",
    );
    let expected = [
        format!(
            "{file}:3:5: `tools.tool_search.enable`: unknown key `enable`; did you mean `enabled`?; allowed: keys enabled, threshold_pct"
        ),
        format!(
            "{file}:4:20: `tools.tool_search.threshold_pct`: wrong type: expected an integer, found `lots`; allowed: an integer from 0 to 100"
        ),
        format!(
            "{file}:6:14: `approval.timeout_s`: 0 is less than 1, the smallest value that works here; allowed: an integer from 1 to 86400"
        ),
        format!(
            "{file}:8:20: `plugins.call_timeout_ms`: -5 is less than 1, the smallest value that works here; allowed: an integer from 1 to 600000"
        ),
        format!(
            "{file}:9:1: `guardrail`: unknown key `guardrail`; did you mean `guardrails`?; allowed: keys tools, plugins"
        ),
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
    for (line, expected) in lines.iter().zip(&expected) {
        assert!(
            line.starts_with(expected.as_str()),
            "{line}\nwanted {expected}"
        );
    }
}

#[test]
fn problems_of_several_sections_are_all_reported() {
    let (file, lines) = errors(
        "approval:\n  require: [\"a[\"]\nserve:\n  listen: nowhere\nmcp_servers:\n  s:\n    url: ftp://x\n",
    );
    assert_eq!(lines.len(), 3, "{lines:#?}");
    for key in ["approval.require[0]", "mcp_servers.s.url", "serve.listen"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&file) && l.contains(&format!("`{key}`"))),
            "{key}: {lines:#?}"
        );
    }
}

#[test]
fn a_yaml_syntax_error_reads_as_one() {
    let (file, lines) = errors("tools: [1\n");
    assert_eq!(
        lines,
        [format!(
            "{file}:1:8: YAML syntax error: unclosed bracket '['"
        )]
    );
    let (file, lines) = errors("tools:\n  tool_search: 'on\n");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].starts_with(&format!("{file}:2:16: YAML syntax error: ")),
        "{lines:?}"
    );
}

#[test]
fn a_duplicate_key_is_named_plainly() {
    let (file, lines) = errors("approval:\n  timeout_s: 5\n  timeout_s: 6\n");
    assert_eq!(
        lines,
        [format!(
            "{file}:3:3: `approval.timeout_s`: duplicate key `timeout_s` (first written at line 2); allowed: each key once in a map"
        )]
    );
}
