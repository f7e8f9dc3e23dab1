//! Checks how `tool_call` takes the real tool's arguments, through the
//! dispatcher entry point the agent loop, the gateway and `quiver call`
//! use, asserting what the model receives: an object or a JSON-encoded
//! object string runs the tool with the same arguments; a string that is
//! not JSON gives the parser's error; anything that is not an object is
//! refused; and missing required arguments are `invalid_arguments` with
//! the tool's schema attached. Nothing refused ever runs.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use quiver_dispatch::approval::DenyAll;
use quiver_dispatch::{ApprovalPolicy, Guardrails};
use quiver_tests::dispatch::{Fixture, fixture};
use serde_json::{Value, json};

const TOOL: &str = "mcp_github_create_issue";

fn setup() -> Fixture {
    fixture(
        Guardrails::default(),
        ApprovalPolicy::default(),
        Arc::new(DenyAll),
    )
}

async fn tool_call(fixture: &Fixture, request: Value) -> Result<Value, Value> {
    let session = fixture.session("s", &["*"]);
    fixture
        .call(&session, "tool_call", request)
        .await
        .map_err(|error| error.to_json())
}

async fn refused(fixture: &Fixture, arguments: Value) -> Value {
    let before = fixture.invoked.load(Ordering::SeqCst);
    let error = tool_call(
        fixture,
        json!({"name": TOOL, "arguments": arguments.clone()}),
    )
    .await
    .expect_err("should be refused");
    assert_eq!(
        fixture.invoked.load(Ordering::SeqCst),
        before,
        "{arguments}: the tool ran"
    );
    error
}

#[tokio::test]
async fn object_and_json_string_arguments_run_the_same() {
    let fixture = setup();
    let arguments = json!({"repo": "r", "title": "t", "tag": "b"});
    let from_object = tool_call(&fixture, json!({"name": TOOL, "arguments": arguments}))
        .await
        .unwrap();
    assert_eq!(from_object["arguments"], arguments);
    let from_string = tool_call(
        &fixture,
        json!({"name": TOOL, "arguments": arguments.to_string()}),
    )
    .await
    .unwrap();
    assert_eq!(from_string, from_object);
    assert_eq!(fixture.invoked.load(Ordering::SeqCst), 2);

    // No arguments at all are fine for a tool that requires none.
    let none = tool_call(&fixture, json!({"name": "mcp_github_list_issues"}))
        .await
        .unwrap();
    assert_eq!(none["arguments"], json!({}));
}

#[tokio::test]
async fn invalid_json_string_gives_the_parse_error() {
    let fixture = setup();
    for text in ["{\"repo\": ", "{repo: 1}", "{\"repo\": \"o\",}"] {
        let expected = serde_json::from_str::<Value>(text).unwrap_err().to_string();
        let error = refused(&fixture, Value::String(text.into())).await;
        assert_eq!(
            error["error"], "invalid_arguments_json",
            "{text:?}: {error}"
        );
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(&expected), "{message}");
        assert!(message.contains("line 1 column"), "{message}");
        assert!(message.contains(TOOL), "{message}");
    }
}

#[tokio::test]
async fn non_object_arguments_are_refused() {
    let fixture = setup();
    for arguments in [
        json!([1, 2]),
        json!(5),
        json!(true),
        json!("[1, 2]"),
        json!("\"a string\""),
        json!("7"),
        json!("null"),
    ] {
        let error = refused(&fixture, arguments.clone()).await;
        assert_eq!(
            error["error"], "arguments_not_object",
            "{arguments}: {error}"
        );
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("must be a JSON object"),
            "{error}"
        );
    }
    // The bridge tool's own arguments must be an object, with a name.
    let error = tool_call(&fixture, json!([TOOL])).await.unwrap_err();
    assert_eq!(error["error"], "arguments_not_object", "{error}");
    let error = tool_call(&fixture, json!({"arguments": {}}))
        .await
        .unwrap_err();
    assert_eq!(error["error"], "missing_name", "{error}");
}

#[tokio::test]
async fn missing_required_arguments_are_invalid_arguments_with_the_schema() {
    let fixture = setup();
    for (arguments, missing) in [
        (json!({"tag": "b"}), vec!["repo", "title"]),
        (json!({}), vec!["repo", "title"]),
        (Value::Null, vec!["repo", "title"]),
        (json!("{\"repo\": \"r\"}"), vec!["title"]),
    ] {
        let error = refused(&fixture, arguments.clone()).await;
        assert_eq!(error["error"], "invalid_arguments", "{arguments}: {error}");
        let problems = error["problems"].to_string();
        for name in &missing {
            assert!(problems.contains(name), "{arguments}: {error}");
        }
        assert_eq!(error["input_schema"]["required"], json!(["repo", "title"]));
    }
}
