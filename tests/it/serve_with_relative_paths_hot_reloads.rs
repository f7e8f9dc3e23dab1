//! `quiver serve --config ../conf/quiver.yaml`, started in another
//! directory, with a relative `plugins.dirs` and `serve.state_dir` in the
//! config: the paths are resolved once against the config file, so a
//! plugin dropped into the watched directory is loaded (hot reload), and
//! `daemon.json` holds absolute paths, so `quiver status --state-dir`
//! from yet another directory finds the daemon and counts its plugins as
//! `/v1/status` does, a file that is no plugin among them as not loaded.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use quiver_tests::{install_plugin, plugin_so, quiver_command};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread")]
async fn relative_paths_hot_reload_and_status_from_elsewhere() {
    let temp = tempfile::tempdir().unwrap();
    let (conf, elsewhere) = (temp.path().join("conf"), temp.path().join("elsewhere"));
    std::fs::create_dir_all(conf.join("plugins")).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(
        conf.join("quiver.yaml"),
        "plugins:\n  dirs: [plugins]\nserve:\n  state_dir: state\ncore_tools:\n  workspace: .\n",
    )
    .unwrap();
    let mut child = quiver_tests::KillOnDrop(
        quiver_command()
            .args([
                "serve",
                "--config",
                "../conf/quiver.yaml",
                "--listen",
                "127.0.0.1:0",
            ])
            .current_dir(&elsewhere)
            .env("HOME", temp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("http://127.0.0.1:"), "serve printed {line:?}");

    // daemon.json is in the config's state directory and names absolute paths.
    let state = conf.join("state");
    let daemon: Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("daemon.json")).unwrap()).unwrap();
    let token_file = daemon["token_file"].as_str().unwrap();
    assert!(token_file.starts_with('/'), "{daemon}");
    let token = std::fs::read_to_string(token_file).unwrap();
    let url = daemon["url"].as_str().unwrap().to_owned();

    // A plugin dropped into the relative directory is loaded.
    install_plugin(&plugin_so("echo_v1"), &conf.join("plugins"), "echo.so");
    let client = reqwest::Client::new();
    let status = |client: reqwest::Client, url: String, token: String| async move {
        client
            .get(format!("{url}/v1/status"))
            .bearer_auth(token.trim())
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let mut loaded = Value::Null;
    for _ in 0..300 {
        loaded = status(client.clone(), url.clone(), token.clone()).await;
        if loaded["plugins"]["plugins"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let plugins = loaded["plugins"]["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 1, "the watcher never loaded it: {loaded}");

    // `quiver status` from another directory, by the state directory.
    let quiver_status = || {
        quiver_command()
            .args(["status", "--state-dir"])
            .arg(&state)
            .current_dir(temp.path())
            .env("HOME", temp.path())
            .output()
            .unwrap()
    };
    let printed = quiver_status();
    let stdout = String::from_utf8_lossy(&printed.stdout);
    assert!(
        printed.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    assert!(
        stdout.contains(&format!("daemon: running at {url}")),
        "{stdout}"
    );
    assert!(stdout.contains("plugins: 1\n"), "{stdout}");

    // A file that is no plugin is listed as not loaded, with its error,
    // not as healthy; the loaded plugin keeps serving.
    std::fs::write(conf.join("plugins").join("notes.so"), "not a plugin").unwrap();
    let mut listed = Value::Null;
    for _ in 0..300 {
        listed = status(client.clone(), url.clone(), token.clone()).await;
        if listed["plugins"]["plugins"]
            .as_array()
            .is_some_and(|p| p.len() == 2)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let plugins = listed["plugins"]["plugins"].as_array().unwrap();
    let broken = plugins
        .iter()
        .find(|p| p["file"].as_str().is_some_and(|f| f.ends_with("notes.so")))
        .unwrap_or_else(|| panic!("the watcher never listed it: {listed}"));
    assert_eq!(broken["health"], "not_loaded", "{listed}");
    assert!(broken["last_error"].as_str().is_some(), "{listed}");
    let printed = quiver_status();
    let stdout = String::from_utf8_lossy(&printed.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("(not loaded)"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.contains("generation -") && line.contains("not_loaded"),
        "{stdout}"
    );
    assert!(stdout.contains("plugins: 2\n"), "{stdout}");
}
