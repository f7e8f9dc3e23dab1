//! `tool_search` `queries` and `tool_describe` `names` take a list, one
//! bare string, or a JSON-encoded list string, the same way (as
//! `tool_call` takes a JSON-encoded `arguments` string); `query` or `name`
//! given a list is read as the batch. Over-cap batches are refused naming
//! the cap. Checked through the dispatcher entry point the model's calls
//! take.

use quiver_catalog::bridge::MAX_BATCH;
use quiver_tests::dispatch::fixture_with_shop;
use serde_json::{Value, json};

fn first_tools(results: &Value) -> Vec<String> {
    results["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["matches"][0]["tool"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn search_batches_in_every_form_give_the_same_answer() {
    let fixture = fixture_with_shop(Vec::new());
    let session = fixture.session("s", &["*"]);
    let list = fixture
        .call(
            &session,
            "tool_search",
            json!({"queries": ["create issue", "delete repository"]}),
        )
        .await
        .unwrap();
    assert_eq!(first_tools(&list), ["create_issue", "delete_repo"]);
    for form in [
        json!({"queries": "[\"create issue\",\"delete repository\"]"}),
        json!({"queries": " [\"create issue\", \"delete repository\"] "}),
        json!({"query": ["create issue", "delete repository"]}),
    ] {
        let out = fixture.call(&session, "tool_search", form.clone()).await;
        assert_eq!(out.unwrap(), list, "{form}");
    }
    let one = fixture
        .call(&session, "tool_search", json!({"queries": "create issue"}))
        .await
        .unwrap();
    assert_eq!(first_tools(&one), ["create_issue"]);
}

#[tokio::test]
async fn describe_batches_in_every_form_give_the_same_answer() {
    let fixture = fixture_with_shop(Vec::new());
    let session = fixture.session("s", &["*"]);
    let names = ["mcp_github_create_issue", "mcp_github_delete_repo"];
    let list = fixture
        .call(&session, "tool_describe", json!({"names": names}))
        .await
        .unwrap();
    assert_eq!(list["tools"][1]["tool"], "delete_repo");
    for form in [
        json!({"names": serde_json::to_string(&names).unwrap()}),
        json!({"name": names}),
    ] {
        let out = fixture.call(&session, "tool_describe", form.clone()).await;
        assert_eq!(out.unwrap(), list, "{form}");
    }
    let one = fixture
        .call(
            &session,
            "tool_describe",
            json!({"names": "mcp_github_create_issue"}),
        )
        .await
        .unwrap();
    assert_eq!(one["tools"][0]["tool"], "create_issue");
}

#[tokio::test]
async fn bad_or_over_cap_batches_name_the_cap() {
    let fixture = fixture_with_shop(Vec::new());
    let session = fixture.session("s", &["*"]);
    let too_many: Vec<String> = (0..=MAX_BATCH).map(|i| format!("q{i}")).collect();
    for (bridge, key) in [("tool_search", "queries"), ("tool_describe", "names")] {
        let error = fixture
            .call(&session, bridge, json!({key: too_many}))
            .await
            .unwrap_err()
            .to_json();
        assert_eq!(error["error"], "batch_too_long", "{error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("holds {} items", MAX_BATCH + 1))
                && message.contains(&format!("the {MAX_BATCH} one call takes")),
            "{message}"
        );
        let encoded = serde_json::to_string(&too_many).unwrap();
        let error = fixture
            .call(&session, bridge, json!({key: encoded}))
            .await
            .unwrap_err();
        assert_eq!(error.code(), "batch_too_long");
        for bad in [
            json!([]),
            json!([1]),
            json!(3),
            json!("[1, 2]"),
            json!("[\"a\""),
        ] {
            let error = fixture
                .call(&session, bridge, json!({key: bad.clone()}))
                .await
                .unwrap_err()
                .to_json();
            assert_eq!(error["error"], "bad_batch", "{bad}: {error}");
            let message = error["message"].as_str().unwrap();
            assert!(
                message.contains(&format!(
                    "`{key}` must be a list of 1 to {MAX_BATCH} strings"
                )),
                "{message}"
            );
        }
    }
}
