//! On `notifications/tools/list_changed` the server's tools are listed
//! again: the next assembly and search see the new tool, the removed one is
//! gone, and no other server's part of the catalog changes.

use quiver_tests::mcp;

use std::sync::Arc;

use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn list_changed_refreshes_only_that_server() {
    let (registry, host) = mcp::start(vec![
        mcp::test_server("changing", &[]),
        mcp::test_server("steady", &[]),
    ]);
    mcp::ready(&host, "changing").await;
    mcp::ready(&host, "steady").await;
    let before = registry.snapshot();
    let steady_before: Vec<_> = before
        .groups()
        .iter()
        .filter(|g| g.source().group() == Some("steady"))
        .flat_map(|g| g.tools().iter().cloned())
        .collect();
    assert!(!steady_before.is_empty());

    let arguments = json!({"name": "fresh_widget"})
        .as_object()
        .cloned()
        .unwrap();
    let output = host
        .call("changing", "add_tool", arguments.clone())
        .await
        .unwrap();
    assert_eq!(output.text(), "added fresh_widget");
    mcp::eventually("the new tool is in the registry", || {
        registry
            .snapshot()
            .get("mcp_changing_fresh_widget")
            .is_some()
    })
    .await;

    let assembly = mcp::assemble(&registry);
    assert!(
        mcp::deferred_names(&assembly, "changing")
            .contains(&"mcp_changing_fresh_widget".to_owned())
    );
    let hits = assembly.search("fresh widget", None);
    assert_eq!(hits[0].tool.name(), "mcp_changing_fresh_widget");

    // The other server's tools are the very same objects: untouched.
    let after = registry.snapshot();
    let steady_after: Vec<_> = after
        .groups()
        .iter()
        .filter(|g| g.source().group() == Some("steady"))
        .flat_map(|g| g.tools().iter().cloned())
        .collect();
    assert_eq!(steady_before.len(), steady_after.len());
    for (a, b) in steady_before.iter().zip(&steady_after) {
        assert!(Arc::ptr_eq(a, b), "{} was rebuilt", a.name());
    }

    host.call("changing", "remove_tool", arguments)
        .await
        .unwrap();
    mcp::eventually("the removed tool left the registry", || {
        registry
            .snapshot()
            .get("mcp_changing_fresh_widget")
            .is_none()
    })
    .await;
    assert!(
        mcp::assemble(&registry)
            .search("fresh widget", None)
            .iter()
            .all(|h| h.tool.name() != "mcp_changing_fresh_widget")
    );
    host.shutdown().await;
}
