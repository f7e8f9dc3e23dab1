//! Helpers shared by the end-to-end tests: where the shared reference
//! catalogs are, and the `quiver` binary built from this workspace.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared/catalogs`, next to the checkout (as in CI).
pub fn shared_catalogs() -> PathBuf {
    workspace_root().join("..").join("shared").join("catalogs")
}

/// A file of `../shared/catalogs`.
pub fn catalog(name: &str) -> PathBuf {
    shared_catalogs().join(name)
}

/// Builds the `quiver` binary once per test process and returns its path.
///
/// Cargo only provides `CARGO_BIN_EXE_*` to a package's own tests, and the
/// binary lives in `quiver-runtime`, so the tests build it here, with the
/// same profile as the test binary.
pub fn quiver_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let release = !cfg!(debug_assertions);
        let mut command = Command::new(cargo);
        command
            .args([
                "build",
                "--quiet",
                "-p",
                "quiver-runtime",
                "--bin",
                "quiver",
            ])
            .current_dir(workspace_root());
        if release {
            command.arg("--release");
        }
        let status = command.status();
        assert!(
            matches!(status, Ok(s) if s.success()),
            "building the quiver binary failed: {status:?}"
        );
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target"));
        target
            .join(if release { "release" } else { "debug" })
            .join("quiver")
    })
}

/// Runs `quiver` with `args` and returns its output.
pub fn quiver(args: &[&str]) -> Output {
    let output = Command::new(quiver_bin()).args(args).output();
    match output {
        Ok(output) => output,
        Err(error) => panic!("cannot run quiver: {error}"),
    }
}

/// Runs `quiver`, asserts it succeeded, and parses each stdout line as JSON.
pub fn quiver_json_lines(args: &[&str]) -> Vec<serde_json::Value> {
    let output = quiver(args);
    assert!(
        output.status.success(),
        "quiver {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(value) => value,
            Err(error) => panic!("quiver printed a line that is not JSON ({error}): {line}"),
        })
        .collect()
}
