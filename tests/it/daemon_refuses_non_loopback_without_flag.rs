//! `quiver serve` listens on loopback unless told otherwise: an address
//! beyond this machine is refused, naming the flag that allows it, before
//! anything is started or bound.

#[test]
fn listening_beyond_loopback_needs_the_flag() {
    let state = tempfile::tempdir().unwrap();
    let output = quiver_tests::quiver(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--state-dir",
        quiver_tests::arg(state.path()),
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("0.0.0.0:0") && stderr.contains("--allow-non-loopback"),
        "{stderr}"
    );
    // Nothing was started: no token, no database.
    assert!(!state.path().join("token").exists());
    assert!(!state.path().join("quiver.db").exists());
}
