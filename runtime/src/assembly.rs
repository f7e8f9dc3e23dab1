//! Per-turn assembly: from the live registry, a session's scope and its
//! context size, the exact tools array sent to the model, decided afresh
//! every time.
//!
//! - Tier 0: nothing is deferred (no deferrable tool in scope, or
//!   `enabled: off`): every in-scope tool is sent with its schema.
//! - Tier 1: eager tools, then the bridge, with the deferred catalog listed
//!   per server in the `tool_search` description.
//! - Tier 2: eager tools and the bridge, with one summary line per server
//!   (as many as fit), when not even one server can be listed per tool.
//!
//! The same tools and scope always give a byte-identical array, whatever
//! order sources registered in, so provider prompt caches keep hitting.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::{Value, json};

use crate::bridge::{self, TOOL_CALL, TOOL_DESCRIBE, TOOL_SEARCH};
use crate::catalog::Catalog;
use crate::config::{Switch, ToolSearchConfig};
use crate::listing::{self, Listing, ListingForm};
use crate::registry::RegistrySnapshot;
use crate::scope::Scope;
use crate::search::Scored;
use crate::tokens;
use crate::tool::function_definition;

/// How much of the catalog the model sees directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// Everything eager, no bridge.
    Eager = 0,
    /// Bridge plus a per-tool listing of at least one server.
    Listed = 1,
    /// Bridge plus server summary lines only.
    Summarised = 2,
}

impl Serialize for Tier {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u8(*self as u8)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CatalogKey {
    registry_id: u64,
    generation: u64,
    scope: String,
    defer: bool,
}

/// Default number of catalogs kept by an [`Assembler`].
pub const DEFAULT_CATALOG_CACHE: usize = 32;

/// Builds assemblies under one tool-search configuration.
///
/// Catalogs (and their search indexes) are cached under the registry
/// generation, the scope and the deferral switch: everything they are
/// derived from, so a change to any of them is seen on the next assembly.
pub struct Assembler {
    config: Arc<ToolSearchConfig>,
    cache_capacity: usize,
    cache: Mutex<VecDeque<(CatalogKey, Arc<Catalog>)>>,
}

impl Assembler {
    /// An assembler with the default catalog cache.
    pub fn new(config: ToolSearchConfig) -> Assembler {
        Assembler::with_cache_capacity(config, DEFAULT_CATALOG_CACHE)
    }

    /// An assembler keeping at most `capacity` catalogs (0: rebuild every time).
    pub fn with_cache_capacity(config: ToolSearchConfig, capacity: usize) -> Assembler {
        Assembler {
            config: Arc::new(config),
            cache_capacity: capacity,
            cache: Mutex::new(VecDeque::new()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ToolSearchConfig {
        &self.config
    }

    fn catalog(&self, snapshot: &RegistrySnapshot, scope: &Scope, defer: bool) -> Arc<Catalog> {
        if self.cache_capacity == 0 {
            return Arc::new(Catalog::build(snapshot, scope, &self.config, defer));
        }
        let key = CatalogKey {
            registry_id: snapshot.registry_id(),
            generation: snapshot.generation(),
            scope: scope.cache_key(),
            defer,
        };
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = cache
            .iter()
            .position(|(k, _)| *k == key)
            .and_then(|position| cache.remove(position))
        {
            let catalog = entry.1.clone();
            cache.push_front(entry);
            return catalog;
        }
        let catalog = Arc::new(Catalog::build(snapshot, scope, &self.config, defer));
        cache.push_front((key, catalog.clone()));
        cache.truncate(self.cache_capacity);
        catalog
    }

    /// The listing budget for a session with `context_tokens` of context.
    pub fn budget_tokens(&self, context_tokens: u64) -> u64 {
        let by_share = context_tokens.saturating_mul(self.config.threshold_pct as u64) / 100;
        match self.config.listing {
            Switch::On => self.config.listing_max_tokens,
            Switch::Auto | Switch::Off => by_share.min(self.config.listing_max_tokens),
        }
    }

    /// Assembles what the model sees this turn.
    pub fn assemble(
        &self,
        snapshot: &Arc<RegistrySnapshot>,
        scope: &Scope,
        context_tokens: u64,
    ) -> Assembly {
        let defer = self.config.enabled != Switch::Off;
        let catalog = self.catalog(snapshot, scope, defer);
        let budget_tokens = self.budget_tokens(context_tokens);
        let bridge = match self.config.enabled {
            Switch::Off => false,
            Switch::On => true,
            Switch::Auto => catalog.deferred_count() > 0,
        };
        let mut tools: Vec<Value> = catalog.eager().iter().map(|t| t.definition()).collect();
        let deferred_chars: u64 = catalog
            .deferred()
            .map(|t| t.definition_chars() as u64)
            .sum();
        let (tier, listing, search_description) = if !bridge {
            (
                Tier::Eager,
                Listing::empty(&catalog, ListingForm::None),
                None,
            )
        } else {
            let listing = if self.config.listing == Switch::Off {
                Listing::empty(&catalog, ListingForm::Off)
            } else {
                listing::plan(&catalog, budget_tokens)
            };
            let tier = if listing.lists_tools() {
                Tier::Listed
            } else {
                Tier::Summarised
            };
            let description = search_description(&catalog, &listing);
            tools.push(function_definition(
                TOOL_SEARCH,
                &description,
                &bridge::search_schema(
                    self.config.search_default_limit,
                    self.config.max_search_limit,
                ),
            ));
            tools.push(function_definition(
                TOOL_DESCRIBE,
                DESCRIBE_DESCRIPTION,
                &bridge::describe_schema(),
            ));
            tools.push(function_definition(
                TOOL_CALL,
                CALL_DESCRIPTION,
                &bridge::call_schema(),
            ));
            (tier, listing, Some(description))
        };
        Assembly {
            snapshot: snapshot.clone(),
            catalog,
            config: self.config.clone(),
            tier,
            listing,
            budget_tokens,
            deferred_tokens: tokens::tokens_for_chars(deferred_chars),
            tools,
            search_description,
        }
    }
}

const DESCRIBE_DESCRIPTION: &str = "Return the full description and JSON input schema of a tool found with tool_search or named in its listing.";
const CALL_DESCRIPTION: &str = "Call a tool found with tool_search or named in its listing, by exact name, with arguments matching its schema (see tool_describe).";

fn search_description(catalog: &Catalog, listing: &Listing) -> String {
    let n = catalog.deferred_count();
    let servers = catalog.groups().len();
    let mut text = format!(
        "Search {n} deferred {} from {servers} {} that are not in your tool list. Returns matching tool names with descriptions; then use tool_describe for a tool's schema and tool_call to run it.",
        if n == 1 { "tool" } else { "tools" },
        if servers == 1 { "server" } else { "servers" },
    );
    if !listing.text.is_empty() {
        text.push_str("\n\nDeferred tools by server:\n");
        text.push_str(&listing.text);
    }
    text
}

/// What the model sees on one turn, and the bridge handlers that act on it.
pub struct Assembly {
    snapshot: Arc<RegistrySnapshot>,
    catalog: Arc<Catalog>,
    config: Arc<ToolSearchConfig>,
    tier: Tier,
    listing: Listing,
    budget_tokens: u64,
    deferred_tokens: u64,
    tools: Vec<Value>,
    search_description: Option<String>,
}

impl Assembly {
    /// The tier.
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// The listing placed in the `tool_search` description.
    pub fn listing(&self) -> &Listing {
        &self.listing
    }

    /// The listing budget, in tokens.
    pub fn budget_tokens(&self) -> u64 {
        self.budget_tokens
    }

    /// Tokens the deferred tools' definitions would have cost.
    pub fn deferred_tokens(&self) -> u64 {
        self.deferred_tokens
    }

    /// The OpenAI-style tools array for the model.
    pub fn tools(&self) -> &[Value] {
        &self.tools
    }

    /// The catalog this assembly was built from.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The registry snapshot this assembly was built from.
    pub fn snapshot(&self) -> &RegistrySnapshot {
        &self.snapshot
    }

    /// The tool-search configuration.
    pub fn config(&self) -> &ToolSearchConfig {
        &self.config
    }

    /// Whether the bridge tools are in the tools array.
    pub fn has_bridge(&self) -> bool {
        self.search_description.is_some()
    }

    /// The schema of a bridge tool of this assembly.
    pub fn bridge_schema(&self, name: &str) -> Option<Value> {
        match name {
            TOOL_SEARCH => Some(bridge::search_schema(
                self.config.search_default_limit,
                self.config.max_search_limit,
            )),
            TOOL_DESCRIBE => Some(bridge::describe_schema()),
            TOOL_CALL => Some(bridge::call_schema()),
            _ => None,
        }
    }

    /// BM25 search of the deferred catalog; `limit` defaults to
    /// `search_default_limit` and is clamped to `1..=max_search_limit`.
    pub fn search(&self, query: &str, limit: Option<i64>) -> Vec<Scored> {
        self.catalog
            .index()
            .search(query, self.config.effective_limit(limit))
    }

    /// The assembly in the `quiver catalog assemble --json` shape.
    pub fn to_json(&self) -> Value {
        json!({
            "tier": self.tier,
            "listing_form": self.listing.form,
            "budget_tokens": self.budget_tokens,
            "listing_tokens": self.listing.tokens,
            "deferred_count": self.catalog.deferred_count(),
            "deferred_tokens": self.deferred_tokens,
            "servers": self.listing.groups,
            "tools": self.tools,
        })
    }
}
