//! The model clients speak https (the `model-https` feature, on by
//! default): a server whose certificate comes from a private CA is reached
//! when `tls_ca_file` names that CA, and refused with a certificate error
//! when it does not (the system's trust store does not know it). A
//! `tls_ca_file` with no certificate is a config error naming the file.

use quiver_tests::model;

use model::{ScriptedModel, ask};
use quiver_model::{ModelConfig, ModelError, build};
use serde_json::json;

/// The answer of the model `config` describes to a greeting.
async fn greet(config: &ModelConfig) -> Result<String, ModelError> {
    ask(&*build(config)?, "hello over tls").await
}
#[tokio::test(flavor = "multi_thread")]
async fn https_works_with_the_right_ca_and_is_refused_without() {
    let tls = quiver_tests::workspace_root().join("tests/fixtures/tls");
    let script = json!([{"match": "over tls", "steps": [{"content": "encrypted hello"}]}]);
    let cert = tls.join("server.pem");
    let key = tls.join("server.key");
    let server = ScriptedModel::start(
        &script,
        &[
            "--tls-cert",
            quiver_tests::arg(&cert),
            "--tls-key",
            quiver_tests::arg(&key),
        ],
    );
    assert!(
        server.base_url.starts_with("https://127.0.0.1:"),
        "{}",
        server.base_url
    );

    for mut config in [server.openai("local"), server.anthropic("claude")] {
        config.tls_ca_file = Some(tls.join("ca.pem"));
        assert_eq!(
            greet(&config).await.unwrap(),
            "encrypted hello",
            "{}",
            config.name
        );
    }

    let mut untrusted = server.openai("untrusted");
    untrusted.max_retries = 0;
    let error = greet(&untrusted).await.unwrap_err();
    assert_eq!(error.code(), "transport_error", "{error}");
    let text = error.to_string();
    assert!(
        text.contains("model `untrusted`") && text.contains("invalid peer certificate"),
        "{text}"
    );

    let mut not_pem = server.openai("bad-ca");
    not_pem.tls_ca_file = Some(tls.join("README.md"));
    let error = greet(&not_pem).await.unwrap_err();
    assert_eq!(error.code(), "config_error");
    let text = error.to_string();
    assert!(
        text.starts_with("model `bad-ca`: tls_ca_file ") && text.contains("README.md"),
        "{text}"
    );
}
