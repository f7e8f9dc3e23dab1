//! Checks how `tool_call` takes the real tool's arguments: an object or a
//! JSON-encoded object string works; a string that is not JSON gives the
//! parser's error; anything that is not an object is refused; and missing
//! required arguments are refused with the tool's schema attached.

use quiver_catalog::assembly::{Assembler, Assembly};
use quiver_catalog::bridge::{self, BridgeError, BridgeOutcome, TOOL_CALL};
use quiver_catalog::settings::ToolSearchConfig;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::{Value, json};

const TOOL: &str = "mcp_github_create_issue";

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "owner": {"type": "string"},
            "repo": {"type": "string"},
            "title": {"type": "string"},
            "body": {"type": "string"}
        },
        "required": ["owner", "repo", "title"]
    })
}

fn assembly() -> Assembly {
    let registry = ToolRegistry::new();
    registry.set_source_tools(
        ToolSource::Mcp("github".into()),
        vec![
            ToolSpec::new("create_issue", "Open a new issue", schema()),
            ToolSpec::new("get_me", "Who am I", json!({"type": "object"})),
        ],
    );
    Assembler::new(ToolSearchConfig::default()).assemble(
        &registry.snapshot(),
        &Scope::all(),
        200_000,
    )
}

fn call(assembly: &Assembly, arguments: Value) -> Result<bridge::ResolvedCall, BridgeError> {
    bridge::call(assembly, &json!({"name": TOOL, "arguments": arguments}))
}

#[test]
fn object_and_json_string_arguments_resolve_the_same() {
    let assembly = assembly();
    let arguments = json!({"owner": "o", "repo": "r", "title": "t", "body": "b"});
    let from_object = call(&assembly, arguments.clone()).unwrap();
    assert_eq!(from_object.tool.name(), TOOL);
    assert!(from_object.via_bridge);
    assert_eq!(Value::Object(from_object.arguments.clone()), arguments);

    let from_string = call(&assembly, Value::String(arguments.to_string())).unwrap();
    assert_eq!(from_string.tool.name(), TOOL);
    assert_eq!(from_string.arguments, from_object.arguments);

    // Through the dispatcher entry point as well.
    match bridge::handle(
        &assembly,
        TOOL_CALL,
        &json!({"name": TOOL, "arguments": arguments.to_string()}),
    ) {
        Some(Ok(BridgeOutcome::Dispatch(resolved))) => {
            assert_eq!(resolved.arguments, from_object.arguments);
        }
        other => panic!("expected a dispatch, got {other:?}"),
    }

    // No arguments at all are fine for a tool that requires none.
    let none = bridge::call(&assembly, &json!({"name": "mcp_github_get_me"})).unwrap();
    assert!(none.arguments.is_empty());
}

#[test]
fn invalid_json_string_gives_the_parse_error() {
    let assembly = assembly();
    for text in ["{\"owner\": ", "{owner: 1}", "", "{\"owner\": \"o\",}"] {
        let expected = serde_json::from_str::<Value>(text).unwrap_err().to_string();
        let error = call(&assembly, Value::String(text.into())).unwrap_err();
        match &error {
            BridgeError::InvalidArgumentsJson { tool, error } => {
                assert_eq!(tool, TOOL);
                assert_eq!(error, &expected, "{text:?}");
            }
            other => panic!("{text:?}: expected invalid JSON, got {other:?}"),
        }
        let message = error.to_string();
        assert!(message.contains(&expected), "{message}");
        assert!(message.contains("line 1 column"), "{message}");
        assert_eq!(error.to_json()["error"], "invalid_arguments_json");
    }
}

#[test]
fn non_object_arguments_are_refused() {
    let assembly = assembly();
    for arguments in [
        json!([1, 2]),
        json!(5),
        json!(true),
        json!("[1, 2]"),
        json!("\"a string\""),
        json!("7"),
        json!("null"),
    ] {
        let error = call(&assembly, arguments.clone()).unwrap_err();
        assert!(
            matches!(&error, BridgeError::ArgumentsNotObject { tool, .. } if tool == TOOL),
            "{arguments}: {error:?}"
        );
        assert!(
            error.to_string().contains("must be a JSON object"),
            "{error}"
        );
    }
    // The bridge tool's own arguments must be an object too.
    let error = bridge::call(&assembly, &json!([TOOL])).unwrap_err();
    assert!(
        matches!(error, BridgeError::NotAnObject { .. }),
        "{error:?}"
    );
    let error = bridge::call(&assembly, &json!({"arguments": {}})).unwrap_err();
    assert!(
        matches!(error, BridgeError::MissingName { .. }),
        "{error:?}"
    );
}

#[test]
fn missing_required_arguments_are_refused_with_the_schema() {
    let assembly = assembly();
    for (arguments, missing) in [
        (json!({"owner": "o", "body": "b"}), vec!["repo", "title"]),
        (json!({}), vec!["owner", "repo", "title"]),
        (Value::Null, vec!["owner", "repo", "title"]),
        (json!("{\"owner\": \"o\", \"repo\": \"r\"}"), vec!["title"]),
    ] {
        let error = call(&assembly, arguments.clone()).unwrap_err();
        let as_json = error.to_json();
        let message = error.to_string();
        match error {
            BridgeError::MissingRequired {
                tool,
                missing: got,
                schema: attached,
            } => {
                assert_eq!(tool, TOOL);
                assert_eq!(got, missing, "{arguments}");
                assert_eq!(attached, schema());
            }
            other => panic!("{arguments}: expected missing arguments, got {other:?}"),
        }
        assert!(message.contains("was not called"), "{message}");
        for name in &missing {
            assert!(message.contains(&format!("`{name}`")), "{message}");
        }
        assert_eq!(as_json["error"], "missing_required_arguments");
        assert_eq!(as_json["missing"], json!(missing));
        assert_eq!(as_json["input_schema"], schema());
    }
}
