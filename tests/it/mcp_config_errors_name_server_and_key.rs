//! Bad `mcp_servers` entries are config errors naming the file, line,
//! column, server and key, with the allowed values; `${VAR}` secrets that
//! are unset are errors too. A good file is accepted by `quiver config check`.

use quiver_config::ConfigError;
use quiver_daemon::config::parse;
use quiver_mcp::McpTransportConfig;

fn error(yaml: &str) -> (String, u32, String, String) {
    match parse(yaml, "q.yaml") {
        Err(ConfigError::Invalid {
            key,
            line,
            message,
            allowed,
            ..
        }) => (key, line, message, allowed),
        other => panic!("expected an error for {yaml:?}, got {other:?}"),
    }
}

#[test]
fn bad_entries_name_server_and_key() {
    let (key, line, message, _) =
        error("mcp_servers:\n  gh:\n    command: x\n    url: http://127.0.0.1/mcp\n");
    assert_eq!((key.as_str(), line), ("mcp_servers.gh.url", 4));
    assert!(message.contains("not both"), "{message}");

    let (key, _, message, _) = error("mcp_servers:\n  gh:\n    enabled: true\n");
    assert_eq!(key, "mcp_servers.gh");
    assert!(message.contains("needs `command`"), "{message}");

    let (key, line, message, allowed) =
        error("mcp_servers:\n  gh:\n    command: x\n    comand: y\n");
    assert!(key.starts_with("mcp_servers.gh"), "{key}");
    assert_eq!(line, 4);
    assert!(message.contains("comand"), "{message}");
    assert!(allowed.contains("connect_timeout_s"), "{allowed}");

    let (key, _, _, allowed) =
        error("mcp_servers:\n  gh:\n    command: x\n    call_timeout_s: soon\n");
    assert_eq!(key, "mcp_servers.gh.call_timeout_s");
    assert!(allowed.contains("integer"), "{allowed}");

    let (key, _, _, _) = error("mcp_servers:\n  gh:\n    command: x\n    headers: {A: b}\n");
    assert_eq!(key, "mcp_servers.gh.headers.A");
    let (key, _, _, _) =
        error("mcp_servers:\n  gh:\n    url: http://127.0.0.1/mcp\n    args: [a]\n");
    assert_eq!(key, "mcp_servers.gh.args");
    let (key, _, _, _) = error("mcp_servers:\n  gh:\n    url: ftp://x\n");
    assert_eq!(key, "mcp_servers.gh.url");
    let (key, _, _, _) =
        error("mcp_servers:\n  gh:\n    command: x\n    tools: {include: [\"a[\"]}\n");
    assert_eq!(key, "mcp_servers.gh.tools.include[0]");
    let (key, _, message, _) = error("mcp_servers:\n  \"my server\":\n    command: x\n");
    assert_eq!(key, "mcp_servers.my server");
    assert!(message.contains("not a valid server name"), "{message}");
}

#[test]
fn unset_secret_is_an_error_naming_server_and_key() {
    let (key, line, message, _) = error(
        "mcp_servers:\n  gh:\n    url: http://127.0.0.1/mcp\n    headers:\n      Authorization: \"Bearer ${QUIVER_TEST_SURELY_UNSET_VARIABLE}\"\n",
    );
    assert_eq!(
        (key.as_str(), line),
        ("mcp_servers.gh.headers.Authorization", 5)
    );
    assert!(
        message.contains("`QUIVER_TEST_SURELY_UNSET_VARIABLE` is not set"),
        "{message}"
    );
    let (key, ..) = error(
        "mcp_servers:\n  t:\n    command: x\n    env: {TOKEN: \"${QUIVER_TEST_SURELY_UNSET_VARIABLE}\"}\n",
    );
    assert_eq!(key, "mcp_servers.t.env.TOKEN");
}

#[test]
fn a_full_entry_is_read() {
    let loaded = parse(
        "mcp_servers:\n  time:\n    command: uvx\n    args: [mcp-server-time]\n    env: {TZ: UTC}\n    cwd: /tmp\n    enabled: false\n    connect_timeout_s: 5\n    call_timeout_s: 9999\n    tools: {include: [\"get_*\"], exclude: [get_secret]}\n",
        "q.yaml",
    )
    .unwrap();
    let server = &loaded.config.mcp_servers["time"];
    assert!(!server.enabled);
    assert_eq!(server.connect_timeout.as_secs(), 5);
    assert_eq!(server.call_timeout.as_secs(), 3600, "clamped");
    assert_eq!(loaded.warnings[0].key, "mcp_servers.time.call_timeout_s");
    assert!(server.tools.allows("get_time") && !server.tools.allows("get_secret"));
    match &server.transport {
        McpTransportConfig::Stdio {
            command,
            args,
            env,
            cwd,
            ..
        } => {
            assert_eq!(command, "uvx");
            assert_eq!(args, &["mcp-server-time"]);
            assert_eq!(env["TZ"], "UTC");
            assert_eq!(cwd.as_deref(), Some(std::path::Path::new("/tmp")));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn config_check_accepts_the_example() {
    let example = quiver_tests::workspace_root()
        .join("examples")
        .join("quiver.yaml");
    let output = quiver_tests::quiver(&["config", "check", quiver_tests::arg(&example)]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
