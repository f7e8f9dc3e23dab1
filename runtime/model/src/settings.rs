//! The `models:` and `default_model:` sections of `quiver.yaml`: the raw
//! shape serde reads, its validation, and the validated [`ModelConfig`] of
//! each model.
//!
//! ```yaml
//! models:
//!   local:
//!     provider: openai              # any OpenAI-compatible server
//!     base_url: http://127.0.0.1:8080/v1
//!     model: qwen2.5-7b-instruct
//!     context_tokens: 32768
//!   claude:
//!     provider: anthropic
//!     model: claude-sonnet-4-5
//!     api_key: ${ANTHROPIC_API_KEY}
//! default_model: local
//! ```
//!
//! `${VAR}` in `api_key` and `headers` values is replaced by the variable's
//! value when the file is loaded (the same expansion as `mcp_servers`); an
//! unset variable is a config error that names the model and the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use quiver_config::Spanned;
use serde::Deserialize;

use quiver_config::expand_vars;
use quiver_config::setting::{DefaultValue, Kind, Setting, by_key};
use quiver_config::{ConfigError, ConfigWarning, int_setting, invalid_at};

/// The keys of `models` and `default_model`, described once (see `quiver_config::setting`).
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "models.NAME",
        kind: Kind::Table { or_bool: false },
        default: DefaultValue::None,
        doc: "a model sessions can use (see [Model providers](#model-providers)); `NAME`: 1 to 64 of `[A-Za-z0-9_-]`",
    },
    Setting {
        key: "models.NAME.provider",
        kind: Kind::Enum(&["openai", "anthropic"]),
        default: DefaultValue::Required,
        doc: "`openai`: Chat Completions (OpenAI, llama.cpp's server, vLLM, Ollama, gateways); `anthropic`: Messages",
    },
    Setting {
        key: "models.NAME.model",
        kind: Kind::Text("the model identifier the server expects"),
        default: DefaultValue::Required,
        doc: "the model identifier sent in each request",
    },
    Setting {
        key: "models.NAME.base_url",
        kind: Kind::Text("an http:// or https:// URL"),
        default: DefaultValue::Described(
            "`https://api.openai.com/v1` (`openai`), `https://api.anthropic.com` (`anthropic`)",
        ),
        doc: "where the API lives: requests go to `{base_url}/chat/completions` (`openai`) or `{base_url}/v1/messages` (`anthropic`; a base ending in `/v1` gets no second one). Local servers: `http://127.0.0.1:8080/v1` (llama.cpp), `http://127.0.0.1:8000/v1` (vLLM), `http://127.0.0.1:11434/v1` (Ollama)",
    },
    Setting {
        key: "models.NAME.api_key",
        kind: Kind::Text("a key, usually \"${VARIABLE}\" (expanded at load time)"),
        default: DefaultValue::None,
        doc: "sent as `Authorization: Bearer` (`openai`) or `x-api-key` (`anthropic`); write `\"${VAR}\"` to read it from the environment at load time (unset: config error naming model and key). Local servers need none",
    },
    Setting {
        key: "models.NAME.headers",
        kind: Kind::Map("a map of header name to value (${VAR} is expanded)"),
        default: DefaultValue::EmptyMap,
        doc: "sent with every request; `${VAR}` is expanded as in `api_key`",
    },
    Setting::int(
        "models.NAME.context_tokens",
        1000,
        10000000,
        128000,
        "the model's context window (sizes the tool listing and the history)",
    ),
    Setting::int(
        "models.NAME.max_output_tokens",
        1,
        1000000,
        4096,
        "output limit of a turn that does not set its own",
    ),
    Setting::timeout(
        "models.NAME.timeout_s",
        1,
        3600,
        300,
        "longest one request may take, answer included; a timed-out request is not retried",
    ),
    Setting::int(
        "models.NAME.max_retries",
        0,
        10,
        2,
        "further attempts after a 429, a 5xx or a refused or broken connection (backoff 0.5 s doubling, up to 30 s, longer if `retry-after` asks, up to 60 s); other 4xx answers are never retried",
    ),
    Setting {
        key: "models.NAME.max_tokens_field",
        kind: Kind::Enum(&["auto", "max_tokens", "max_completion_tokens"]),
        default: DefaultValue::Str("auto"),
        doc: "`openai` only: the request field of the output limit. `auto`: `max_completion_tokens` for `api.openai.com` (its reasoning models refuse `max_tokens`), `max_tokens` elsewhere (older llama.cpp and Ollama ignore `max_completion_tokens`); a server that answers 400 asking for `max_completion_tokens` gets it from then on",
    },
    Setting {
        key: "models.NAME.stream",
        kind: Kind::Bool,
        default: DefaultValue::Bool(true),
        doc: "`true`: replies are streamed (`stream: true` for `openai`, with `stream_options.include_usage` for the token counts; the Messages event stream for `anthropic`), so text reaches the session feed, `?stream=true` clients and `quiver chat` as it is generated. A server that answers a streamed request with plain JSON is read as such. `false`: one JSON answer per request (for servers or gateways that mishandle streams)",
    },
    Setting {
        key: "models.NAME.tls_ca_file",
        kind: Kind::Text("a PEM file of CA certificates (https base URLs only)"),
        default: DefaultValue::None,
        doc: "`https` only: CA certificates trusted besides the system's, for a server with a private CA (relative to the config file)",
    },
    Setting {
        key: "default_model",
        kind: Kind::Text("the name of a model under `models`"),
        default: DefaultValue::Described("the only model, when there is one"),
        doc: "the model sessions use unless they ask for another; required when several models are configured",
    },
];

const CONTEXT_TOKENS: &Setting = by_key(SETTINGS, "models.NAME.context_tokens");
const MAX_OUTPUT_TOKENS: &Setting = by_key(SETTINGS, "models.NAME.max_output_tokens");
const TIMEOUT_S: &Setting = by_key(SETTINGS, "models.NAME.timeout_s");
const RETRIES: &Setting = by_key(SETTINGS, "models.NAME.max_retries");

/// Default `context_tokens`.
pub const DEFAULT_CONTEXT_TOKENS: u64 = CONTEXT_TOKENS.default_int() as u64;
/// Smallest and largest `context_tokens`.
pub const CONTEXT_TOKENS_RANGE: (u64, u64) = (
    CONTEXT_TOKENS.range().0 as u64,
    CONTEXT_TOKENS.range().1 as u64,
);
/// Default `max_output_tokens`.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = MAX_OUTPUT_TOKENS.default_int() as u32;
/// Smallest and largest `max_output_tokens`.
pub const MAX_OUTPUT_TOKENS_RANGE: (u32, u32) = (
    MAX_OUTPUT_TOKENS.range().0 as u32,
    MAX_OUTPUT_TOKENS.range().1 as u32,
);
/// Default `timeout_s`: a long answer from a slow local model takes minutes.
pub const DEFAULT_TIMEOUT_S: u64 = TIMEOUT_S.default_int() as u64;
/// Largest `timeout_s`.
pub const MAX_TIMEOUT_S: u64 = TIMEOUT_S.range().1 as u64;
/// Default `max_retries`.
pub const DEFAULT_MAX_RETRIES: u32 = RETRIES.default_int() as u32;
/// Largest `max_retries`.
pub const MAX_RETRIES: u32 = RETRIES.range().1 as u32;
/// The pause before the first retry; doubled for each later one.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// Which wire protocol a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI Chat Completions (`POST {base_url}/chat/completions`), also
    /// served by llama.cpp's server, vLLM, Ollama and most gateways.
    OpenAi,
    /// Anthropic Messages (`POST {base_url}/v1/messages`).
    Anthropic,
}

impl ProviderKind {
    /// `openai` or `anthropic`, as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    /// The base URL used when `base_url` is not given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "https://api.openai.com/v1",
            ProviderKind::Anthropic => "https://api.anthropic.com",
        }
    }
}

/// Which request field carries an OpenAI-compatible model's output limit.
///
/// OpenAI's reasoning models refuse `max_tokens` and want
/// `max_completion_tokens`; older llama.cpp and Ollama servers ignore
/// `max_completion_tokens` (and would then generate without a limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_completion_tokens` for OpenAI's own API (`api.openai.com`),
    /// `max_tokens` for every other server; a server that answers 400
    /// asking for `max_completion_tokens` gets it from then on.
    Auto,
    /// Always `max_tokens`.
    MaxTokens,
    /// Always `max_completion_tokens`.
    MaxCompletionTokens,
}

/// One validated `models` entry.
#[derive(Clone, PartialEq)]
pub struct ModelConfig {
    /// The configured name (`[A-Za-z0-9_-]`, 1 to 64 characters).
    pub name: String,
    /// The wire protocol.
    pub provider: ProviderKind,
    /// Where the API lives, without a trailing `/` (e.g.
    /// `http://127.0.0.1:8080/v1` for llama.cpp's server).
    pub base_url: String,
    /// The model identifier sent in each request.
    pub model: String,
    /// Sent as `Authorization: Bearer` (OpenAI) or `x-api-key` (Anthropic);
    /// `None` for local servers that need none. Already expanded.
    pub api_key: Option<String>,
    /// Extra headers sent with every request (already expanded).
    pub headers: BTreeMap<String, String>,
    /// The model's context window, in tokens.
    pub context_tokens: u64,
    /// Output limit used when a request does not set its own.
    pub max_output_tokens: u32,
    /// Longest one HTTP attempt may take, body included.
    pub timeout: Duration,
    /// Further attempts after a 429, a 5xx or a refused or broken
    /// connection.
    pub max_retries: u32,
    /// The pause before the first retry (doubled for each later one, unless
    /// the server's `retry-after` asks for longer). Not read from the file.
    pub retry_backoff: Duration,
    /// OpenAI only: the output-limit field.
    pub max_tokens_field: MaxTokensField,
    /// https only: a PEM file of CA certificates trusted besides the
    /// system's (a self-hosted server with a private CA). Relative paths
    /// follow the config file.
    pub tls_ca_file: Option<PathBuf>,
    /// Whether replies are asked for as a stream (`stream`).
    pub stream: bool,
}

impl fmt::Debug for ModelConfig {
    /// The API key and header values may be secrets: only header names show.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelConfig")
            .field("name", &self.name)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("context_tokens", &self.context_tokens)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_backoff", &self.retry_backoff)
            .field("max_tokens_field", &self.max_tokens_field)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("stream", &self.stream)
            .finish()
    }
}

impl ModelConfig {
    /// A model with default settings; `base_url` loses any trailing `/`.
    pub fn new(
        name: impl Into<String>,
        provider: ProviderKind,
        base_url: impl Into<String>,
        model: impl Into<String>,
    ) -> ModelConfig {
        ModelConfig {
            name: name.into(),
            provider,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            model: model.into(),
            api_key: None,
            headers: BTreeMap::new(),
            context_tokens: DEFAULT_CONTEXT_TOKENS,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
            max_retries: DEFAULT_MAX_RETRIES,
            retry_backoff: DEFAULT_RETRY_BACKOFF,
            max_tokens_field: MaxTokensField::Auto,
            tls_ca_file: None,
            stream: true,
        }
    }

    /// Makes `tls_ca_file` absolute against `base` (the config file's
    /// directory).
    pub fn resolve_relative_to(&mut self, base: &Path) {
        if let Some(file) = &mut self.tls_ca_file {
            *file = quiver_config::paths::absolute(base, file);
        }
    }
}

/// The validated `models` and `default_model` sections.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelsConfig {
    /// Every configured model, by name.
    pub models: BTreeMap<String, ModelConfig>,
    /// The model sessions use unless they ask for another: `default_model`,
    /// or the only model when there is one; `None` when no model is
    /// configured.
    pub default_model: Option<String>,
}

impl ModelsConfig {
    /// The default model's settings.
    pub fn default_config(&self) -> Option<&ModelConfig> {
        self.default_model
            .as_ref()
            .and_then(|name| self.models.get(name))
    }
}

// ---- raw shape -----------------------------------------------------------

/// Model as written, values with their line and column (see `validate`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    provider: Spanned<ProviderKind>,
    base_url: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    api_key: Option<Spanned<String>>,
    headers: Option<BTreeMap<String, Spanned<String>>>,
    context_tokens: Option<Spanned<i64>>,
    max_output_tokens: Option<Spanned<i64>>,
    timeout_s: Option<Spanned<i64>>,
    max_retries: Option<Spanned<i64>>,
    max_tokens_field: Option<Spanned<MaxTokensField>>,
    tls_ca_file: Option<Spanned<String>>,
    stream: Option<Spanned<bool>>,
}

/// The raw `models` section: model name to entry, with the entry's position.
pub type RawModels = BTreeMap<String, Spanned<RawModel>>;

/// What a `models` or `default_model` key accepts, for error messages;
/// `None` for keys of other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    if key == "default_model" {
        return Some("the name of a model under `models`".into());
    }
    if key != "models" && !key.starts_with("models.") {
        return None;
    }
    if key == "models" {
        return Some("a map of model name to {provider, model, base_url, api_key, ...}".into());
    }
    quiver_config::setting::allowed_in(SETTINGS, key)
}

// ---- validation ------------------------------------------------------------

struct Ctx<'a> {
    file: &'a str,
    model: &'a str,
}

impl Ctx<'_> {
    fn key(&self, key: &str) -> String {
        if key.is_empty() {
            format!("models.{}", self.model)
        } else {
            format!("models.{}.{key}", self.model)
        }
    }

    fn error<T>(&self, at: &Spanned<T>, key: &str, message: String) -> ConfigError {
        let key = self.key(key);
        let allowed = allowed_for(&key).unwrap_or_default();
        invalid_at(self.file, at, key, message, allowed)
    }

    fn number(
        &self,
        raw: &Option<Spanned<i64>>,
        setting: &Setting,
        warnings: &mut Vec<ConfigWarning>,
    ) -> Result<u64, ConfigError> {
        let leaf = setting.key.rsplit('.').next().unwrap_or_default();
        int_setting(raw, setting, &self.key(leaf), self.file, warnings).map(|n| n as u64)
    }

    fn expand(&self, value: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        expand_vars(&value.value, |name| std::env::var(name).ok())
            .map_err(|message| self.error(value, key, message))
    }
}

/// Validates `base_url`: an absolute http(s) URL, returned without a
/// trailing `/`.
fn base_url(ctx: &Ctx<'_>, raw: &Spanned<String>) -> Result<String, ConfigError> {
    let text = raw.value.trim();
    let parsed = reqwest::Url::parse(text)
        .map_err(|error| ctx.error(raw, "base_url", format!("`{text}` is not a URL: {error}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(ctx.error(
            raw,
            "base_url",
            format!("`{text}` is not an http:// or https:// URL"),
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(ctx.error(
            raw,
            "base_url",
            format!("`{text}` has a query or fragment; give the API's base path only"),
        ));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

fn validate_model(
    ctx: &Ctx<'_>,
    entry: Spanned<RawModel>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<ModelConfig, ConfigError> {
    let raw = &entry.value;
    let provider = raw.provider.value;
    let model = match &raw.model {
        Some(model) if !model.value.trim().is_empty() => model.value.trim().to_owned(),
        Some(model) => return Err(ctx.error(model, "model", "empty model identifier".into())),
        None => {
            return Err(ctx.error(
                &entry,
                "model",
                "missing `model`: the model identifier the server expects".into(),
            ));
        }
    };
    let base_url = match &raw.base_url {
        Some(url) => base_url(ctx, url)?,
        None => provider.default_base_url().to_owned(),
    };
    let api_key = match &raw.api_key {
        Some(key) => {
            let expanded = ctx.expand(key, "api_key")?;
            if expanded.trim().is_empty() {
                return Err(ctx.error(
                    key,
                    "api_key",
                    "the key is empty (is its variable set to an empty string?)".into(),
                ));
            }
            Some(expanded)
        }
        None => None,
    };
    let mut headers = BTreeMap::new();
    for (name, value) in raw.headers.iter().flatten() {
        let key = format!("headers.{name}");
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(ctx.error(value, &key, format!("`{name}` is not a header name")));
        }
        let expanded = ctx.expand(value, &key)?;
        if reqwest::header::HeaderValue::from_str(&expanded).is_err() {
            return Err(ctx.error(
                value,
                &key,
                "the value has characters a header cannot carry".into(),
            ));
        }
        headers.insert(name.clone(), expanded);
    }
    if let Some(field) = &raw.max_tokens_field
        && provider != ProviderKind::OpenAi
    {
        return Err(ctx.error(
            field,
            "max_tokens_field",
            "`max_tokens_field` is for `provider: openai`; Anthropic always takes `max_tokens`"
                .into(),
        ));
    }
    let tls_ca_file = match &raw.tls_ca_file {
        Some(file) if file.value.trim().is_empty() => {
            return Err(ctx.error(file, "tls_ca_file", "empty file path".into()));
        }
        Some(file) if !base_url.to_ascii_lowercase().starts_with("https://") => {
            return Err(ctx.error(
                file,
                "tls_ca_file",
                format!("`tls_ca_file` is for https base URLs, and `{base_url}` is not one"),
            ));
        }
        Some(file) => Some(PathBuf::from(&file.value)),
        None => None,
    };
    let context_tokens = ctx.number(&raw.context_tokens, CONTEXT_TOKENS, warnings)?;
    let max_output_tokens = ctx.number(&raw.max_output_tokens, MAX_OUTPUT_TOKENS, warnings)?;
    let timeout_s = ctx.number(&raw.timeout_s, TIMEOUT_S, warnings)?;
    let max_retries = ctx.number(&raw.max_retries, RETRIES, warnings)?;
    let mut config = ModelConfig::new(ctx.model, provider, base_url, model);
    config.api_key = api_key;
    config.headers = headers;
    config.context_tokens = context_tokens;
    config.max_output_tokens = max_output_tokens as u32;
    config.timeout = Duration::from_secs(timeout_s);
    config.max_retries = max_retries as u32;
    config.max_tokens_field = raw
        .max_tokens_field
        .as_ref()
        .map_or(MaxTokensField::Auto, |f| f.value);
    config.tls_ca_file = tls_ca_file;
    config.stream = raw.stream.as_ref().is_none_or(|stream| stream.value);
    Ok(config)
}

/// Validates the raw `models` section and `default_model`.
pub fn validate(
    raw: RawModels,
    default_model: Option<Spanned<String>>,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<ModelsConfig, ConfigError> {
    let mut models = BTreeMap::new();
    for (name, entry) in raw {
        let ctx = Ctx { file, model: &name };
        if !quiver_tool::naming::is_valid_plain_name(&name) {
            return Err(ConfigError::Invalid {
                file: file.to_owned(),
                line: entry.referenced.line() as u32,
                column: entry.referenced.column() as u32,
                key: format!("models.{name}"),
                message: format!("`{name}` is not a valid model name"),
                allowed: "1 to 64 characters from [A-Za-z0-9_-]".into(),
            });
        }
        let config = validate_model(&ctx, entry, warnings)?;
        models.insert(name, config);
    }
    let default_model = match default_model {
        Some(chosen) if models.contains_key(&chosen.value) => Some(chosen.value),
        Some(chosen) => {
            let names: Vec<&str> = models.keys().map(String::as_str).collect();
            return Err(ConfigError::Invalid {
                file: file.to_owned(),
                line: chosen.referenced.line() as u32,
                column: chosen.referenced.column() as u32,
                key: "default_model".into(),
                message: format!("`{}` is not a configured model", chosen.value),
                allowed: if names.is_empty() {
                    "the name of a model under `models` (none is configured)".into()
                } else {
                    names.join(", ")
                },
            });
        }
        None if models.len() == 1 => models.keys().next().cloned(),
        None if models.is_empty() => None,
        None => {
            let names: Vec<&str> = models.keys().map(String::as_str).collect();
            return Err(ConfigError::Invalid {
                file: file.to_owned(),
                line: 0,
                column: 0,
                key: "default_model".into(),
                message: "several models are configured; say which one sessions use".into(),
                allowed: names.join(", "),
            });
        }
    };
    Ok(ModelsConfig {
        models,
        default_model,
    })
}
