//! Bridge answers obey the result cap (`guardrails.max_result_chars`): a
//! `tool_describe` batch too large returns the tools that fit, whole,
//! and names the ones left out with how to ask for them one at a time;
//! one large tool alone gets its description shortened, its schema
//! whole; `tool_search` drops whole lower-ranked matches.

use quiver_tests::dispatch::fixture_with_shop;
use quiver_tool::tokens::json_chars;
use quiver_tool::tool::ToolSpec;
use serde_json::json;

const CAP: usize = 100_000;

fn big(name: &str) -> ToolSpec {
    ToolSpec::new(
        name,
        format!(
            "{name} does things. {}",
            "Lots of detail here. ".repeat(2150)
        ),
        json!({"type": "object", "properties": {"id": {"type": "string", "description": "x".repeat(500)}}, "required": ["id"]}),
    )
}

#[tokio::test]
async fn a_describe_batch_keeps_whole_tools_and_names_the_rest() {
    let fixture = fixture_with_shop(vec![big("alpha"), big("beta"), big("gamma")]);
    let session = fixture.session("s", &["*"]);
    let names = [
        "mcp_shop_alpha",
        "mcp_shop_beta",
        "mcp_shop_gamma",
        "mcp_github_list_issues",
    ];
    let out = fixture
        .call(&session, "tool_describe", json!({"names": names}))
        .await
        .unwrap();
    assert!(json_chars(&out) <= CAP, "{} characters", json_chars(&out));
    let kept: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let omitted: Vec<&str> = out["omitted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(kept.len() + omitted.len(), 4, "{kept:?} {omitted:?}");
    assert!(
        kept.contains(&"mcp_github_list_issues") && kept.len() >= 2,
        "{kept:?}"
    );
    for tool in out["tools"].as_array().unwrap() {
        assert!(tool["input_schema"].is_object() && tool.get("description_cut").is_none());
    }
    let note = out["note"].as_str().unwrap();
    assert!(
        note.contains(omitted[0]) && note.contains("one at a time"),
        "{note}"
    );
    // Asked one at a time, a left-out tool comes with its schema whole.
    let one = fixture
        .call(&session, "tool_describe", json!({"name": omitted[0]}))
        .await
        .unwrap();
    assert_eq!(one["input_schema"]["required"], json!(["id"]));
    assert!(json_chars(&one) <= CAP);
}

#[tokio::test]
async fn one_oversized_tool_keeps_its_schema_and_loses_description() {
    let mut huge = big("huge");
    huge.description = "word ".repeat(30_000);
    let fixture = fixture_with_shop(vec![huge.clone()]);
    let session = fixture.session("s", &["*"]);
    let out = fixture
        .call(&session, "tool_describe", json!({"name": "mcp_shop_huge"}))
        .await
        .unwrap();
    assert!(json_chars(&out) <= CAP, "{}", json_chars(&out));
    assert_eq!(&out["input_schema"], huge.input_schema.value());
    assert!(out["description"].as_str().unwrap().ends_with('…'));
    assert!(out["description_cut"].is_string());
}

#[tokio::test]
async fn a_search_batch_drops_whole_matches_to_fit() {
    let tools: Vec<ToolSpec> = (0..40)
        .map(|i| {
            ToolSpec::new(
                format!("widget_{i}"),
                format!("widget tool {i}. {}", "x".repeat(390)),
                json!({"type": "object"}),
            )
        })
        .collect();
    let mut fixture = fixture_with_shop(tools);
    fixture.dispatcher = fixture
        .dispatcher
        .clone()
        .with_max_bridge_result_chars(5_000);
    let session = fixture.session("s", &["*"]);
    let out = fixture
        .call(
            &session,
            "tool_search",
            json!({"queries": ["widget", "widget tool"], "limit": 20}),
        )
        .await
        .unwrap();
    assert!(json_chars(&out) <= 5_000, "{}", json_chars(&out));
    let matches: usize = out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["matches"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(matches >= 4, "{out}");
    assert!(out["note"].as_str().unwrap().contains("left out"), "{out}");
}
