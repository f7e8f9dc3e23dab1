//! The web console's security rules over plain HTTP: `/` and its assets
//! come with a strict Content-Security-Policy; sign-in trades the daemon's
//! token (never a gateway client's) for an HttpOnly, SameSite=Strict,
//! Path=/ cookie naming a server-side session, not the token; a request
//! that changes state by cookie needs its own origin; the cookie does not
//! open `/mcp`; sign-out ends the session on the server. The console's
//! search answers as the model's `tool_search` does, without recording a
//! call. The sign-in and link lifetimes are settings. The Health page's
//! status stream sends the plugins' state at once and again when a plugin
//! is dropped into the watched directory; the savings series has the
//! daemon's totals.

use quiver_tests::daemon::{Fixture, TestDaemon};
use reqwest::Method;
use serde_json::{Value, json};

async fn json_error(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(kind.starts_with("application/json"), "{status} {kind}");
    let body: Value = response.json().await.unwrap();
    (
        status,
        body["error"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn sign_in_gives_a_strict_server_side_cookie_and_sign_out_ends_it() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    let http = reqwest::Client::new();
    let origin = daemon.url.clone();
    let url = |path: &str| format!("{}{path}", daemon.url);

    // The page and its assets, without a token, under a strict CSP.
    for (path, kind) in [
        ("/", "text/html"),
        ("/console/app.js", "text/javascript"),
        ("/console/app.css", "text/css"),
    ] {
        let response = http.get(url(path)).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let headers = response.headers();
        assert!(
            headers["content-type"].to_str().unwrap().starts_with(kind),
            "{path}"
        );
        let csp = headers["content-security-policy"].to_str().unwrap();
        for part in [
            "default-src 'none'",
            "script-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(part), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
    }
    let page = http
        .get(url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains("<script>") && !page.contains("style="),
        "inline script or style in the page"
    );

    let sign_in = |token: &str, origin: Option<&str>| {
        let mut request = http
            .post(url("/v1/console/sign-in"))
            .json(&json!({"token": token}));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };

    // Sign-in itself needs the console's origin.
    let response = sign_in(&daemon.token, None).await.unwrap();
    assert!(response.headers().get("set-cookie").is_none());
    assert_eq!(json_error(response).await, (403, "bad_origin".into()));
    let response = sign_in(&daemon.token, Some("http://evil.example"))
        .await
        .unwrap();
    assert_eq!(json_error(response).await, (403, "bad_origin".into()));

    // A wrong token, and a gateway client's token, cannot sign in.
    let response = sign_in("wrong", Some(&origin)).await.unwrap();
    assert!(response.headers().get("set-cookie").is_none());
    assert_eq!(json_error(response).await, (401, "unauthorized".into()));
    let (status, client) = daemon
        .post(
            "/v1/gateway/clients",
            json!({"name": "editor", "grants": ["*"]}),
        )
        .await;
    assert_eq!(status, 201, "{client}");
    let client_token = client["token"].as_str().unwrap();
    let response = sign_in(client_token, Some(&origin)).await.unwrap();
    assert!(response.headers().get("set-cookie").is_none());
    assert_eq!(json_error(response).await, (403, "client_token".into()));

    // The daemon's token: a cookie with the flags, naming a session.
    let response = sign_in(&daemon.token, Some(&origin)).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let set_cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(flag), "{set_cookie}");
    }
    let cookie = set_cookie.split(';').next().unwrap().trim().to_owned();
    let (name, value) = cookie.split_once('=').unwrap();
    assert_eq!(name, "quiver_console");
    assert!(
        value.len() >= 32 && value != daemon.token && !value.contains(&daemon.token),
        "{cookie}"
    );

    let with_cookie =
        |method: Method, path: &str| http.request(method, url(path)).header("cookie", &cookie);
    let response = with_cookie(Method::GET, "/v1/sessions")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);

    // State changes by cookie need the console's own origin.
    for bad in [None, Some("http://evil.example"), Some("null")] {
        let mut request = with_cookie(Method::POST, "/v1/sessions").json(&json!({}));
        if let Some(bad) = bad {
            request = request.header("origin", bad);
        }
        let response = request.send().await.unwrap();
        assert_eq!(
            json_error(response).await,
            (403, "bad_origin".into()),
            "Origin {bad:?}"
        );
    }
    assert!(
        daemon.get("/v1/sessions").await.1["sessions"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let response = with_cookie(Method::POST, "/v1/sessions")
        .header("origin", &origin)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);

    // The cookie is not a gateway credential.
    let response = with_cookie(Method::GET, "/mcp").send().await.unwrap();
    assert_eq!(json_error(response).await, (401, "unauthorized".into()));

    // Sign-out ends the session on the server: the old cookie is refused.
    let response = with_cookie(Method::POST, "/v1/console/sign-out")
        .header("origin", &origin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let cleared = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    let response = with_cookie(Method::GET, "/v1/sessions")
        .send()
        .await
        .unwrap();
    assert_eq!(json_error(response).await, (401, "unauthorized".into()));
}

#[tokio::test(flavor = "multi_thread")]
async fn console_search_answers_as_tool_search_without_recording_a_call() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    daemon.ready().await;
    let session = daemon.session(json!({})).await;

    let (status, found) = daemon
        .get(&format!(
            "/v1/sessions/{session}/catalog/search?query=count%20the%20words%20of%20a%20text"
        ))
        .await;
    assert_eq!(status, 200, "{found}");
    let first = &found["matches"][0];
    assert_eq!(first["name"], "word_count", "{found}");
    assert!(first["score"].as_f64().unwrap() > 0.0, "{found}");
    let (status, gateway) = daemon
        .get("/v1/catalog/search?query=count%20the%20words%20of%20a%20text")
        .await;
    assert_eq!(status, 200);
    assert_eq!(gateway["matches"][0]["name"], "word_count", "{gateway}");

    let (status, described) = daemon
        .get(&format!(
            "/v1/sessions/{session}/catalog/describe?name=word_count"
        ))
        .await;
    assert_eq!(status, 200, "{described}");
    assert_eq!(described["name"], "word_count", "{described}");
    assert!(described["input_schema"].is_object(), "{described}");

    // A blank query is refused as tool_search refuses it.
    let (status, refused) = daemon
        .get(&format!("/v1/sessions/{session}/catalog/search?query=%20"))
        .await;
    assert_eq!(status, 400, "{refused}");

    // Nothing was recorded: no message, and the search counter the
    // model's searches move is untouched.
    let (_, stored) = daemon.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(stored["session"]["messages"], 0, "{stored}");
    let metrics = daemon
        .request(Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let searches: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("quiver_tool_search_queries_total"))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum();
    assert_eq!(searches, 0.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_startup_link_signs_in_once() {
    use std::io::{BufRead, BufReader};

    let fixture = Fixture::new();
    let config = fixture.config(
        "http://127.0.0.1:9",
        "serve:\n  console_session_s: 600\n  console_link_s: 120\n",
    );
    let mut command = quiver_tests::quiver_command();
    command
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(fixture.state())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    let mut child = quiver_tests::KillOnDrop(command.spawn().unwrap());
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let (mut first, mut second) = (String::new(), String::new());
    out.read_line(&mut first).unwrap();
    out.read_line(&mut second).unwrap();
    let link = second
        .split_whitespace()
        .find(|w| w.contains("/#once="))
        .unwrap_or_else(|| panic!("no sign-in link in {second:?}"));
    let (origin, code) = link.split_once("/#once=").unwrap();
    assert!(first.contains(origin), "{first}");
    assert!(code.len() >= 32, "{link}");
    assert!(second.contains("works once within 120 s"), "{second}");

    let http = reqwest::Client::new();
    let sign_in = || {
        http.post(format!("{origin}/v1/console/sign-in"))
            .header("origin", origin)
            .json(&json!({"once": code}))
            .send()
    };
    let response = sign_in().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("Max-Age=600"), "{cookie}");
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let response = http
        .get(format!("{origin}/v1/health"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    // Used once: the same link signs in no more.
    let response = sign_in().await.unwrap();
    assert!(response.headers().get("set-cookie").is_none());
    assert_eq!(json_error(response).await, (401, "unauthorized".into()));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_status_stream_shows_a_plugin_dropped_in_and_savings_have_totals() {
    use quiver_tests::daemon::read_named_events;
    use std::time::Duration;

    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    daemon.ready().await;

    let names = |data: &Value| -> Vec<String> {
        data["plugins"]["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str().map(str::to_owned))
            .collect()
    };
    let response = daemon.open_events("/v1/status/events").await;
    let first = read_named_events(response, Duration::from_secs(30), |_, _| true).await;
    let (name, data) = &first[0];
    assert_eq!(name, "status");
    assert_eq!(names(data), ["text"], "{data}");
    assert!(data["mcp_servers"][0]["reconnects"].is_u64(), "{data}");

    // A plugin dropped into the watched directory comes on the open stream.
    let response = daemon.open_events("/v1/status/events").await;
    quiver_tests::install_plugin(
        &quiver_tests::plugin_so("time"),
        &fixture.plugins(),
        "time.so",
    );
    let events = read_named_events(response, Duration::from_secs(60), |_, data| {
        names(data).contains(&"time".to_owned())
    })
    .await;
    let (_, last) = events.last().unwrap();
    assert!(names(last).contains(&"time".to_owned()), "{events:?}");
    let time = last["plugins"]["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "time")
        .unwrap();
    assert!(time["generation"].as_u64().unwrap() >= 1, "{time}");
    assert!(!time["tools"].as_array().unwrap().is_empty(), "{time}");

    // The savings series: the start's assembly is counted.
    let (status, savings) = daemon.get("/v1/savings").await;
    assert_eq!(status, 200, "{savings}");
    assert!(
        !savings["points"].as_array().unwrap().is_empty(),
        "{savings}"
    );
    let now = &savings["now"];
    assert!(now["assemblies"].as_u64().unwrap() >= 1, "{savings}");
    assert!(
        now["tokens_without_tool_search"].as_u64().unwrap() > 0,
        "{savings}"
    );
    assert!(now["tool_calls"].is_u64() && now["search_misses"].is_u64());
}
