//! Checks that the CLI's error line says a cause once: a missing config
//! file or query set is named with the system's reason, not the reason
//! twice (the error's message holds it and the error chain repeats it).

use quiver_tests::quiver;

fn error_line(args: &[&str]) -> String {
    let output = quiver(args);
    assert!(!output.status.success(), "{args:?} succeeded");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line for {args:?}: {stderr}"))
        .to_owned()
}

#[test]
fn a_missing_file_is_named_with_its_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let missing = missing.to_str().unwrap();
    for args in [
        vec!["status", "--config", missing],
        vec!["catalog", "eval", "--queries", missing],
    ] {
        let line = error_line(&args);
        assert!(line.contains(missing), "{args:?}: names the file: {line}");
        assert_eq!(
            line.matches("No such file or directory").count(),
            1,
            "{args:?}: the reason once: {line}"
        );
    }
}
