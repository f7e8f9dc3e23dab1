//! The `tools.tool_search` section of `quiver.yaml`: its raw shape (a
//! switch or a map), what each key allows, and the validated
//! [`ToolSearchConfig`] that the catalog, listing and bridge read.

use std::fmt;
use std::path::PathBuf;

use globset::{Glob, GlobSet, GlobSetBuilder};
use quiver_config::setting::{DefaultValue, Kind, Setting, by_key};
use quiver_config::{ConfigError, ConfigWarning, Spanned, Switch, int_setting};
use serde::Deserialize;

/// The retrieval algorithm behind `tool_search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// BM25 over name, description and parameter names.
    Classic,
    /// BM25F over weighted fields with identifier splitting, stemming,
    /// stop words, typo tolerance, an exact-name pre-pass and `server:`
    /// filters (see `enhanced`).
    Enhanced,
}

/// The validated `tools.tool_search` settings.
#[derive(Debug, Clone)]
pub struct ToolSearchConfig {
    /// `auto`: the bridge appears when a deferrable tool exists; `on`: the
    /// bridge is always there, so the tools array keeps its shape while
    /// plugins and servers come and go; `off`: every tool is sent eagerly.
    pub enabled: Switch,
    /// Percent of the session's context that the listing may use.
    pub threshold_pct: u32,
    /// Matches returned when `tool_search` gets no `limit`.
    pub search_default_limit: usize,
    /// Largest `limit` honoured.
    pub max_search_limit: usize,
    /// Most characters of a query that are searched (see [`crate::query`]).
    pub max_query_chars: usize,
    /// Most distinct words of a query that are searched.
    pub max_query_words: usize,
    /// `auto`: the listing's budget is `min(threshold_pct% of context,
    /// listing_max_tokens)`; `on`: the budget is `listing_max_tokens`
    /// whatever the context; `off`: no listing, only the deferred count.
    pub listing: Switch,
    /// Hard cap on the listing, in tokens.
    pub listing_max_tokens: u64,
    /// Globs of tool names that are never deferred.
    pub eager: Vec<String>,
    eager_set: GlobSet,
    /// The retrieval algorithm.
    pub mode: SearchMode,
    /// The embedding stage fused with the enhanced search, when configured.
    pub embeddings: Option<EmbeddingsConfig>,
}

/// The validated `tools.tool_search.embeddings` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingsConfig {
    /// The sentence-transformers model's directory (absolute once loaded).
    pub model: PathBuf,
    /// Weight of the normalised similarity in the fused score.
    pub weight: f64,
    /// Tokens per text at most; `None`: the model's own limit.
    pub max_tokens: Option<usize>,
    /// Inference threads; `None`: half the cores, at least one.
    pub threads: Option<usize>,
    /// Whether the daemon's `/readyz` waits until every tool's vector is
    /// ready (until then its searches are lexical only for the rest).
    pub readiness_waits: bool,
}

impl EmbeddingsConfig {
    /// `model` with the default weight and limits.
    pub fn new(model: PathBuf) -> EmbeddingsConfig {
        EmbeddingsConfig {
            model,
            weight: DEFAULT_EMBEDDING_WEIGHT,
            max_tokens: None,
            threads: None,
            readiness_waits: false,
        }
    }
}

/// The fused score's weight of the similarity unless `weight` says
/// otherwise: chosen on the odd-indexed queries of every set (see
/// docs/RETRIEVAL.md).
pub const DEFAULT_EMBEDDING_WEIGHT: f64 = 1.0;

impl ToolSearchConfig {
    /// Whether `name` matches an `eager` glob.
    pub fn is_eager(&self, name: &str) -> bool {
        !self.eager.is_empty() && self.eager_set.is_match(name)
    }

    /// `limit` (or the default when absent) clamped to `1..=max_search_limit`.
    pub fn effective_limit(&self, limit: Option<i64>) -> usize {
        match limit {
            None => self.search_default_limit,
            Some(n) => n.clamp(1, self.max_search_limit as i64) as usize,
        }
    }

    /// Makes the model directory absolute against `base` (the config
    /// file's directory).
    pub fn resolve_relative_to(&mut self, base: &std::path::Path) {
        if let Some(embeddings) = &mut self.embeddings {
            embeddings.model = quiver_config::paths::absolute(base, &embeddings.model);
        }
    }

    /// A key covering every setting that changes what a catalog holds.
    pub fn catalog_key(&self) -> String {
        self.eager.join("\u{1f}")
    }
}

impl Default for ToolSearchConfig {
    fn default() -> Self {
        ToolSearchConfig {
            enabled: Switch::Auto,
            threshold_pct: THRESHOLD_PCT.default_int() as u32,
            search_default_limit: SEARCH_DEFAULT_LIMIT.default_int() as usize,
            max_search_limit: MAX_SEARCH_LIMIT.default_int() as usize,
            max_query_chars: MAX_QUERY_CHARS.default_int() as usize,
            max_query_words: MAX_QUERY_WORDS.default_int() as usize,
            listing: Switch::Auto,
            listing_max_tokens: LISTING_MAX_TOKENS.default_int() as u64,
            eager: Vec::new(),
            eager_set: GlobSet::empty(),
            mode: SearchMode::Enhanced,
            embeddings: None,
        }
    }
}

/// The keys of `tools.tool_search`, described once (see `quiver_config::setting`).
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "tools.tool_search",
        kind: Kind::Table { or_bool: true },
        default: DefaultValue::Bool(true),
        doc: "`true` is `{enabled: auto}`, `false` is `{enabled: off}`",
    },
    Setting {
        key: "tools.tool_search.enabled",
        kind: Kind::Enum(&["auto", "on", "off"]),
        default: DefaultValue::Str("auto"),
        doc: "`auto`: the bridge appears when a deferrable tool is in scope; `on`: the bridge is always there, so the tools array keeps its shape as plugins and servers come and go; `off`: every tool is sent eagerly (tier 0)",
    },
    Setting::int(
        "tools.tool_search.threshold_pct",
        0,
        100,
        5,
        "share of the session's context the listing may use",
    ),
    Setting::int(
        "tools.tool_search.search_default_limit",
        1,
        50,
        5,
        "matches `tool_search` returns without `limit` (at most `max_search_limit`)",
    ),
    Setting::int(
        "tools.tool_search.max_search_limit",
        1,
        50,
        20,
        "largest `limit` honoured; larger ones are clamped",
    ),
    Setting::int(
        "tools.tool_search.max_query_chars",
        16,
        100000,
        2000,
        "a query is searched up to this many characters, cut after the last whole word that fits, and the answer says so (which repeats only a long query's first characters)",
    ),
    Setting::int(
        "tools.tool_search.max_query_words",
        1,
        10000,
        256,
        "a query is searched up to this many distinct words (repeats do not count), cut there, and the answer says so",
    ),
    Setting {
        key: "tools.tool_search.listing",
        kind: Kind::Enum(&["auto", "on", "off"]),
        default: DefaultValue::Str("auto"),
        doc: "`auto`: budget `min(threshold_pct% of context, listing_max_tokens)`; `on`: budget `listing_max_tokens` whatever the context; `off`: no listing, only the deferred count",
    },
    Setting::int(
        "tools.tool_search.listing_max_tokens",
        200,
        60000,
        20000,
        "hard cap on the listing",
    ),
    Setting {
        key: "tools.tool_search.eager",
        kind: Kind::List("a list of tool-name globs, e.g. [\"mcp_github_*\", \"echo\"]"),
        default: DefaultValue::List(&[]),
        doc: "tool names never deferred (e.g. `[\"mcp_github_*\"]`)",
    },
    Setting {
        key: "tools.tool_search.mode",
        kind: Kind::Enum(&["classic", "enhanced"]),
        default: DefaultValue::Str("enhanced"),
        doc: "retrieval algorithm. `classic`: BM25 (k1 1.5, b 0.75) over name, description and parameter names, with a name-substring fallback. `enhanced`: BM25F over the tool name (weight 3), server name, description and parameter names and descriptions, with camelCase splitting, English stemming, stop words, Chinese/Japanese/Korean character pairs, a small table of tool-vocabulary synonyms (`find`/`search`, `md`/`markdown`, …), compound splitting and typo tolerance for unknown terms, a name-bigram bonus, terms matching the longer or shorter words they begin (five letters or more), the server's description as context (a catalog's, or a live MCP server's title, description and `instructions`), one result per operation (entries of one server making the same call, a catalog's `api_call`), an exact-name pre-pass (a query holding a tool's exact name ranks it first), prerequisites as a score (the tool that gives a result's required `token` or `libraryId`, its server's `GetUserToken` or `resolve-library-id`, scores 0.99 of that result's score, so it ranks just below it unless something scores more) and `server:NAME` filters. Scores per query set: [docs/RETRIEVAL.md](docs/RETRIEVAL.md)",
    },
    Setting {
        key: "tools.tool_search.embeddings",
        kind: Kind::Table { or_bool: false },
        default: DefaultValue::None,
        doc: "semantic retrieval: a local sentence-transformers BERT model whose cosine similarities are fused with the enhanced mode's scores (needs `mode: enhanced`). Off when absent: the lexical search is unchanged. Tools are embedded in the background (a search uses a tool's vector once it is ready) and cached in the state directory. See [docs/RETRIEVAL.md](docs/RETRIEVAL.md)",
    },
    Setting {
        key: "tools.tool_search.embeddings.model",
        kind: Kind::Text(
            "a directory holding a sentence-transformers BERT model: config.json, tokenizer.json, model.safetensors and its 1_Pooling config (relative to the config file)",
        ),
        default: DefaultValue::Required,
        doc: "the model, e.g. all-MiniLM-L6-v2 (how to get it: docs/RETRIEVAL.md)",
    },
    Setting {
        key: "tools.tool_search.embeddings.weight",
        kind: Kind::Text("a number from 0 to 1"),
        default: DefaultValue::Described("1.0"),
        doc: "weight of the normalised similarity in the fused score (the lexical score has the rest), scaled by (1 - the share of the query's words the best lexical match already explains) to the power 2.6, with each lexical score's share of the best raised to the power 1.4; one weight for every catalog (docs/RETRIEVAL.md, Fusion)",
    },
    Setting {
        key: "tools.tool_search.embeddings.max_tokens",
        kind: Kind::Integer {
            min: 8,
            max: 512,
            below: quiver_config::Below::Error,
        },
        default: DefaultValue::Described("the model's own limit (256 for all-MiniLM-L6-v2)"),
        doc: "tokens embedded per text at most; longer tool texts are cut",
    },
    Setting {
        key: "tools.tool_search.embeddings.threads",
        kind: Kind::Integer {
            min: 1,
            max: 256,
            below: quiver_config::Below::Error,
        },
        default: DefaultValue::Described("half the cores, at least 1"),
        doc: "inference threads for embedding tools in the background, so that it leaves cores to the daemon; a search embeds its query on every core",
    },
    Setting {
        key: "tools.tool_search.embeddings.readiness_waits",
        kind: Kind::Bool,
        default: DefaultValue::Bool(false),
        doc: "`true`: the daemon's `GET /readyz` answers `503 not_ready` until every tool's vector is ready, so a load balancer sends no traffic while searches would still be lexical for some tools; `false`: ready once the tools are searchable, and a search uses each tool's vector as soon as it is ready (`tool_search` says which ran)",
    },
];

const EMBEDDINGS_MAX_TOKENS: &Setting = by_key(SETTINGS, "tools.tool_search.embeddings.max_tokens");
const EMBEDDINGS_THREADS: &Setting = by_key(SETTINGS, "tools.tool_search.embeddings.threads");
const THRESHOLD_PCT: &Setting = by_key(SETTINGS, "tools.tool_search.threshold_pct");
const SEARCH_DEFAULT_LIMIT: &Setting = by_key(SETTINGS, "tools.tool_search.search_default_limit");
const MAX_SEARCH_LIMIT: &Setting = by_key(SETTINGS, "tools.tool_search.max_search_limit");
const MAX_QUERY_CHARS: &Setting = by_key(SETTINGS, "tools.tool_search.max_query_chars");
const MAX_QUERY_WORDS: &Setting = by_key(SETTINGS, "tools.tool_search.max_query_words");
const LISTING_MAX_TOKENS: &Setting = by_key(SETTINGS, "tools.tool_search.listing_max_tokens");

/// What a `tools...` key accepts (from [`SETTINGS`]); `None` for keys
/// of other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    if key != "tools" && !key.starts_with("tools.") {
        return None;
    }
    quiver_config::setting::allowed_in(SETTINGS, key)
}

fn allowed(key: &str) -> String {
    allowed_for(key).unwrap_or_default()
}

/// `tools.tool_search` as written: `true`, `false` or a map.
#[derive(Debug)]
pub enum RawToolSearchSetting {
    /// `true` or `false`.
    Bool(bool),
    /// A map of keys.
    Map(Box<RawToolSearch>),
}

/// The `tools.tool_search` map as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawToolSearch {
    enabled: Option<Switch>,
    threshold_pct: Option<Spanned<i64>>,
    search_default_limit: Option<Spanned<i64>>,
    max_search_limit: Option<Spanned<i64>>,
    max_query_chars: Option<Spanned<i64>>,
    max_query_words: Option<Spanned<i64>>,
    listing: Option<Switch>,
    listing_max_tokens: Option<Spanned<i64>>,
    eager: Option<Vec<Spanned<String>>>,
    mode: Option<SearchMode>,
    embeddings: Option<Spanned<RawEmbeddings>>,
}

/// The `tools.tool_search.embeddings` map as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEmbeddings {
    model: Spanned<String>,
    weight: Option<Spanned<f64>>,
    max_tokens: Option<Spanned<i64>>,
    threads: Option<Spanned<i64>>,
    readiness_waits: Option<bool>,
}

fn validate_embeddings(
    raw: Spanned<RawEmbeddings>,
    mode: SearchMode,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<EmbeddingsConfig, ConfigError> {
    let key = "tools.tool_search.embeddings";
    if mode != SearchMode::Enhanced {
        return Err(quiver_config::invalid_at(
            file,
            &raw,
            key.into(),
            "the embedding stage is fused with the enhanced search; it needs `mode: enhanced`"
                .into(),
            allowed(key),
        ));
    }
    let raw = raw.value;
    if raw.model.value.trim().is_empty() {
        return Err(quiver_config::invalid_at(
            file,
            &raw.model,
            format!("{key}.model"),
            "empty model directory".into(),
            allowed("tools.tool_search.embeddings.model"),
        ));
    }
    let weight = match &raw.weight {
        None => DEFAULT_EMBEDDING_WEIGHT,
        Some(w) if (0.0..=1.0).contains(&w.value) => w.value,
        Some(w) => {
            return Err(quiver_config::invalid_at(
                file,
                w,
                format!("{key}.weight"),
                format!("{} is not from 0 to 1", w.value),
                allowed("tools.tool_search.embeddings.weight"),
            ));
        }
    };
    let optional = |value: &Option<Spanned<i64>>,
                    setting: &Setting,
                    warnings: &mut Vec<ConfigWarning>|
     -> Result<Option<usize>, ConfigError> {
        match value {
            None => Ok(None),
            Some(_) => {
                int_setting(value, setting, setting.key, file, warnings).map(|n| Some(n as usize))
            }
        }
    };
    Ok(EmbeddingsConfig {
        model: PathBuf::from(raw.model.value),
        weight,
        max_tokens: optional(&raw.max_tokens, EMBEDDINGS_MAX_TOKENS, warnings)?,
        threads: optional(&raw.threads, EMBEDDINGS_THREADS, warnings)?,
        readiness_waits: raw.readiness_waits.unwrap_or(false),
    })
}

impl<'de> Deserialize<'de> for RawToolSearchSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SettingVisitor;
        impl<'de> serde::de::Visitor<'de> for SettingVisitor {
            type Value = RawToolSearchSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false or a map")
            }
            fn visit_bool<E>(self, value: bool) -> Result<Self::Value, E> {
                Ok(RawToolSearchSetting::Bool(value))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                RawToolSearch::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|map| RawToolSearchSetting::Map(Box::new(map)))
            }
        }
        deserializer.deserialize_any(SettingVisitor)
    }
}

/// Validates `tools.tool_search` (absent: the defaults; `false`: off).
pub fn validate_tool_search(
    raw: Option<RawToolSearchSetting>,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<ToolSearchConfig, ConfigError> {
    let defaults = ToolSearchConfig::default();
    let raw_search = match raw {
        None | Some(RawToolSearchSetting::Bool(true)) => RawToolSearch::default(),
        Some(RawToolSearchSetting::Bool(false)) => RawToolSearch {
            enabled: Some(Switch::Off),
            ..RawToolSearch::default()
        },
        Some(RawToolSearchSetting::Map(map)) => *map,
    };
    let threshold_pct = int_setting(
        &raw_search.threshold_pct,
        THRESHOLD_PCT,
        THRESHOLD_PCT.key,
        file,
        warnings,
    )?;
    let max_search_limit = int_setting(
        &raw_search.max_search_limit,
        MAX_SEARCH_LIMIT,
        MAX_SEARCH_LIMIT.key,
        file,
        warnings,
    )?;
    // The default limit's range ends at the maximum given.
    let search_default_limit = quiver_config::clamp(
        &raw_search.search_default_limit,
        SEARCH_DEFAULT_LIMIT.key,
        (SEARCH_DEFAULT_LIMIT.range().0, max_search_limit),
        SEARCH_DEFAULT_LIMIT.default_int().min(max_search_limit),
        file,
        warnings,
    );
    let max_query_chars = int_setting(
        &raw_search.max_query_chars,
        MAX_QUERY_CHARS,
        MAX_QUERY_CHARS.key,
        file,
        warnings,
    )?;
    let max_query_words = int_setting(
        &raw_search.max_query_words,
        MAX_QUERY_WORDS,
        MAX_QUERY_WORDS.key,
        file,
        warnings,
    )?;
    let listing_max_tokens = int_setting(
        &raw_search.listing_max_tokens,
        LISTING_MAX_TOKENS,
        LISTING_MAX_TOKENS.key,
        file,
        warnings,
    )?;
    let mut eager = Vec::new();
    let mut builder = GlobSetBuilder::new();
    for (index, pattern) in raw_search.eager.unwrap_or_default().into_iter().enumerate() {
        let glob = Glob::new(&pattern.value).map_err(|e| ConfigError::Invalid {
            file: file.to_owned(),
            line: pattern.referenced.line() as u32,
            column: pattern.referenced.column() as u32,
            key: format!("tools.tool_search.eager[{index}]"),
            message: format!("`{}` is not a valid glob: {}", pattern.value, e.kind()),
            allowed: allowed("tools.tool_search.eager"),
        })?;
        builder.add(glob);
        eager.push(pattern.value);
    }
    let eager_set = builder.build().map_err(|e| ConfigError::Invalid {
        file: file.to_owned(),
        line: 0,
        column: 0,
        key: "tools.tool_search.eager".into(),
        message: e.to_string(),
        allowed: allowed("tools.tool_search.eager"),
    })?;
    let mode = raw_search.mode.unwrap_or(defaults.mode);
    let embeddings = match raw_search.embeddings {
        Some(raw) => Some(validate_embeddings(raw, mode, file, warnings)?),
        None => None,
    };
    Ok(ToolSearchConfig {
        enabled: raw_search.enabled.unwrap_or(defaults.enabled),
        threshold_pct: threshold_pct as u32,
        search_default_limit: search_default_limit as usize,
        max_search_limit: max_search_limit as usize,
        max_query_chars: max_query_chars as usize,
        max_query_words: max_query_words as usize,
        listing: raw_search.listing.unwrap_or(defaults.listing),
        listing_max_tokens: listing_max_tokens as u64,
        eager,
        eager_set,
        mode,
        embeddings,
    })
}

/// The `tools.tool_search` settings of a whole `quiver.yaml` text that has
/// only a `tools` section: what the catalog's own tests configure with.
#[cfg(test)]
pub(crate) fn from_yaml(text: &str) -> ToolSearchConfig {
    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Root {
        tools: Option<Tools>,
    }
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Tools {
        tool_search: Option<RawToolSearchSetting>,
    }
    let root: Root = match quiver_config::read_document(text, "q.yaml", allowed) {
        Ok(root) => root,
        Err(error) => panic!("{error}"),
    };
    match validate_tool_search(
        root.tools.and_then(|t| t.tool_search),
        "q.yaml",
        &mut Vec::new(),
    ) {
        Ok(config) => config,
        Err(error) => panic!("{error}"),
    }
}

#[cfg(test)]
mod tests {
    use quiver_search::enhanced::{COVERAGE_EXPONENT, LEXICAL_EXPONENT, PREREQUISITE_SHARE};

    use super::*;

    /// The help states the constants the search really uses (issue 40
    /// found it still naming an exponent of 3 long after it changed): a
    /// changed constant fails here until its help is rewritten.
    #[test]
    fn the_help_states_the_search_constants() {
        let weight = by_key(SETTINGS, "tools.tool_search.embeddings.weight").doc;
        for wanted in [
            format!("to the power {COVERAGE_EXPONENT}"),
            format!("raised to the power {LEXICAL_EXPONENT}"),
        ] {
            assert!(weight.contains(&wanted), "{wanted:?} not in {weight:?}");
        }
        let mode = by_key(SETTINGS, "tools.tool_search.mode").doc;
        let share = format!("scores {PREREQUISITE_SHARE} of that result's score");
        assert!(mode.contains(&share), "{share:?} not in {mode:?}");
    }
}
