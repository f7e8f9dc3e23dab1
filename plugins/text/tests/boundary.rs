//! The built `text` plugin, loaded through the host's checks by
//! `quiver_plugin_api::testing` and called across the real boundary.

use quiver_plugin_api::testing::TestPlugin;
use serde_json::json;

fn plugin() -> TestPlugin {
    TestPlugin::built(env!("CARGO_PKG_NAME")).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn find_and_replace() {
    let text = plugin();
    let found = text
        .call(
            "regex_find",
            json!({"text": "a1 b22", "pattern": "(?P<d>\\d+)"}),
        )
        .unwrap();
    assert_eq!(found["count"], 2);
    assert_eq!(found["matches"][1]["text"], "22");
    assert_eq!(found["matches"][1]["groups"][0]["name"], "d");
    let replaced = text
        .call(
            "regex_replace",
            json!({"text": "a1 b22", "pattern": "\\d+", "replacement": "#"}),
        )
        .unwrap();
    assert_eq!(replaced["text"], "a# b#");
    let error = text
        .call("regex_find", json!({"text": "", "pattern": "("}))
        .unwrap_err();
    assert_eq!(error.code(), "invalid_argument");
    assert_eq!(error.data().unwrap()["field"], "pattern");
}

#[test]
fn hashes_base64_and_counts() {
    let text = plugin();
    let h = text.call("hash", json!({"text": "abc"})).unwrap();
    assert_eq!(
        h["hex"],
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(h["algorithm"], "sha256");
    let e = text.call("base64_encode", json!({"text": "hi?>"})).unwrap();
    assert_eq!(e["data"], "aGk/Pg==");
    let d = text
        .call("base64_decode", json!({"data": "aGk_Pg"}))
        .unwrap();
    assert_eq!(d["text"], "hi?>");
    let w = text
        .call("word_count", json!({"text": "one two\nthree"}))
        .unwrap();
    assert_eq!(
        (w["words"].as_u64(), w["lines"].as_u64()),
        (Some(3), Some(2))
    );
}

#[test]
fn arguments_outside_the_schema_are_refused() {
    let text = plugin();
    let extra = text
        .call("word_count", json!({"text": "x", "txet": "typo"}))
        .unwrap_err();
    assert_eq!(extra.code(), "invalid_arguments");
    let bad_enum = text
        .call("hash", json!({"text": "x", "algorithm": "md5"}))
        .unwrap_err();
    assert_eq!(bad_enum.code(), "invalid_arguments");
    // Past the schema check, the plugin itself names the field.
    let missing = text.call_unchecked("word_count", "{}").unwrap_err();
    assert_eq!(missing.code(), "invalid_argument");
    assert_eq!(missing.data().unwrap()["field"], "text");
}

#[test]
fn every_tool_declares_hints_and_an_output_schema() {
    let text = plugin();
    assert_eq!(text.manifest().tools.len(), 6);
    for tool in &text.manifest().tools {
        assert_eq!(tool.hints.read_only, Some(true), "{}", tool.name);
        assert_eq!(tool.input_schema["additionalProperties"], false);
        let output = tool.output_schema.as_ref().unwrap();
        assert_eq!(output["type"], "object", "{}", tool.name);
    }
}
