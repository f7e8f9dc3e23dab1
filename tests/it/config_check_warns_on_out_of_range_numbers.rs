//! Checks that `quiver config check FILE` accepts out-of-range numbers with
//! a warning naming the file, line, column, key, the value given and the
//! value used, and still exits 0.

use quiver_tests::{arg, quiver};

#[test]
fn out_of_range_numbers_are_clamped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiver.yaml");
    std::fs::write(
        &path,
        "tools:\n  tool_search:\n    threshold_pct: 500\n    max_search_limit: 99\n    listing_max_tokens: 10\n",
    )
    .unwrap();
    let output = quiver(&["config", "check", arg(&path)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}: {stderr}",
        output.status.code()
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{}: ok\n", path.display())
    );
    let file = path.display().to_string();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    for (line_column, key, given, used) in [
        ("3:20", "tools.tool_search.threshold_pct", "500", "100"),
        ("4:23", "tools.tool_search.max_search_limit", "99", "50"),
        ("5:25", "tools.tool_search.listing_max_tokens", "10", "200"),
    ] {
        let warning = warnings
            .iter()
            .find(|w| w.contains(key))
            .unwrap_or_else(|| panic!("no warning for {key} in: {stderr}"));
        assert!(
            warning.contains(&format!("{file}:{line_column}:")),
            "{warning}"
        );
        assert!(
            warning.contains(&format!("= {given} ")),
            "given value: {warning}"
        );
        assert!(
            warning.contains(&format!("using {used}")),
            "used value: {warning}"
        );
    }
    assert!(
        !stderr.contains("error"),
        "a clamped value is not an error: {stderr}"
    );
}

#[test]
fn in_range_numbers_give_no_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiver.yaml");
    std::fs::write(
        &path,
        "tools:\n  tool_search:\n    threshold_pct: 100\n    max_search_limit: 1\n    search_default_limit: 1\n    listing_max_tokens: 200\n",
    )
    .unwrap();
    let output = quiver(&["config", "check", arg(&path)]);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("warning") && !stderr.contains("WARN"),
        "{stderr}"
    );
}
