//! The `model` sections, read through the root parse of a whole `quiver.yaml`.

use std::time::Duration;

use quiver_config::ConfigWarning;

use crate::config::{invalid_parts, parse};

use quiver_model::settings::*;

fn models(text: &str) -> (ModelsConfig, Vec<ConfigWarning>) {
    let loaded = parse(text, "q.yaml").unwrap();
    (loaded.config.models, loaded.warnings)
}

fn invalid(text: &str) -> (String, u32, String, String) {
    let (key, line, _, message, allowed) = invalid_parts(text);
    (key, line, message, allowed)
}

#[test]
fn a_full_entry_is_read() {
    let text = "models:\n  local:\n    provider: openai\n    base_url: http://127.0.0.1:8080/v1/\n    model: qwen\n    headers: {X-Team: quiver}\n    context_tokens: 32768\n    max_output_tokens: 1024\n    timeout_s: 60\n    max_retries: 0\n    max_tokens_field: max_completion_tokens\n";
    let (config, warnings) = models(text);
    assert!(warnings.is_empty());
    assert_eq!(config.default_model.as_deref(), Some("local"));
    let local = config.default_config().unwrap();
    assert_eq!(local.provider, ProviderKind::OpenAi);
    assert_eq!(local.base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(local.model, "qwen");
    assert_eq!(local.api_key, None);
    assert_eq!(local.headers["X-Team"], "quiver");
    assert_eq!(local.context_tokens, 32_768);
    assert_eq!(local.max_output_tokens, 1024);
    assert_eq!(local.timeout, Duration::from_secs(60));
    assert_eq!(local.max_retries, 0);
    assert_eq!(local.max_tokens_field, MaxTokensField::MaxCompletionTokens);
}

#[test]
fn defaults_apply() {
    let (config, _) = models("models:\n  claude:\n    provider: anthropic\n    model: m\n");
    let claude = &config.models["claude"];
    assert_eq!(claude.base_url, "https://api.anthropic.com");
    assert_eq!(claude.context_tokens, DEFAULT_CONTEXT_TOKENS);
    assert_eq!(claude.max_output_tokens, DEFAULT_MAX_OUTPUT_TOKENS);
    assert_eq!(claude.timeout, Duration::from_secs(DEFAULT_TIMEOUT_S));
    assert_eq!(claude.max_retries, DEFAULT_MAX_RETRIES);
    let (none, _) = models("");
    assert_eq!(none, ModelsConfig::default());
}

#[test]
fn api_key_is_expanded_and_an_unset_variable_names_model_and_key() {
    let text = "models:\n  m:\n    provider: openai\n    model: x\n    api_key: \"${QUIVER_TEST_SURELY_UNSET_KEY}\"\n";
    let (key, line, message, _) = invalid(text);
    assert_eq!((key.as_str(), line), ("models.m.api_key", 5));
    assert!(
        message.contains("QUIVER_TEST_SURELY_UNSET_KEY") && message.contains("not set"),
        "{message}"
    );
    // PATH is set in every test environment.
    let text = "models:\n  m:\n    provider: openai\n    model: x\n    api_key: \"k-${PATH}\"\n";
    let (config, _) = models(text);
    let key = config.models["m"].api_key.clone().unwrap();
    assert!(key.starts_with("k-") && key.len() > 2);
    assert!(!format!("{:?}", config.models["m"]).contains(&key));
}

#[test]
fn out_of_range_numbers_are_clamped_with_warnings() {
    let text = "models:\n  m:\n    provider: openai\n    model: x\n    context_tokens: 5\n    max_retries: 99\n    timeout_s: 99999\n";
    let (config, warnings) = models(text);
    let m = &config.models["m"];
    assert_eq!(m.context_tokens, CONTEXT_TOKENS_RANGE.0);
    assert_eq!(m.max_retries, MAX_RETRIES);
    assert_eq!(m.timeout, Duration::from_secs(MAX_TIMEOUT_S));
    let keys: Vec<&str> = warnings.iter().map(|w| w.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "models.m.context_tokens",
            "models.m.timeout_s",
            "models.m.max_retries"
        ]
    );
}

#[test]
fn errors_name_the_model_key_and_allowed_values() {
    let (key, line, message, allowed) =
        invalid("models:\n  m:\n    provider: openia\n    model: x\n");
    assert!(key.starts_with("models.m.provider"), "{key}");
    assert_eq!(line, 3);
    assert!(message.contains("openia"), "{message}");
    assert_eq!(allowed, "openai, anthropic");

    let (key, line, message, _) = invalid("models:\n  m:\n    provider: openai\n");
    assert_eq!((key.as_str(), line), ("models.m.model", 3));
    assert!(message.contains("missing `model`"), "{message}");

    let (key, _, message, _) =
        invalid("models:\n  m:\n    provider: openai\n    model: x\n    base_url: ftp://h/\n");
    assert_eq!(key, "models.m.base_url");
    assert!(message.contains("ftp://h/"), "{message}");

    let (key, _, _, allowed) =
        invalid("models:\n  m:\n    provider: openai\n    model: x\n    temperature: 1\n");
    assert!(key.starts_with("models.m"), "{key}");
    assert!(allowed.contains("max_output_tokens"), "{allowed}");

    let (key, _, message, _) = invalid(
        "models:\n  m:\n    provider: anthropic\n    model: x\n    max_tokens_field: max_tokens\n",
    );
    assert_eq!(key, "models.m.max_tokens_field");
    assert!(message.contains("provider: openai"), "{message}");

    let (key, _, _, allowed) =
        invalid("models:\n  \"my model\":\n    provider: openai\n    model: x\n");
    assert_eq!(key, "models.my model");
    assert!(allowed.contains("[A-Za-z0-9_-]"), "{allowed}");

    let (key, _, _, _) = invalid(
        "models:\n  m:\n    provider: openai\n    model: x\n    headers: {\"bad header\": v}\n",
    );
    assert_eq!(key, "models.m.headers.bad header");

    let (key, _, message, _) = invalid(
        "models:\n  m:\n    provider: openai\n    model: x\n    base_url: http://127.0.0.1:1\n    tls_ca_file: ca.pem\n",
    );
    assert_eq!(key, "models.m.tls_ca_file");
    assert!(message.contains("https"), "{message}");
}

#[test]
fn default_model_must_name_a_configured_model() {
    let two = "models:\n  a:\n    provider: openai\n    model: x\n  b:\n    provider: anthropic\n    model: y\n";
    let (config, _) = models(&format!("{two}default_model: b\n"));
    assert_eq!(config.default_config().unwrap().name, "b");

    let (key, line, message, allowed) = invalid(&format!("{two}default_model: c\n"));
    assert_eq!((key.as_str(), line), ("default_model", 8));
    assert!(message.contains("`c`"), "{message}");
    assert_eq!(allowed, "a, b");

    let (key, _, message, allowed) = invalid(two);
    assert_eq!(key, "default_model");
    assert!(message.contains("several models"), "{message}");
    assert_eq!(allowed, "a, b");

    let (_, _, _, allowed) = invalid("default_model: a\n");
    assert!(allowed.contains("none is configured"), "{allowed}");
}
