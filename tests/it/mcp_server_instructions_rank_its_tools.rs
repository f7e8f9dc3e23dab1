//! What a live MCP server says it is for (its initialize result's title,
//! description and `instructions`) is server context for tool search: of
//! two servers with the same tools, the one whose instructions match the
//! request ranks first. It is searched, never sent to the model, and goes
//! with the server.

use quiver_tests::mcp;

use quiver_catalog::bridge;
use quiver_tool::tool::ToolSource;
use serde_json::json;

const INSTRUCTIONS: &str = "Relays messages for a ship's radio operator to the harbour master.";

#[tokio::test(flavor = "multi_thread")]
async fn instructions_rank_the_servers_tools_and_leave_with_it() {
    // The same tools twice; only `beta` says what it is for. By name alone
    // `alpha` would come first.
    let (registry, host) = mcp::start(vec![
        mcp::test_server("alpha", &[]),
        mcp::test_server("beta", &["--instructions", INSTRUCTIONS]),
    ]);
    mcp::ready(&host, "alpha").await;
    mcp::ready(&host, "beta").await;

    let snapshot = registry.snapshot();
    let description = |server: &str| {
        snapshot
            .groups()
            .iter()
            .find(|g| g.source() == &ToolSource::Mcp(server.into()))
            .and_then(|g| g.description().map(|d| d.to_string()))
    };
    assert_eq!(description("beta").as_deref(), Some(INSTRUCTIONS));
    assert_eq!(description("alpha"), None);

    let assembly = mcp::assemble(&registry);
    let found = bridge::search(
        &assembly,
        &json!({"query": "send the given text back to the radio operator"}),
    )
    .unwrap();
    let names: Vec<&str> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[..2], ["mcp_beta_echo", "mcp_alpha_echo"], "{found}");
    // Without words of the instructions, the tie stays a tie, which the
    // names break. (No query here holds the exact name `echo`: that would
    // rank both first, by name, whatever the context.)
    let plain = bridge::search(&assembly, &json!({"query": "send the given text back"})).unwrap();
    assert_eq!(plain["matches"][0]["name"], "mcp_alpha_echo", "{plain}");

    // Never sent: not in the tools array nor the listing.
    let sent = serde_json::to_string(assembly.tools()).unwrap();
    assert!(!sent.contains("harbour"), "{sent}");

    host.shutdown().await;
    assert!(registry.snapshot().groups().is_empty());
}
