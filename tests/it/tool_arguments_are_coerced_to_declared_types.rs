//! Before validation, on every path (a direct call, `tool_call`, and so
//! the gateway), arguments are coerced where the schema makes the reading
//! unambiguous: `"42"` for an integer, `"true"` for a boolean, JSON text
//! for an object or array; `null` is accepted where the schema says
//! `nullable: true` or `type: [T, "null"]`. The result and the feed say
//! what was coerced; `with_coercion(false)` (`guardrails.coerce_arguments:
//! false`) is strict, and validation still lists every problem.

use std::sync::atomic::Ordering;

use quiver_tests::dispatch::{Fixture, drain, fixture_with_shop};
use quiver_tool::tool::ToolSpec;
use serde_json::json;

fn shop() -> Fixture {
    fixture_with_shop(vec![ToolSpec::new(
        "order",
        "Order items",
        json!({"type": "object", "properties": {
            "count": {"type": "integer"},
            "price": {"type": "number"},
            "gift": {"type": "boolean"},
            "address": {"type": "object", "properties": {"zip": {"type": "integer"}}},
            "items": {"type": "array", "items": {"type": "string"}},
            "note": {"type": "string", "nullable": true},
            "coupon": {"type": ["string", "null"]},
            "code": {"type": "string"}
        }, "required": ["count"]}),
    )])
}

const SENT: &str = r#"{"count": "42", "price": "9.5", "gift": "true", "address": "{\"zip\": \"12345\"}", "items": "[\"a\", \"b\"]", "note": null, "coupon": null, "code": "007"}"#;

fn expected() -> serde_json::Value {
    json!({"count": 42, "price": 9.5, "gift": true, "address": {"zip": 12345}, "items": ["a", "b"], "note": null, "coupon": null, "code": "007"})
}

#[tokio::test]
async fn direct_and_bridge_calls_are_coerced_and_say_so() {
    let fixture = shop();
    let session = fixture.session("s", &["*"]);
    let mut feed = fixture.feed.subscribe_all();
    let sent: serde_json::Value = serde_json::from_str(SENT).unwrap();
    let direct = fixture
        .call(&session, "mcp_shop_order", sent.clone())
        .await
        .unwrap();
    assert_eq!(direct["arguments"], expected());
    let note = direct["quiver_note"].as_str().unwrap();
    for part in [
        "/count \"42\" read as integer",
        "/gift \"true\" read as boolean",
        "/address read as object",
        "/address/zip \"12345\" read as integer",
        "/items",
    ] {
        let part = part.replace(
            "/address read",
            "/address \"{\\\"zip\\\": \\\"12345\\\"}\" read",
        );
        assert!(note.contains(&part), "{part} not in {note}");
    }
    assert!(!note.contains("/code"), "{note}");
    let via_bridge = fixture
        .call(
            &session,
            "tool_call",
            json!({"name": "mcp_shop_order", "arguments": SENT}),
        )
        .await
        .unwrap();
    assert_eq!(via_bridge, direct);
    let events = drain(&mut feed);
    let details: Vec<&str> = events
        .iter()
        .filter(|e| e.tool == "mcp_shop_order")
        .filter_map(|e| e.detail.as_deref())
        .collect();
    assert_eq!(details.len(), 2, "{events:?}");
    assert!(
        details.iter().all(|d| d.contains("arguments coerced")),
        "{details:?}"
    );
    assert_eq!(
        events.last().unwrap().arguments["count"],
        42,
        "the feed records the arguments the tool got"
    );
}

#[tokio::test]
async fn ambiguous_values_are_not_coerced_and_every_problem_is_listed() {
    let fixture = shop();
    let session = fixture.session("s", &["*"]);
    let error = fixture
        .call(
            &session,
            "mcp_shop_order",
            json!({"count": "4.5", "gift": "yes", "address": "[1]", "code": null}),
        )
        .await
        .unwrap_err()
        .to_json();
    assert_eq!(error["error"], "invalid_arguments", "{error}");
    let problems = error["problems"].to_string();
    for pointer in ["/count", "/gift", "/address", "/code"] {
        assert!(problems.contains(pointer), "{pointer}: {problems}");
    }
    assert!(error["input_schema"]["properties"]["count"].is_object());
    assert_eq!(fixture.invoked.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn coercion_off_is_strict() {
    let mut fixture = shop();
    fixture.dispatcher = fixture.dispatcher.clone().with_coercion(false);
    let session = fixture.session("s", &["*"]);
    let error = fixture
        .call(
            &session,
            "mcp_shop_order",
            json!({"count": "42", "gift": "true"}),
        )
        .await
        .unwrap_err()
        .to_json();
    assert_eq!(error["error"], "invalid_arguments", "{error}");
    let problems = error["problems"].to_string();
    assert!(
        problems.contains("/count") && problems.contains("/gift"),
        "{problems}"
    );
    // A declared nullable still takes null: that is the schema, not coercion.
    let out = fixture
        .call(
            &session,
            "mcp_shop_order",
            json!({"count": 1, "note": null}),
        )
        .await
        .unwrap();
    assert!(out.get("quiver_note").is_none(), "{out}");
}
