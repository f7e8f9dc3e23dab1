//! A tool whose input schema has no `type` is given an object schema; a
//! tool whose schema is not an object schema is skipped (with a warning
//! naming server and tool); the other tools are unaffected.

use quiver_tests::mcp;

#[tokio::test(flavor = "multi_thread")]
async fn schemas_are_normalised_or_skipped() {
    let (registry, host) = mcp::start(vec![mcp::test_server("tester", &["--bad-schemas"])]);
    mcp::ready(&host, "tester").await;
    let snapshot = registry.snapshot();
    let untyped = snapshot
        .get("mcp_tester_untyped_schema")
        .expect("normalised tool is kept");
    assert_eq!(untyped.input_schema().value()["type"], "object");
    assert_eq!(untyped.required_parameters().collect::<Vec<_>>(), ["q"]);
    assert!(
        snapshot.get("mcp_tester_string_schema").is_none(),
        "non-object schema is skipped"
    );
    assert!(snapshot.get("mcp_tester_echo").is_some());
    host.shutdown().await;
}
