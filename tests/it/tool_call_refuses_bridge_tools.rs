//! Checks that `tool_call` refuses to call a bridge tool (`tool_search`,
//! `tool_describe`, `tool_call`) and says to call it directly.

use quiver_catalog::assembly::Assembler;
use quiver_catalog::bridge::{self, BridgeError};
use quiver_catalog::settings::ToolSearchConfig;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::json;

#[test]
fn bridge_tools_cannot_be_called_through_tool_call() {
    let registry = ToolRegistry::new();
    registry.set_source_tools(
        ToolSource::Mcp("github".into()),
        vec![ToolSpec::new(
            "create_issue",
            "Open an issue",
            json!({"type": "object"}),
        )],
    );
    let assembly = Assembler::new(ToolSearchConfig::default()).assemble(
        &registry.snapshot(),
        &Scope::all(),
        200_000,
    );
    assert!(assembly.has_bridge());

    for name in ["tool_search", "tool_describe", "tool_call"] {
        for arguments in [
            json!({"query": "issue"}),
            json!({"name": "mcp_github_create_issue"}),
            json!(null),
        ] {
            let request = json!({"name": name, "arguments": arguments});
            let error = bridge::call(&assembly, &request).unwrap_err();
            assert!(
                matches!(&error, BridgeError::BridgeToolNamed { name: n } if n == name),
                "{request}: {error:?}"
            );
            let message = error.to_string();
            assert!(message.contains("bridge tool"), "{message}");
            assert!(message.contains("call it directly"), "{message}");
            assert_eq!(error.to_json()["error"], "bridge_tool_named");
        }
    }

    // Only the exact names are reserved.
    let error = bridge::call(&assembly, &json!({"name": "Tool_Search"})).unwrap_err();
    assert!(
        matches!(error, BridgeError::UnknownTool { .. }),
        "{error:?}"
    );
}

/// The same refusal reaches the model through the dispatcher, and nothing
/// runs.
#[tokio::test]
async fn the_dispatcher_refuses_them_before_anything_runs() {
    use std::sync::atomic::Ordering;
    let fixture = quiver_tests::dispatch::fixture(
        quiver_dispatch::Guardrails::default(),
        quiver_dispatch::ApprovalPolicy::default(),
        std::sync::Arc::new(quiver_dispatch::approval::DenyAll),
    );
    let session = fixture.session("s", &["*"]);
    for name in ["tool_search", "tool_describe", "tool_call"] {
        let request = json!({"name": name, "arguments": {"query": "issue"}});
        let error = fixture
            .call(&session, "tool_call", request)
            .await
            .unwrap_err()
            .to_json();
        assert_eq!(error["error"], "bridge_tool_named", "{error}");
    }
    assert_eq!(fixture.invoked.load(Ordering::SeqCst), 0);
}
