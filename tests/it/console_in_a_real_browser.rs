//! The web console in a real browser: headless Chromium driven over
//! WebDriver (chromedriver on loopback) against the real daemon and a
//! scripted model. Signing in with the daemon's token opens the console; a
//! turn's tool calls appear live in the activity feed with their real
//! names, `via tool_call` and their results; a pending `run_command`
//! appears in the approvals and approving it lets the turn finish; one
//! another client answers through the API says who answered, there and in
//! the feed; the catalog's search box finds a deferred tool as
//! `tool_search` does and describes it on click; the session's transcript
//! shows the turn; the Health page draws the savings charts and shows a
//! plugin dropped into the watched directory as it loads; signing out
//! ends the session, after which the API refuses the browser.
//!
//! Chromium and chromedriver must be installed (`.ci/run` installs them):
//! without them the test fails and says so. With
//! `QUIVER_CONSOLE_SCREENSHOTS=1` it saves a screenshot of each page to
//! `docs/console/`.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use quiver_tests::daemon::{Fixture, TestDaemon};
use quiver_tests::model::ScriptedModel;
use serde_json::{Value, json};

/// How long any one thing the test waits for may take.
const WAIT: Duration = Duration::from_secs(90);

/// `name` on `PATH` (or the file `env` names).
fn program(name: &str, env: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{name}` is not installed (or set {env}): the console's browser test needs Chromium and chromedriver; on Debian: apt-get install -y chromium chromium-driver"
            )
        })
}

/// chromedriver on a loopback port, in its own process group, and the
/// Chromium it starts; the whole group is killed when dropped.
struct Driver {
    child: std::process::Child,
    url: String,
    _profile: tempfile::TempDir,
}

impl Driver {
    async fn start() -> (Driver, Client) {
        let chromium = program("chromium", "CHROMIUM");
        let chromedriver = program("chromedriver", "CHROMEDRIVER");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = Command::new(chromedriver);
        command
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command.spawn().unwrap();
        let driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _profile: tempfile::tempdir().unwrap(),
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + WAIT;
        loop {
            let ready = http.get(format!("{}/status", driver.url)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver never answered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", driver._profile.path().display()),
                ],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&driver.url)
            .await
            .unwrap_or_else(|e| panic!("chromedriver could not start Chromium: {e}"));
        (driver, client)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // chromedriver and the browsers it started share its group.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

/// Waits until the JavaScript expression `condition` is true in the page.
async fn until(client: &Client, condition: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let script = format!("return Boolean({condition});");
        if let Ok(Value::Bool(true)) = client.execute(&script, vec![]).await {
            return;
        }
        if Instant::now() >= deadline {
            let page = client
                .execute("return document.body.innerText;", vec![])
                .await
                .unwrap_or_default();
            panic!("the page never met `{condition}`; it shows:\n{page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// Saves the page to `docs/console/NAME.png` when asked to.
async fn screenshot(client: &Client, name: &str) {
    if std::env::var_os("QUIVER_CONSOLE_SCREENSHOTS").is_none() {
        return;
    }
    let dir = quiver_tests::workspace_root().join("docs").join("console");
    std::fs::create_dir_all(&dir).unwrap();
    let png = client.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_signs_in_shows_activity_approves_searches_and_signs_out() {
    let script = json!([
        {"match": "count the words", "steps": [
            {"tool_calls": [{"name": "tool_search", "arguments": {"query": "count the words of a text"}}]},
            {"tool_calls": [{"name": "tool_call", "arguments": {"name": "word_count", "arguments": {"text": "one two three"}}}]},
            {"content": "counted: {{last_tool_result}}"}
        ]},
        {"match": "make the file", "steps": [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo approved > made.txt && echo done"}}]},
            {"content": "result: {{last_tool_result}}"}
        ]},
        {"match": "make another file", "steps": [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo elsewhere > another.txt && echo also done"}}]},
            {"content": "result: {{last_tool_result}}"}
        ]}
    ]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let daemon = Arc::new(TestDaemon::start(&config, &fixture.state()));
    daemon.ready().await;
    let (_driver, client) = Driver::start().await;

    // Sign in.
    client.goto(&format!("{}/", daemon.url)).await.unwrap();
    until(&client, "!document.getElementById('sign-in').hidden").await;
    screenshot(&client, "sign-in").await;
    client
        .find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(&daemon.token)
        .await
        .unwrap();
    click(&client, "#sign-in-form button[type=submit]").await;
    until(&client, "!document.getElementById('tabs').hidden").await;
    until(
        &client,
        "document.getElementById('feed-state').textContent === 'live'",
    )
    .await;

    // A turn's calls appear live, under their real names.
    let session = daemon.session(json!({})).await;
    let turn = tokio::spawn({
        let daemon = daemon.clone();
        let session = session.clone();
        async move { daemon.say(&session, "please count the words").await }
    });
    until(
        &client,
        "[...document.querySelectorAll('#feed li')].some(li => li.dataset.tool === 'word_count' && li.dataset.status === 'ok' && li.innerText.includes('via tool_call'))",
    )
    .await;
    until(
        &client,
        "[...document.querySelectorAll('#feed li')].some(li => li.dataset.tool === 'tool_search')",
    )
    .await;
    // Each call shows what the tool answered.
    until(
        &client,
        "[...document.querySelectorAll('#feed li')].some(li => li.dataset.tool === 'word_count' && li.querySelector('details.result pre') && li.querySelector('details.result pre').textContent.includes('3'))",
    )
    .await;
    let outcome = tokio::time::timeout(WAIT, turn).await.unwrap().unwrap();
    assert!(
        outcome["reply"].as_str().unwrap().starts_with("counted"),
        "{outcome}"
    );
    screenshot(&client, "activity").await;

    // A pending run_command appears; approving it lets the turn finish.
    // (A session of its own: the scripted model matches a conversation
    // by its first message.)
    let second = daemon.session(json!({})).await;
    let turn = tokio::spawn({
        let daemon = daemon.clone();
        let session = second.clone();
        async move { daemon.say(&session, "make the file").await }
    });
    click(&client, "[data-tab=approvals]").await;
    until(
        &client,
        "[...document.querySelectorAll('#approval-list li .tool')].some(t => t.textContent === 'run_command') && document.querySelector('#approval-list li pre').textContent.includes('made.txt')",
    )
    .await;
    screenshot(&client, "approvals").await;
    click(&client, "#approval-list li button[data-decision=approve]").await;
    let outcome = tokio::time::timeout(WAIT, turn).await.unwrap().unwrap();
    assert!(
        outcome["reply"].as_str().unwrap().contains("done"),
        "{outcome}"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.work().join("made.txt")).unwrap(),
        "approved\n"
    );
    until(
        &client,
        "document.querySelector('#approval-list li .answer').textContent.includes('Answered by console')",
    )
    .await;

    // Another client answers through the API: the page says who.
    let third = daemon.session(json!({})).await;
    let turn = tokio::spawn({
        let daemon = daemon.clone();
        let session = third.clone();
        async move { daemon.say(&session, "make another file").await }
    });
    until(
        &client,
        "[...document.querySelectorAll('#approval-list li pre')].some(p => p.textContent.includes('another.txt'))",
    )
    .await;
    let (_, listed) = daemon.get(&format!("/v1/approvals?session={third}")).await;
    let pending = &listed["approvals"][0];
    let (status, answered) = daemon
        .post(
            &format!("/v1/approvals/{}", pending["id"]),
            json!({"decision": "approve", "digest": pending["digest"], "client": "quiver chat"}),
        )
        .await;
    assert_eq!(status, 200, "{answered}");
    let outcome = tokio::time::timeout(WAIT, turn).await.unwrap().unwrap();
    assert!(
        outcome["reply"].as_str().unwrap().contains("also done"),
        "{outcome}"
    );
    until(
        &client,
        &format!(
            "[...document.querySelectorAll('#approval-list li')].some(li => li.dataset.id === '{}' && li.querySelector('.answer').textContent.includes('Answered by quiver chat (approve)'))",
            pending["id"]
        ),
    )
    .await;
    screenshot(&client, "approvals-answered").await;
    click(&client, "[data-tab=activity]").await;
    until(
        &client,
        "[...document.querySelectorAll('#feed li')].some(li => li.dataset.tool === 'run_command' && li.dataset.status === 'ok' && li.innerText.includes('approval answered by quiver chat') && li.querySelector('details.result').textContent.includes('also done'))",
    )
    .await;

    // The catalog: the listing as the model gets it, and the search box.
    click(&client, "[data-tab=catalog]").await;
    until(
        &client,
        "document.getElementById('catalog-listing').textContent.length > 0",
    )
    .await;
    client
        .find(Locator::Id("search-query"))
        .await
        .unwrap()
        .send_keys("count the words of a text")
        .await
        .unwrap();
    click(&client, "#catalog-search button[type=submit]").await;
    until(
        &client,
        "document.querySelector('#search-results li button') && document.querySelector('#search-results li button').textContent === 'word_count'",
    )
    .await;
    click(&client, "#search-results li button").await;
    until(
        &client,
        "!document.getElementById('describe').hidden && document.getElementById('describe').textContent.includes('input_schema')",
    )
    .await;
    screenshot(&client, "catalog").await;

    // The session's transcript.
    click(&client, "[data-tab=sessions]").await;
    until(
        &client,
        &format!(
            "[...document.querySelectorAll('#session-list button')].some(b => b.textContent === '{session}')"
        ),
    )
    .await;
    client
        .execute(
            "[...document.querySelectorAll('#session-list button')].find(b => b.textContent === arguments[0]).click();",
            vec![json!(session)],
        )
        .await
        .unwrap();
    until(
        &client,
        "document.getElementById('transcript').innerText.includes('counted')",
    )
    .await;
    screenshot(&client, "sessions").await;

    // Savings and health.
    click(&client, "[data-tab=health]").await;
    until(
        &client,
        "document.querySelectorAll('#health-servers li').length > 0 && document.querySelectorAll('#health-plugins li').length > 0",
    )
    .await;
    // The savings charts, drawn from the daemon's series (several
    // assemblies and calls by now).
    until(
        &client,
        "document.querySelector('#chart-tokens svg polyline.series-with') && document.querySelector('#chart-tokens svg polyline.series-without') && document.querySelector('#chart-calls svg polyline') && document.querySelector('#chart-tokens svg title').textContent.includes('with tool search')",
    )
    .await;
    // A plugin dropped into the watched directory shows up as it loads,
    // without reloading the page.
    until(
        &client,
        "document.getElementById('status-state').textContent === 'live'",
    )
    .await;
    client
        .execute("document.body.dataset.marker = 'same page';", vec![])
        .await
        .unwrap();
    quiver_tests::install_plugin(
        &quiver_tests::plugin_so("time"),
        &fixture.plugins(),
        "time.so",
    );
    until(
        &client,
        "document.querySelector('#health-plugins li[data-name=time]') && document.querySelector('#health-plugins li[data-name=time]').innerText.includes('generation') && document.body.dataset.marker === 'same page'",
    )
    .await;
    screenshot(&client, "health").await;

    // Narrow, as on a phone.
    client.set_window_size(360, 800).await.unwrap();
    click(&client, "[data-tab=activity]").await;
    screenshot(&client, "activity-360").await;

    // Sign out: the page asks for the token again and the API refuses the
    // browser (its cookie no longer names a session).
    click(&client, "#sign-out").await;
    until(&client, "!document.getElementById('sign-in').hidden").await;
    let status = client
        .execute_async(
            "const done = arguments[arguments.length - 1]; fetch('/v1/sessions').then(r => done(r.status), () => done(0));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(401));
    client.close().await.unwrap();
}
