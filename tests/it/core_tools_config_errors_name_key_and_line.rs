//! `quiver config check` on the `core_tools:` section: the example file's
//! section (every key at its default) passes; an unknown tool name, an
//! unknown key or a wrong type is an error naming the file, line, column,
//! key and allowed values; an out-of-range number is clamped with a
//! warning naming the key.

use quiver_tests::{arg, quiver, workspace_root};

fn check(text: &str) -> (bool, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiver.yaml");
    std::fs::write(&path, text).unwrap();
    let output = quiver(&["config", "check", arg(&path)]);
    (
        output.status.success(),
        path.display().to_string(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_example_section_passes() {
    let example = workspace_root().join("examples").join("quiver.yaml");
    let text = std::fs::read_to_string(&example).unwrap();
    assert!(
        text.contains("\ncore_tools:\n"),
        "examples/quiver.yaml has no core_tools section"
    );
    let output = quiver(&["config", "check", arg(&example)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.to_lowercase().contains("warn"), "{stderr}");
}

#[test]
fn bad_values_name_the_file_line_key_and_allowed_values() {
    let cases = [
        (
            "core_tools:\n  enabled: [read_file, rm_rf]\n",
            "2:",
            "core_tools.enabled",
            "read_file, write_file, list_dir, search_files, run_command",
        ),
        (
            "core_tools:\n  run_command:\n    needs_approval: false\n",
            "3:5",
            "core_tools.run_command",
            "require_approval, timeout_s, max_output_bytes, shell",
        ),
        (
            "core_tools:\n  max_search_matches: many\n",
            "2:23",
            "core_tools.max_search_matches",
            "an integer from 1 to 10000",
        ),
        (
            "core_tools:\n  run_command:\n    require_approval: maybe\n",
            "3:23",
            "core_tools.run_command.require_approval",
            "true, false",
        ),
    ];
    for (text, line_column, key, allowed) in cases {
        let (ok, file, stderr) = check(text);
        assert!(!ok, "{text:?} was accepted: {stderr}");
        let error = stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_default();
        assert!(
            error.contains(&format!("{file}:{line_column}")),
            "{line_column}: {error}"
        );
        assert!(error.contains(&format!("`{key}")), "{key}: {error}");
        assert!(error.contains(allowed), "{allowed}: {error}");
    }
}

#[test]
fn out_of_range_numbers_are_clamped_with_a_warning() {
    let (ok, file, stderr) = check("core_tools:\n  run_command:\n    timeout_s: 99999\n");
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{file}:3:16: `core_tools.run_command.timeout_s` = 99999 is outside 1..3600; using 3600"
        )),
        "{stderr}"
    );
    // A timeout of zero would not do what was meant: an error, not a clamp.
    let (ok, file, stderr) = check("core_tools:\n  run_command:\n    timeout_s: 0\n");
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{file}:3:16: `core_tools.run_command.timeout_s`: 0 is less than 1"
        )),
        "{stderr}"
    );
}
