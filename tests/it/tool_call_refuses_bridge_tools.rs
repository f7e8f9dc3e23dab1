//! Checks that `tool_call` refuses to call a bridge tool (`tool_search`,
//! `tool_describe`, `tool_call`) and says to call it directly.

use quiver_catalog::assembly::Assembler;
use quiver_catalog::bridge::{self, BridgeError, TOOL_CALL};
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
            match bridge::handle(&assembly, TOOL_CALL, &request) {
                Some(Err(BridgeError::BridgeToolNamed { .. })) => {}
                other => panic!("{request}: expected a refusal, got {other:?}"),
            }
        }
    }

    // Only the exact names are reserved.
    let error = bridge::call(&assembly, &json!({"name": "Tool_Search"})).unwrap_err();
    assert!(
        matches!(error, BridgeError::UnknownTool { .. }),
        "{error:?}"
    );
}
