//! The generated docs (the README's table of keys and
//! `docs/quiver.schema.json`) match the settings the code describes.

use std::path::Path;

use crate::config::{REFRESH_COMMAND, generated_docs, write_docs};

#[test]
fn committed_readme_table_and_schema_have_not_drifted() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if std::env::var_os("QUIVER_BLESS").is_some() {
        write_docs(&root).unwrap();
    }
    for (path, expected) in generated_docs(&root).unwrap() {
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == expected,
            "{} is not what the settings generate; refresh it with `{REFRESH_COMMAND}` \
             (or QUIVER_BLESS=1 cargo test -p quiver-daemon drift) and commit the result",
            path.display()
        );
    }
}

#[test]
fn every_key_is_in_the_schema() {
    let schema = crate::config::json_schema();
    let tools = &schema["properties"]["tools"]["properties"]["tool_search"]["anyOf"][1];
    assert_eq!(tools["properties"]["threshold_pct"]["maximum"], 100);
    let server = &schema["properties"]["mcp_servers"]["additionalProperties"];
    assert_eq!(server["properties"]["call_timeout_s"]["minimum"], 1);
    let rule = &schema["properties"]["guardrails"]["properties"]["rules"]["items"];
    assert_eq!(rule["required"], serde_json::json!(["tool", "action"]));
    let model = &schema["properties"]["models"]["additionalProperties"];
    assert_eq!(model["properties"]["provider"]["enum"][1], "anthropic");
}
