//! Checks that `tool_describe` of an eager tool (already in the model's tool
//! list) returns its description and schema with a note saying so, and that
//! a deferred tool's description carries no such note.

use quiver_catalog::assembly::{Assembler, Assembly};
use quiver_catalog::bridge;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_daemon::config::parse;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::{Value, json};

fn schema(parameter: &str) -> Value {
    json!({
        "type": "object",
        "properties": {parameter: {"type": "string"}},
        "required": [parameter]
    })
}

fn assembly(config: ToolSearchConfig) -> Assembly {
    let registry = ToolRegistry::new();
    registry.set_source_tools(
        ToolSource::Core,
        vec![ToolSpec::new(
            "read_file",
            "Read a file.\nReturns its text.",
            schema("path"),
        )],
    );
    registry.set_source_tools(
        ToolSource::Mcp("github".into()),
        vec![
            ToolSpec::new("get_me", "Who am I", schema("fields")),
            ToolSpec::new("create_issue", "Open an issue", schema("title")),
        ],
    );
    Assembler::new(config).assemble(&registry.snapshot(), &Scope::all(), 200_000)
}

fn function_names(assembly: &Assembly) -> Vec<&str> {
    assembly
        .tools()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect()
}

#[test]
fn core_tool_is_described_with_a_note() {
    let assembly = assembly(ToolSearchConfig::default());
    assert!(function_names(&assembly).contains(&"read_file"));
    let described = bridge::describe(&assembly, &json!({"name": "read_file"})).unwrap();
    assert_eq!(described["name"], "read_file");
    assert_eq!(described["source"], "core");
    assert_eq!(described["description"], "Read a file.\nReturns its text.");
    assert_eq!(described["input_schema"], schema("path"));
    let note = described["note"]
        .as_str()
        .expect("a note for an eager tool");
    assert!(note.contains("already in your tool list"), "{note}");
}

#[test]
fn eager_glob_tool_is_described_with_a_note_and_deferred_one_without() {
    let config = parse(
        "tools:\n  tool_search:\n    eager: [\"mcp_github_get_*\"]\n",
        "test.yaml",
    )
    .unwrap()
    .config
    .tool_search;
    let assembly = assembly(config);
    let names = function_names(&assembly);
    assert!(names.contains(&"mcp_github_get_me"), "{names:?}");
    assert!(!names.contains(&"mcp_github_create_issue"), "{names:?}");

    let eager = bridge::describe(&assembly, &json!({"name": "mcp_github_get_me"})).unwrap();
    assert_eq!(eager["input_schema"], schema("fields"));
    assert_eq!(eager["server"], "github");
    assert_eq!(eager["tool"], "get_me");
    assert!(
        eager["note"]
            .as_str()
            .is_some_and(|n| n.contains("already in your tool list")),
        "{eager}"
    );

    let deferred =
        bridge::describe(&assembly, &json!({"name": "mcp_github_create_issue"})).unwrap();
    assert_eq!(deferred["input_schema"], schema("title"));
    assert_eq!(deferred["description"], "Open an issue");
    assert!(deferred.get("note").is_none(), "{deferred}");
}

#[test]
fn bridge_tool_is_described_with_a_note() {
    let assembly = assembly(ToolSearchConfig::default());
    let described = bridge::describe(&assembly, &json!({"name": "tool_search"})).unwrap();
    assert_eq!(described["source"], "bridge");
    assert_eq!(
        described["input_schema"]["properties"]["query"]["type"],
        "string"
    );
    assert_eq!(
        described["input_schema"]["properties"]["queries"]["type"],
        "array"
    );
    assert!(
        described["note"]
            .as_str()
            .is_some_and(|n| n.contains("call it directly"))
    );
}
