//! Two `quiver serve` never share a state directory: the second is refused,
//! naming the running one and the way out, and the first keeps serving with
//! its `daemon.json` intact.

use quiver_tests::daemon;

use daemon::{Fixture, TestDaemon};

#[tokio::test(flavor = "multi_thread")]
async fn a_second_daemon_on_the_same_state_dir_is_refused() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let first = TestDaemon::start(&config, &fixture.state());

    let second = tokio::task::spawn_blocking({
        let (config, state) = (config.clone(), fixture.state());
        move || {
            quiver_tests::quiver_command()
                .args(["serve", "--listen", "127.0.0.1:0", "--config"])
                .arg(&config)
                .arg("--state-dir")
                .arg(&state)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("another quiver serve (process {}", first.pid())),
        "{stderr}"
    );
    assert!(stderr.contains("--state-dir"), "{stderr}");

    // The first is untouched.
    let (status, _) = first.get("/v1/health").await;
    assert_eq!(status, 200);
    let file = std::fs::read_to_string(fixture.state().join("daemon.json")).unwrap();
    let named: serde_json::Value = serde_json::from_str(&file).unwrap();
    assert_eq!(named["pid"], first.pid());
}
