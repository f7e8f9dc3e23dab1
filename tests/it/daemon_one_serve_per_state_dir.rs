//! Two `quiver serve` never share a state directory: the second is refused,
//! naming the running one and the way out, and the first keeps serving with
//! its `daemon.json` intact. The second is refused before it starts
//! anything: its plugins are not loaded (the first's private copies
//! survive), its MCP servers never start.

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

fn copies(state: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(state.join("plugins"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_second_daemon_starts_nothing() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let first = TestDaemon::start(&config, &fixture.state());
    let before = copies(&fixture.state());
    assert_eq!(before.len(), 1, "{before:?}");

    let marker = fixture.path().join("mcp-started");
    let second_config = fixture.path().join("second.yaml");
    std::fs::write(
        &second_config,
        format!(
            "plugins:\n  dirs: [{plugins}]\nmcp_servers:\n  marker:\n    command: sh\n    args: [\"-c\", \"touch {marker}\"]\n",
            plugins = fixture.plugins().display(),
            marker = marker.display(),
        ),
    )
    .unwrap();
    for extra in [&[][..], &["--stdio"][..]] {
        let output = tokio::task::spawn_blocking({
            let (config, state) = (second_config.clone(), fixture.state());
            let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
            move || {
                quiver_tests::quiver_command()
                    .args(["serve", "--listen", "127.0.0.1:0", "--config"])
                    .arg(&config)
                    .arg("--state-dir")
                    .arg(&state)
                    .args(&extra)
                    .stdin(std::process::Stdio::null())
                    .output()
                    .unwrap()
            }
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{extra:?}: {stderr}");
        assert!(stderr.contains("another quiver serve"), "{stderr}");
    }
    // Give a started MCP server time to have run.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        !marker.exists(),
        "the refused daemon started its MCP server"
    );
    assert_eq!(copies(&fixture.state()), before);
    let (status, body) = first.get("/v1/status").await;
    assert_eq!(status, 200);
    assert_eq!(body["plugins"]["plugins"][0]["name"], "text", "{body}");
}
