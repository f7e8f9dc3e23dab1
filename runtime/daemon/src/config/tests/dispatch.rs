//! The `dispatch` sections, read through the root parse of a whole `quiver.yaml`.

use crate::config::{invalid_parts as invalid, parse};
use serde_json::json;

#[test]
fn sections_are_read() {
    let text = "guardrails:\n  default: deny\n  max_result_chars: 5000\n  call_timeout_ms: 900\n  rules:\n    - tool: \"mcp_github_*\"\n      action: allow\n    - tool: mcp_github_delete_repo\n      action: deny\n      reason: never\n      arguments:\n        - pointer: /repo\n          regex: \"^prod\"\napproval:\n  require: [\"mcp_github_create_*\"]\n  auto_approve: [mcp_github_create_draft]\n  timeout_s: 30\n  on_timeout: deny\nfeed:\n  redact: [token]\n  capacity: 64\n";
    let loaded = parse(text, "q.yaml").unwrap();
    assert!(loaded.warnings.is_empty());
    let c = loaded.config;
    assert_eq!(c.guardrails.rules.len(), 2);
    assert_eq!(
        (c.guardrails.max_result_chars, c.guardrails.call_timeout_ms),
        (5000, 900)
    );
    let g = c.guardrails.guardrails();
    assert!(g.check("mcp_github_list", &json!({})).is_ok());
    assert!(
        g.check("mcp_github_delete_repo", &json!({"repo": "prod-1"}))
            .is_err()
    );
    assert!(g.check("read_file", &json!({})).is_err());
    assert_eq!(c.approval.timeout_s, 30);
    assert!(
        c.approval
            .policy()
            .unwrap()
            .requires("mcp_github_create_issue")
    );
    assert_eq!(c.feed.redact, ["token"]);
    assert_eq!(c.feed.capacity, 64);
}

#[test]
fn defaults_and_clamps() {
    let c = parse("", "q.yaml").unwrap().config;
    assert!(c.guardrails.rules.is_empty());
    assert!(c.approval.require.is_empty());
    assert!(c.feed.redact.iter().any(|k| k == "password"));
    let loaded = parse(
        "approval:\n  timeout_s: 99999\nfeed:\n  capacity: 1\n",
        "q.yaml",
    )
    .unwrap();
    let keys: Vec<&str> = loaded.warnings.iter().map(|w| w.key.as_str()).collect();
    assert_eq!(keys, ["approval.timeout_s", "feed.capacity"]);
    assert_eq!(
        (loaded.warnings[0].line, loaded.warnings[0].column),
        (2, 14)
    );
}

#[test]
fn errors_name_file_line_key_and_allowed_values() {
    let (key, line, _, message, allowed) =
        invalid("guardrails:\n  rules:\n    - tool: x\n      action: maybe\n");
    assert_eq!(key, "guardrails.rules[0].action");
    assert_eq!(line, 4);
    assert!(message.contains("maybe"), "{message}");
    assert_eq!(allowed, "allow, deny");
    let (key, line, column, _, allowed) = invalid(
        "guardrails:\n  rules:\n    - tool: x\n      action: deny\n      arguments:\n        - pointer: repo\n          regex: x\n",
    );
    assert_eq!(key, "guardrails.rules[0].arguments[0].pointer");
    assert_eq!((line, column), (6, 20));
    assert!(allowed.contains("JSON pointer"), "{allowed}");
    let (key, line, ..) = invalid(
        "guardrails:\n  rules:\n    - tool: x\n      action: deny\n      arguments:\n        - pointer: /repo\n          regex: \"(\"\n",
    );
    assert_eq!(
        (key.as_str(), line),
        ("guardrails.rules[0].arguments[0].regex", 7)
    );
    let (key, line, ..) = invalid("approval:\n  require: [ok, \"a[\"]\n");
    assert_eq!((key.as_str(), line), ("approval.require[1]", 2));
    let (key, _, _, _, allowed) = invalid("approval:\n  on_timeout: approve\n");
    assert_eq!(
        (key.as_str(), allowed.as_str()),
        ("approval.on_timeout", "deny")
    );
    let (key, _, _, message, allowed) = invalid("feed:\n  redacted: [x]\n");
    assert!(key.starts_with("feed"), "{key}");
    assert!(message.contains("redacted"), "{message}");
    assert!(allowed.contains("capacity"), "{allowed}");
    let (_, _, _, _, allowed) = invalid("guardrails:\n  rules:\n    - action: deny\n");
    assert!(allowed.contains("tool"), "{allowed}");
}
