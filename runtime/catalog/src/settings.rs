//! The `tools.tool_search` section of `quiver.yaml`: its raw shape (a
//! switch or a map), what each key allows, and the validated
//! [`ToolSearchConfig`] that the catalog, listing and bridge read.

use std::fmt;

use globset::{Glob, GlobSet, GlobSetBuilder};
use quiver_config::{ConfigError, ConfigWarning, IntKey, Spanned, Switch, clamp};
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
}

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

    /// A key covering every setting that changes what a catalog holds.
    pub fn catalog_key(&self) -> String {
        self.eager.join("\u{1f}")
    }
}

impl Default for ToolSearchConfig {
    fn default() -> Self {
        ToolSearchConfig {
            enabled: Switch::Auto,
            threshold_pct: 5,
            search_default_limit: 5,
            max_search_limit: 20,
            listing: Switch::Auto,
            listing_max_tokens: 20_000,
            eager: Vec::new(),
            eager_set: GlobSet::empty(),
            mode: SearchMode::Enhanced,
        }
    }
}

const THRESHOLD_PCT: IntKey = IntKey {
    key: "tools.tool_search.threshold_pct",
    min: 0,
    max: 100,
};
const MAX_SEARCH_LIMIT: IntKey = IntKey {
    key: "tools.tool_search.max_search_limit",
    min: 1,
    max: 50,
};
const LISTING_MAX_TOKENS: IntKey = IntKey {
    key: "tools.tool_search.listing_max_tokens",
    min: 200,
    max: 60_000,
};
const SEARCH_DEFAULT_LIMIT: &str = "tools.tool_search.search_default_limit";

const TOOL_SEARCH_KEYS: &str = "enabled, threshold_pct, search_default_limit, max_search_limit, listing, listing_max_tokens, eager, mode";

/// What a `tools...` key accepts; `None` for keys of other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    if key != "tools" && !key.starts_with("tools.") {
        return None;
    }
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    Some(match (key, leaf) {
        ("tools", _) => "a map with key tool_search".into(),
        ("tools.tool_search", _) => format!("true, false or a map with keys {TOOL_SEARCH_KEYS}"),
        (_, "enabled") | (_, "listing") => "auto, on, off".into(),
        (_, "mode") => "classic, enhanced".into(),
        (_, "threshold_pct") => "an integer from 0 to 100".into(),
        (_, "max_search_limit") => "an integer from 1 to 50".into(),
        (_, "search_default_limit") => "an integer from 1 to max_search_limit".into(),
        (_, "listing_max_tokens") => "an integer from 200 to 60000".into(),
        (_, "eager") => "a list of tool-name globs, e.g. [\"mcp_github_*\", \"echo\"]".into(),
        _ if key.starts_with("tools.tool_search") => format!("keys {TOOL_SEARCH_KEYS}"),
        _ if key.starts_with("tools") => "key tool_search".into(),
        _ => "keys tools".into(),
    })
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
    listing: Option<Switch>,
    listing_max_tokens: Option<Spanned<i64>>,
    eager: Option<Vec<Spanned<String>>>,
    mode: Option<SearchMode>,
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
    let threshold_pct = clamp(
        &raw_search.threshold_pct,
        THRESHOLD_PCT.key,
        (THRESHOLD_PCT.min, THRESHOLD_PCT.max),
        defaults.threshold_pct as i64,
        file,
        warnings,
    );
    let max_search_limit = clamp(
        &raw_search.max_search_limit,
        MAX_SEARCH_LIMIT.key,
        (MAX_SEARCH_LIMIT.min, MAX_SEARCH_LIMIT.max),
        defaults.max_search_limit as i64,
        file,
        warnings,
    );
    let search_default_limit = clamp(
        &raw_search.search_default_limit,
        SEARCH_DEFAULT_LIMIT,
        (1, max_search_limit),
        (defaults.search_default_limit as i64).min(max_search_limit),
        file,
        warnings,
    );
    let listing_max_tokens = clamp(
        &raw_search.listing_max_tokens,
        LISTING_MAX_TOKENS.key,
        (LISTING_MAX_TOKENS.min, LISTING_MAX_TOKENS.max),
        defaults.listing_max_tokens as i64,
        file,
        warnings,
    );
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
    Ok(ToolSearchConfig {
        enabled: raw_search.enabled.unwrap_or(defaults.enabled),
        threshold_pct: threshold_pct as u32,
        search_default_limit: search_default_limit as usize,
        max_search_limit: max_search_limit as usize,
        listing: raw_search.listing.unwrap_or(defaults.listing),
        listing_max_tokens: listing_max_tokens as u64,
        eager,
        eager_set,
        mode: raw_search.mode.unwrap_or(defaults.mode),
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
