//! The shipped plugins, rewritten with `#[tool]`, derive input schemas that
//! equal the hand-written ones they replaced (kept in
//! tests/fixtures/plugins/hand_written_schemas.json), up to the documented
//! differences (docs/PLUGINS.md, "Derived schemas"):
//!
//! - the root has `additionalProperties: false`;
//! - an optional argument with a default says it (`"default"`), and an
//!   optional argument without one accepts `null` (`"type": [T, "null"]`);
//! - integers carry schemars' `format` (`uint32`, `uint64`);
//! - an array of any JSON value has `"items": true` (was `{}`);
//! - arguments that had no description now have one.
//!
//! Tool descriptions are unchanged, and every tool now has hints and an
//! output schema.

use quiver_tests::{plugin_so, quiver_json_lines, workspace_root};
use serde_json::{Value, json};

fn normalise(derived: &Value, old: &Value) -> Value {
    let mut schema = derived.clone();
    let map = schema.as_object_mut().unwrap();
    assert_eq!(map.remove("additionalProperties"), Some(json!(false)));
    let old_properties = old["properties"].as_object().unwrap();
    for (name, property) in map["properties"].as_object_mut().unwrap() {
        let property = property.as_object_mut().unwrap();
        property.remove("default");
        property.remove("format");
        if let Some(Value::Array(types)) = property.get("type").cloned() {
            assert_eq!(types.len(), 2, "{name}: {types:?}");
            assert_eq!(types[1], "null", "{name}");
            property.insert("type".into(), types[0].clone());
        }
        if property.get("items") == Some(&json!(true)) {
            property.insert("items".into(), json!({}));
        }
        if old_properties[name].get("description").is_none() {
            property.remove("description");
        }
    }
    schema
}

#[test]
fn derived_schemas_equal_the_hand_written_ones_up_to_documented_differences() {
    let old = quiver_tests::read_json(
        &workspace_root().join("tests/fixtures/plugins/hand_written_schemas.json"),
    );
    for plugin in ["text", "time", "sqlite"] {
        let checked = quiver_json_lines(&[
            "plugin",
            "check",
            "--dev",
            "--json",
            plugin_so(plugin).to_str().unwrap(),
        ]);
        let tools = checked[0]["tools"].as_array().unwrap();
        let old_tools = old[plugin].as_object().unwrap();
        assert_eq!(tools.len(), old_tools.len(), "{plugin}");
        for tool in tools {
            let name = tool["name"].as_str().unwrap();
            let before = &old_tools[name];
            assert_eq!(tool["description"], before["description"], "{name}");
            assert_eq!(
                normalise(&tool["input_schema"], &before["input_schema"]),
                before["input_schema"],
                "{name}"
            );
            assert_eq!(tool["annotations"]["readOnlyHint"], true, "{name}");
            assert_eq!(tool["output_schema"]["type"], "object", "{name}");
        }
    }
}
