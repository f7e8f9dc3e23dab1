//! Checks that `quiver config check FILE` exits 0 and says ok, with no
//! warning or error, for valid config files, the embedded default included.

use quiver_tests::{arg, quiver, workspace_root};

fn check_ok(path: &std::path::Path) {
    let output = quiver(&["config", "check", arg(path)]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{}: exit {:?}, stderr: {stderr}",
        path.display(),
        output.status.code()
    );
    assert_eq!(stdout, format!("{}: ok\n", path.display()));
    assert!(
        !stderr.to_lowercase().contains("warn") && !stderr.to_lowercase().contains("error"),
        "{}: {stderr}",
        path.display()
    );
}

#[test]
fn good_files_pass() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        (
            "full.yaml",
            "tools:\n  tool_search:\n    enabled: on\n    threshold_pct: 10\n    search_default_limit: 7\n    max_search_limit: 30\n    listing: auto\n    listing_max_tokens: 1000\n    eager: [\"mcp_github_*\", echo]\n    mode: classic\n",
        ),
        ("off.yaml", "tools: {tool_search: false}\n"),
        ("on.yaml", "tools:\n  tool_search: true\n"),
        (
            "bounds.yaml",
            "tools:\n  tool_search:\n    threshold_pct: 0\n    max_search_limit: 50\n    listing_max_tokens: 60000\n",
        ),
        ("empty.yaml", ""),
    ];
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        check_ok(&path);
    }
}

#[test]
fn embedded_default_passes() {
    check_ok(&workspace_root().join("runtime/daemon/src/config/default_config.yaml"));
}
