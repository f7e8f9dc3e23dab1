//! Upstream OAuth: our test server in `--oauth` mode protects `/mcp` with
//! bearer tokens it issues as an authorization server beside it (metadata,
//! registration, PKCE, refresh). Without a token the daemon shows the
//! server as needing `quiver mcp login remote`; the login (the real binary,
//! its authorize URL followed by this test as a browser would) stores the
//! tokens 0600 in the state directory; the running daemon connects without
//! a restart and calls the server's tool through the gateway; an expired
//! access token is refreshed and written back, before use when its time is
//! up and once after a 401 when the server ended it early; `quiver status`
//! shows who is logged in and when the token expires, and no token reaches
//! the daemon's or the login's output, even at debug level. Then the
//! refusals: unknown, stdio and non-OAuth servers, a forged `state`, a
//! denied authorization and no redirect at all.

use quiver_tests::daemon;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use daemon::TestDaemon;
use quiver_tests::KillOnDrop;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

/// The test server with OAuth on a free 127.0.0.1 port, and its `/mcp` URL.
fn oauth_server() -> (quiver_tests::KillOnDrop, String) {
    let mut command = std::process::Command::new(quiver_tests::mcp_test_server());
    command.args(["--http", "127.0.0.1:0", "--oauth"]);
    quiver_tests::spawn_serving_url(command)
}

/// A config in `dir` with the OAuth server `remote`, the same with a
/// pre-registered client (`fixed`, disabled), the plain HTTP server
/// `plain` (same URL, no `oauth`) and the stdio server `local`; the state
/// directory is `dir/state`.
fn write_config(dir: &Path, url: &str) -> PathBuf {
    let text = format!(
        "serve:\n  state_dir: state\ncore_tools:\n  workspace: work\nmcp_servers:\n  remote:\n    url: {url}\n    oauth: true\n    connect_timeout_s: 20\n  fixed:\n    url: {url}\n    enabled: false\n    oauth:\n      client_id: preregistered\n      scopes: [tools]\n  plain:\n    url: {url}\n    enabled: false\n  local:\n    command: {server}\n    enabled: false\n",
        server = quiver_tests::mcp_test_server().display()
    );
    std::fs::create_dir_all(dir.join("work")).unwrap();
    let path = dir.join("quiver.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `quiver mcp login SERVER` running, with the authorize URL it printed.
fn start_login(config: &Path, server: &str, extra: &[&str]) -> (KillOnDrop, String) {
    let child = quiver_tests::quiver_command()
        .args(["mcp", "login", server, "--config"])
        .arg(config)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let (_, stderr) = finished(child);
            panic!("no authorize URL in {seen:?}; stderr {stderr}");
        }
        seen.push_str(&line);
        if let Some(url) = line.trim().strip_prefix("http") {
            // The rest of stdout is read after the login ends.
            std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
            return (child, format!("http{url}"));
        }
    }
}

/// What the authorization server redirects the browser to.
async fn approve(authorize: &str) -> String {
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let answer = browser.get(authorize).send().await.unwrap();
    assert!(answer.status().is_redirection(), "{answer:?}");
    answer.headers()["location"].to_str().unwrap().to_owned()
}

/// Follows `redirect` to the login's listener; the page it answers.
async fn follow(redirect: &str) -> String {
    reqwest::get(redirect).await.unwrap().text().await.unwrap()
}

/// Whether the login succeeded, and its stderr.
fn finished(mut child: KillOnDrop) -> (bool, String) {
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut stderr).unwrap();
    (child.0.wait().unwrap().success(), stderr)
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The daemon's entry for `remote` once `condition` holds (bounded).
async fn remote_status(daemon: &TestDaemon, condition: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..600 {
        let (_, status) = daemon.get("/v1/status").await;
        let remote = status["mcp_servers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == "remote")
            .cloned()
            .unwrap_or(Value::Null);
        if condition(&remote) {
            return remote;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("remote never reached the expected state");
}

async fn add_through_gateway(daemon: &TestDaemon) -> Value {
    let result = call_add(daemon).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result.structured_content.unwrap()
}

/// `mcp_remote_add {a: 40, b: 2}` through the daemon's gateway.
async fn call_add(daemon: &TestDaemon) -> rmcp::model::CallToolResult {
    let client = ()
        .serve(StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", daemon.url))
                .auth_header(daemon.token.clone()),
        ))
        .await
        .unwrap();
    let mut params = CallToolRequestParams::new("tool_call");
    params.arguments = json!({"name": "mcp_remote_add", "arguments": {"a": 40, "b": 2}})
        .as_object()
        .cloned();
    let result = client.call_tool(params).await.unwrap();
    let _ = client.cancel().await;
    result
}

async fn oauth_stats(url: &str) -> Value {
    let base = url.trim_end_matches("/mcp");
    reqwest::get(format!("{base}/oauth/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn access_token(file: &Path) -> String {
    quiver_tests::read_json(file)["token_response"]["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn login_while_running_then_calls_refresh_and_status() {
    let (_server, url) = oauth_server();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &url);
    let state = dir.path().join("state");
    let mut command = quiver_tests::quiver_command();
    command
        .args(["serve", "--config"])
        .arg(&config)
        .env("QUIVER_LOG", "debug")
        .stderr(Stdio::piped());
    let mut daemon = TestDaemon::spawn(command, &state);
    let log = daemon.stderr_lines();

    // No token yet: the server waits for a login and says which command.
    let waiting = remote_status(&daemon, |s| s["state"] == "needs_login").await;
    assert_eq!(waiting["command"], "quiver mcp login remote", "{waiting}");
    assert_eq!(waiting["oauth"]["logged_in"], false, "{waiting}");
    assert_eq!(
        oauth_stats(&url).await["refused"],
        0,
        "the daemon sends nothing without a token"
    );
    log.wait_for(
        "mcp server remote (http): needs an OAuth login: run `quiver mcp login remote`",
        Duration::from_secs(10),
    );
    let shown = quiver_tests::quiver(&["status", "--config", quiver_tests::arg(&config)]);
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.contains("needs_login waiting for an OAuth login (run `quiver mcp login remote`)")
            && shown.contains("oauth: not logged in; run `quiver mcp login remote`"),
        "{shown}"
    );

    // The login, as a user would do it from another terminal.
    let (login, authorize) = start_login(&config, "remote", &[]);
    assert!(
        authorize.contains("code_challenge_method=S256")
            && authorize.contains("resource=")
            && authorize.contains("state="),
        "{authorize}"
    );
    let redirect = approve(&authorize).await;
    assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");
    let page = follow(&redirect).await;
    assert!(page.contains("logged in to remote"), "{page}");
    let (ok, login_stderr) = finished(login);
    assert!(ok, "{login_stderr}");
    let file = state.join("oauth").join("remote.json");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&state.join("oauth")), 0o700);
    assert_eq!(
        oauth_stats(&url).await["registered"],
        1,
        "dynamic registration"
    );

    // The running daemon connects without a restart or a retry storm.
    let ready = remote_status(&daemon, |s| s["state"] == "ready").await;
    assert_eq!(ready["oauth"]["account"], "ada", "{ready}");
    assert_eq!(ready["oauth"]["refreshable"], true, "{ready}");
    assert!(ready["oauth"]["expires_at"].as_u64().is_some(), "{ready}");
    // Without a token went only the discovery requests (one by the login,
    // one by the daemon's connection, which asks for the 401 challenge
    // before it reads the metadata), none while the daemon waited.
    assert_eq!(oauth_stats(&url).await["refused"], 2);
    assert_eq!(add_through_gateway(&daemon).await["sum"], 42.0);

    // The access token's time is up: the next request refreshes it first
    // and writes the new tokens back.
    let before = access_token(&file);
    let mut stored = quiver_tests::read_json(&file);
    stored["token_received_at"] = json!(1_000_000);
    std::fs::write(&file, serde_json::to_vec(&stored).unwrap()).unwrap();
    assert_eq!(add_through_gateway(&daemon).await["sum"], 42.0);
    assert_eq!(oauth_stats(&url).await["refreshes"], 1);
    let after = access_token(&file);
    assert_ne!(before, after, "the refreshed token is stored");
    assert_eq!(mode(&file), 0o600);

    // The server ends the token early: the 401 is answered by one refresh
    // and the call goes through.
    let base = url.trim_end_matches("/mcp");
    let expired = reqwest::Client::new()
        .post(format!("{base}/oauth/expire"))
        .send()
        .await
        .unwrap();
    assert!(expired.status().is_success());
    assert_eq!(add_through_gateway(&daemon).await["sum"], 42.0);
    assert_eq!(oauth_stats(&url).await["refreshes"], 2);
    let after = access_token(&file);
    let refresh_token = quiver_tests::read_json(&file)["token_response"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_owned();

    // What status shows: who and until when, never a token.
    let (_, status) = daemon.get("/v1/status").await;
    let text = status.to_string();
    assert!(
        !text.contains(&after) && !text.contains("refresh-"),
        "{text}"
    );
    let shown = quiver_tests::quiver(&["status", "--config", quiver_tests::arg(&config)]);
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.contains("oauth: logged in as ada, access token expires ")
            && shown.contains("(refreshed before then)"),
        "{shown}"
    );
    assert!(!shown.contains(&after), "{shown}");

    // Logging out removes the tokens: the next call is refused upstream,
    // the model is told to log in, and the server waits for a login.
    let out = quiver_tests::quiver(&[
        "mcp",
        "logout",
        "remote",
        "--config",
        quiver_tests::arg(&config),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(!file.exists());
    let refused = call_add(&daemon).await;
    let text = format!("{:?}", refused.content);
    assert!(
        refused.is_error == Some(true) && text.contains("run `quiver mcp login remote`"),
        "{text}"
    );
    let waiting = remote_status(&daemon, |s| s["state"] == "needs_login").await;
    assert_eq!(waiting["oauth"]["logged_in"], false, "{waiting}");

    // No token reached a log line, at debug level either.
    log.wait_for("OAuth tokens saved", Duration::from_secs(10));
    daemon.stop();
    let lines = log.all().join("\n");
    for secret in [&before, &after, &refresh_token] {
        assert!(
            !lines.contains(secret.as_str()),
            "{secret} in the daemon's log"
        );
        assert!(
            !login_stderr.contains(secret.as_str()),
            "{secret} in the login's output"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn logins_refuse_wrong_servers_forged_state_denials_and_silence() {
    let (_server, url) = oauth_server();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &url);
    let file = dir.path().join("state").join("oauth").join("remote.json");
    let config_arg = quiver_tests::arg(&config);

    for (server, expected) in [
        (
            "nope",
            "no MCP server `nope` is configured; configured: fixed, local, plain, remote",
        ),
        ("local", "server `local` is a stdio server"),
        ("plain", "server `plain` does not use OAuth"),
    ] {
        let out = quiver_tests::quiver(&["mcp", "login", server, "--config", config_arg]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(expected),
            "{stderr}"
        );
    }

    // A redirect whose state is not the login's is refused.
    let (login, authorize) = start_login(&config, "remote", &[]);
    let redirect = approve(&authorize).await;
    let (before, _) = redirect.split_once("&state=").unwrap();
    let page = follow(&format!("{before}&state=forged")).await;
    assert!(page.contains("could not log in"), "{page}");
    let (ok, stderr) = finished(login);
    assert!(!ok && stderr.contains("`state` does not match"), "{stderr}");
    assert!(!file.exists());

    // The authorization server's refusal is said as such.
    let (login, authorize) = start_login(&config, "remote", &[]);
    let redirect = approve(&authorize).await;
    let (listener, query) = redirect.split_once('?').unwrap();
    let state = query
        .split('&')
        .find_map(|p| p.strip_prefix("state="))
        .unwrap();
    follow(&format!(
        "{listener}?error=access_denied&error_description=user%20said%20no&state={state}"
    ))
    .await;
    let (ok, stderr) = finished(login);
    assert!(
        !ok && stderr.contains("the authorization was denied (access_denied: user said no)"),
        "{stderr}"
    );
    assert!(!file.exists());

    // Nobody comes back: the login gives up and says so.
    let (login, _) = start_login(&config, "remote", &["--timeout-s", "1"]);
    let (ok, stderr) = finished(login);
    assert!(
        !ok && stderr.contains("no redirect reached http://127.0.0.1:"),
        "{stderr}"
    );
    assert!(!file.exists());

    // Bad `oauth` settings: each error names the file, line, key and fix.
    let url_server = "mcp_servers:\n  r:\n    url: http://127.0.0.1:1/mcp\n";
    for (text, expected) in [
        (
            "mcp_servers:\n  local:\n    command: x\n    oauth:\n      client_id: abc\n".to_owned(),
            ":5:7: `mcp_servers.local.oauth`: OAuth is for `url` (Streamable HTTP) servers",
        ),
        (
            format!("{url_server}    headers: {{Authorization: \"Bearer x\"}}\n    oauth: true\n"),
            ":4:30: `mcp_servers.r.headers.Authorization`: an `oauth` server sends its own Authorization header",
        ),
        (
            format!("{url_server}    oauth:\n      scopes: [read, \"two words\"]\n"),
            ":5:22: `mcp_servers.r.oauth.scopes[1]`: `two words` is not a scope name",
        ),
        (
            format!("{url_server}    oauth: yes please\n"),
            "`mcp_servers.r.oauth`: wrong type: expected a map, found `yes please`; allowed: true, false or a map with keys client_id, scopes",
        ),
        (
            format!("{url_server}    oauth:\n      client: x\n"),
            "`mcp_servers.r.oauth.client`: unknown key `client`; did you mean `client_id`?",
        ),
    ] {
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, &text).unwrap();
        let out = quiver_tests::quiver(&["config", "check", quiver_tests::arg(&bad)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(expected),
            "{text}: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configured_client_id_and_scopes_skip_registration() {
    let (_server, url) = oauth_server();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &url);
    let config_arg = quiver_tests::arg(&config);

    let (login, authorize) = start_login(&config, "fixed", &[]);
    assert!(
        authorize.contains("client_id=preregistered") && authorize.contains("scope=tools"),
        "{authorize}"
    );
    follow(&approve(&authorize).await).await;
    let (ok, stderr) = finished(login);
    assert!(ok, "{stderr}");
    let stats = oauth_stats(&url).await;
    assert_eq!(
        (stats["registered"].as_u64(), stats["codes"].as_u64()),
        (Some(0), Some(1))
    );
    let file = dir.path().join("state").join("oauth").join("fixed.json");
    assert_eq!(quiver_tests::read_json(&file)["client_id"], "preregistered");

    let out = quiver_tests::quiver(&["mcp", "logout", "fixed", "--config", config_arg]);
    assert!(out.status.success() && !file.exists(), "{out:?}");
    let again = quiver_tests::quiver(&["mcp", "logout", "fixed", "--config", config_arg]);
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.status.success() && said.contains("No OAuth tokens are stored for fixed"),
        "{said}"
    );
}
