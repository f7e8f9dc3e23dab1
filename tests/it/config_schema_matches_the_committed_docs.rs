//! Checks that `quiver config schema` prints a JSON Schema (draft 2020-12)
//! of quiver.yaml, and that it and `--markdown` match the committed
//! `docs/quiver.schema.json` and the README's table of keys.

use quiver_tests::{quiver, workspace_root};

fn stdout(args: &[&str]) -> String {
    let output = quiver(args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_schema_describes_every_section() {
    let schema: serde_json::Value = serde_json::from_str(&stdout(&["config", "schema"])).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let approval = &schema["properties"]["approval"]["properties"]["timeout_s"];
    assert_eq!(
        (approval["minimum"].as_i64(), approval["maximum"].as_i64()),
        (Some(1), Some(86_400))
    );
    assert_eq!(approval["default"], 300);
    let url = &schema["properties"]["mcp_servers"]["additionalProperties"]["properties"]["url"];
    assert_eq!(url["type"], "string");
    let committed =
        std::fs::read_to_string(workspace_root().join("docs/quiver.schema.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&committed).unwrap(),
        schema,
        "docs/quiver.schema.json drifted: run `cargo run -p quiver -- config schema --write .`"
    );
}

#[test]
fn the_markdown_table_is_the_readme_table() {
    let table = stdout(&["config", "schema", "--markdown"]);
    assert!(
        table.starts_with("| key | values | default | meaning |\n"),
        "{table}"
    );
    assert!(
        table.contains("| `approval.timeout_s` | integer 1..86400 | `300` |"),
        "{table}"
    );
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    assert!(
        readme.contains(&format!(
            "<!-- settings:start -->\n{table}<!-- settings:end -->"
        )),
        "the README's table drifted: run `cargo run -p quiver -- config schema --write .`"
    );
}
