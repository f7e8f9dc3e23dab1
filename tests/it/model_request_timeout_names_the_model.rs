//! A model that does not answer within `timeout_s` fails with a `timeout`
//! error naming the model, the URL and the limit; a timed-out request is
//! not sent again (the server may still be generating it).

use quiver_tests::model;

use std::time::Duration;

use model::{ScriptedModel, ask};
use quiver_model::build;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_answer_times_out() {
    let script = json!([{"match": "slow", "steps": [{"delay_ms": 5000, "content": "late"}]}]);
    let server = ScriptedModel::start(&script, &[]);
    for mut config in [server.openai("local"), server.anthropic("claude")] {
        config.timeout = Duration::from_secs(1);
        let name = config.name.clone();
        let provider = build(&config).unwrap();
        let error = ask(&*provider, "slow one").await.unwrap_err();
        assert_eq!(error.code(), "timeout");
        let text = error.to_string();
        assert!(
            text.starts_with(&format!("model `{name}` ({}/v1/", server.base_url))
                && text.ends_with("did not answer within 1000 ms"),
            "{text}"
        );
    }
    assert_eq!(server.requests().await.len(), 2, "one attempt per model");
}
