//! `quiver serve --stdio` is an MCP server on stdin/stdout (as `claude mcp
//! add` runs it), driven here by an rmcp client over a child process: the
//! client sees the assembled view of its `--grant` and its calls run
//! through the chain.

use quiver_tests::daemon;

use daemon::Fixture;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn the_stdio_gateway_serves_the_granted_view() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let mut command = tokio::process::Command::from(quiver_tests::quiver_command());
    command
        .args([
            "serve",
            "--stdio",
            "--grant",
            "plugin-text",
            "--grant",
            "core",
            "--config",
        ])
        .arg(&config)
        .arg("--state-dir")
        .arg(fixture.state());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();

    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "list_dir",
            "read_file",
            "run_command",
            "search_files",
            "tool_call",
            "tool_describe",
            "tool_search",
            "write_file"
        ]
    );
    let search = tools.iter().find(|t| t.name == "tool_search").unwrap();
    let listing = search.description.as_deref().unwrap_or_default();
    assert!(
        listing.contains("word_count") && !listing.contains("mcp_test"),
        "{listing}"
    );

    let mut found = CallToolRequestParams::new("tool_search");
    found.arguments = json!({"query": "count words"}).as_object().cloned();
    let found = client.call_tool(found).await.unwrap();
    assert!(format!("{:?}", found.content).contains("word_count"));

    let mut call = CallToolRequestParams::new("tool_call");
    call.arguments = json!({"name": "word_count", "arguments": {"text": "over stdio it works"}})
        .as_object()
        .cloned();
    let counted = client.call_tool(call).await.unwrap();
    assert_eq!(counted.structured_content.unwrap()["words"], 4);

    // Nothing outside the grant, and no one to approve on stdio. The MCP
    // server connects in the background: until its tools are registered
    // the name is unknown rather than out of the grant.
    let mut refused = None;
    for _ in 0..600 {
        let mut call = CallToolRequestParams::new("tool_call");
        call.arguments = json!({"name": "mcp_test_echo", "arguments": {"text": "x"}})
            .as_object()
            .cloned();
        let answer = client.call_tool(call).await.unwrap();
        if !format!("{:?}", answer.content).contains("unknown_tool") {
            refused = Some(answer);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let refused = refused.expect("the MCP server's tools registered within 30 s");
    assert_eq!(refused.is_error, Some(true));
    assert!(
        format!("{:?}", refused.content).contains("not_available"),
        "{refused:?}"
    );
    let mut call = CallToolRequestParams::new("run_command");
    call.arguments = json!({"command": "touch ran"}).as_object().cloned();
    let refused = client.call_tool(call).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(
        format!("{:?}", refused.content).contains("approval_denied"),
        "{refused:?}"
    );
    assert!(!fixture.work().join("ran").exists());

    client.cancel().await.unwrap();
}
