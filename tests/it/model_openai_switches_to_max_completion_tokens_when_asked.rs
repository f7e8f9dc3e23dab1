//! A server that refuses `max_tokens` and asks for `max_completion_tokens`
//! (as OpenAI's reasoning models do) gets the request again with
//! `max_completion_tokens`, and every later request of that model uses it;
//! `max_tokens_field` forces either field.

use quiver_tests::model;

use model::{ScriptedModel, ask};
use quiver_model::{MaxTokensField, build};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn the_limit_moves_to_max_completion_tokens_when_asked() {
    let refusal = "Unsupported parameter: 'max_tokens' is not supported with this model. \
                   Use 'max_completion_tokens' instead.";
    let script = json!([
        {"match": "reason", "steps": [{"status": 400, "times": 1, "error": refusal, "content": "done"}]},
        {"match": "again", "steps": [{"content": "again done"}]},
        {"match": "pinned", "steps": [{"status": 400, "times": 1, "error": refusal, "content": "no"}]},
    ]);
    let server = ScriptedModel::start(&script, &[]);
    let provider = build(&server.openai("o-model")).unwrap();
    assert_eq!(ask(&*provider, "reason about it").await.unwrap(), "done");
    assert_eq!(ask(&*provider, "again").await.unwrap(), "again done");
    let sent = server.requests().await;
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0]["max_tokens"], 64);
    assert!(sent[0].get("max_completion_tokens").is_none());
    for later in &sent[1..] {
        assert_eq!(later["max_completion_tokens"], 64, "{later}");
        assert!(later.get("max_tokens").is_none(), "{later}");
    }

    // A forced field is never switched: the refusal is the answer.
    let mut forced = server.openai("pinned");
    forced.max_tokens_field = MaxTokensField::MaxTokens;
    let error = ask(&*build(&forced).unwrap(), "pinned").await.unwrap_err();
    assert_eq!(error.status(), Some(400));
    assert!(
        error.to_string().contains("Use 'max_completion_tokens'"),
        "{error}"
    );
    let sent = server.requests().await;
    assert_eq!(sent.len(), 4, "not sent again");
    assert_eq!(sent[3]["max_tokens"], 64);

    let mut completion_field = server.openai("new-style");
    completion_field.max_tokens_field = MaxTokensField::MaxCompletionTokens;
    ask(&*build(&completion_field).unwrap(), "again")
        .await
        .unwrap();
    assert_eq!(server.requests().await[4]["max_completion_tokens"], 64);
}
