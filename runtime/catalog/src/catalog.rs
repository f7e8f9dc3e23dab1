//! The per-assembly catalog: which in-scope tools are sent eagerly and which
//! are deferred behind the bridge, grouped per server or plugin.
//!
//! A catalog is derived from a registry snapshot, a scope and the `eager`
//! globs, and from nothing else, so it can be rebuilt on every assembly (or
//! cached under exactly that key) and can never drift from the live tools.

use std::sync::{Arc, OnceLock};

use crate::settings::{SearchMode, ToolSearchConfig};
use quiver_search::classic::{Scored, SearchIndex};
use quiver_search::enhanced::EnhancedIndex;
use quiver_tool::registry::RegistrySnapshot;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{Tool, ToolSource};

/// The deferred tools of one server or plugin, sorted by name.
#[derive(Debug)]
pub struct CatalogGroup {
    source: ToolSource,
    tools: Vec<Arc<Tool>>,
    totals: GroupTotals,
    description: Option<Arc<str>>,
}

/// Character totals over a group's tools, summed once when the catalog is
/// built so that choosing listing forms does not walk every tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupTotals {
    /// Sum of the tools' name lengths.
    pub name_chars: u64,
    /// Sum of the tools' short-description lengths.
    pub short_description_chars: u64,
    /// Tools with a non-empty short description.
    pub described: u64,
    /// Sum of the tools' function-definition lengths.
    pub definition_chars: u64,
}

impl GroupTotals {
    fn add(&mut self, tool: &Tool) {
        self.name_chars += tool.name_chars() as u64;
        let short = tool.short_description_chars() as u64;
        self.short_description_chars += short;
        self.described += u64::from(short > 0);
        self.definition_chars += tool.definition_chars() as u64;
    }
}

impl CatalogGroup {
    /// The server or plugin name.
    pub fn name(&self) -> &str {
        self.source.group().unwrap_or("core")
    }

    /// The source (plugin or MCP server).
    pub fn source(&self) -> &ToolSource {
        &self.source
    }

    /// The deferred tools, sorted by exposed name.
    pub fn tools(&self) -> &[Arc<Tool>] {
        &self.tools
    }

    /// Character totals over the tools.
    pub fn totals(&self) -> GroupTotals {
        self.totals
    }

    /// What the server or plugin says it is for, if it said.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
}

/// Eager and deferred tools of one session at one registry generation.
#[derive(Debug)]
pub struct Catalog {
    generation: u64,
    eager: Vec<Arc<Tool>>,
    groups: Vec<CatalogGroup>,
    deferred_count: usize,
    deferred_definition_chars: u64,
    mode: SearchMode,
    index: OnceLock<Retriever>,
}

/// The index behind `tool_search`, of the configured mode.
#[derive(Debug)]
pub enum Retriever {
    /// BM25 (mode `classic`).
    Classic(SearchIndex),
    /// BM25F with analysis (mode `enhanced`); boxed, it is much larger.
    Enhanced(Box<EnhancedIndex>),
}

impl Retriever {
    /// Indexes the tools of `groups` for `mode` (the enhanced mode also
    /// matches each group's description).
    pub fn build(mode: SearchMode, groups: &[CatalogGroup]) -> Retriever {
        match mode {
            SearchMode::Classic => {
                Retriever::Classic(SearchIndex::build(groups.iter().flat_map(|g| &g.tools)))
            }
            SearchMode::Enhanced => Retriever::Enhanced(Box::new(EnhancedIndex::build_described(
                groups.iter().map(|g| (g.description(), g.tools.as_slice())),
            ))),
        }
    }

    /// The best `limit` tools for `query`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Scored> {
        match self {
            Retriever::Classic(index) => index.search(query, limit),
            Retriever::Enhanced(index) => index.search(query, limit),
        }
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        match self {
            Retriever::Classic(index) => index.len(),
            Retriever::Enhanced(index) => index.len(),
        }
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Catalog {
    /// Classifies the in-scope tools of `snapshot`. Core tools and `eager`
    /// matches are eager; plugin and MCP tools are deferred, unless
    /// `defer` is false, in which case every tool is eager.
    pub fn build(
        snapshot: &RegistrySnapshot,
        scope: &Scope,
        config: &ToolSearchConfig,
        defer: bool,
    ) -> Catalog {
        let mut eager = Vec::new();
        let mut groups: Vec<CatalogGroup> = Vec::new();
        for group in snapshot.groups() {
            let source = group.source();
            // Deciding per toolset first keeps the per-tool glob matching off
            // the common path (a fully granted server with no eager globs).
            let whole_group = scope.allows_toolset(&source.toolset());
            let mut deferred = Vec::new();
            let mut totals = GroupTotals::default();
            for tool in group.tools() {
                if !whole_group && !scope.allows(tool) {
                    continue;
                }
                if !defer || !source.is_deferrable() || config.is_eager(tool.name()) {
                    eager.push(tool.clone());
                } else {
                    totals.add(tool);
                    deferred.push(tool.clone());
                }
            }
            if !deferred.is_empty() {
                groups.push(CatalogGroup {
                    source: source.clone(),
                    tools: deferred,
                    totals,
                    description: group.description().cloned(),
                });
            }
        }
        eager.sort_by(|a, b| a.name().cmp(b.name()));
        groups.sort_by(|a, b| (a.name(), a.source.kind()).cmp(&(b.name(), b.source.kind())));
        let deferred_count = groups.iter().map(|g| g.tools.len()).sum();
        let deferred_definition_chars = groups.iter().map(|g| g.totals.definition_chars).sum();
        Catalog {
            generation: snapshot.generation(),
            eager,
            groups,
            deferred_count,
            deferred_definition_chars,
            mode: config.mode,
            index: OnceLock::new(),
        }
    }

    /// The registry generation this catalog was built from.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Tools sent to the model with their full schema, sorted by name.
    pub fn eager(&self) -> &[Arc<Tool>] {
        &self.eager
    }

    /// Deferred tools per server or plugin, sorted by group name.
    pub fn groups(&self) -> &[CatalogGroup] {
        &self.groups
    }

    /// Number of deferred tools.
    pub fn deferred_count(&self) -> usize {
        self.deferred_count
    }

    /// Characters of every deferred tool's function definition, summed.
    pub fn deferred_definition_chars(&self) -> u64 {
        self.deferred_definition_chars
    }

    /// Deferred tools in catalog order (group by group, name by name).
    pub fn deferred(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.groups.iter().flat_map(|g| g.tools.iter())
    }

    /// Every in-scope tool, eager or deferred.
    pub fn in_scope(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.eager.iter().chain(self.deferred())
    }

    /// Finds an in-scope tool by its exact exposed name.
    pub fn find(&self, name: &str) -> Option<&Arc<Tool>> {
        if let Ok(i) = self.eager.binary_search_by(|t| t.name().cmp(name)) {
            return self.eager.get(i);
        }
        self.groups.iter().find_map(|g| {
            g.tools
                .binary_search_by(|t| t.name().cmp(name))
                .ok()
                .and_then(|i| g.tools.get(i))
        })
    }

    /// Whether `name` is an eager tool of this catalog.
    pub fn is_eager(&self, name: &str) -> bool {
        self.eager.binary_search_by(|t| t.name().cmp(name)).is_ok()
    }

    /// The search index over the deferred tools, built on first use.
    pub fn index(&self) -> &Retriever {
        self.index
            .get_or_init(|| Retriever::build(self.mode, &self.groups))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use quiver_tool::registry::ToolRegistry;
    use quiver_tool::tool::ToolSpec;
    use serde_json::json;

    fn registry() -> ToolRegistry {
        let registry = ToolRegistry::new();
        let spec = |n: &str| ToolSpec::new(n, "", json!({"type": "object"}));
        registry.set_source_tools(ToolSource::Core, vec![spec("read_file")]);
        registry.set_source_tools(
            ToolSource::Plugin("text".into()),
            vec![spec("b64"), spec("hash")],
        );
        registry.set_source_tools(
            ToolSource::Mcp("github".into()),
            vec![spec("issue"), spec("pr")],
        );
        registry
    }

    #[test]
    fn core_is_eager_and_sources_are_deferred_per_group() {
        let snapshot = registry().snapshot();
        let config = ToolSearchConfig::default();
        let catalog = Catalog::build(&snapshot, &Scope::all(), &config, true);
        let eager: Vec<_> = catalog.eager().iter().map(|t| t.name()).collect();
        assert_eq!(eager, ["read_file"]);
        let groups: Vec<_> = catalog
            .groups()
            .iter()
            .map(|g| (g.name(), g.tools().len()))
            .collect();
        assert_eq!(groups, [("github", 2), ("text", 2)]);
        assert_eq!(catalog.deferred_count(), 4);
    }

    #[test]
    fn groups_carry_their_source_description() {
        let registry = registry();
        registry.set_descriptions([(
            ToolSource::Mcp("github".into()),
            "Issues and pull requests".to_owned(),
        )]);
        let catalog = Catalog::build(
            &registry.snapshot(),
            &Scope::all(),
            &ToolSearchConfig::default(),
            true,
        );
        let described: Vec<_> = catalog
            .groups()
            .iter()
            .map(|g| (g.name(), g.description()))
            .collect();
        assert_eq!(
            described,
            [("github", Some("Issues and pull requests")), ("text", None)]
        );
    }

    #[test]
    fn eager_globs_keep_tools_out_of_the_catalog() {
        let snapshot = registry().snapshot();
        let config =
            crate::settings::from_yaml("tools:\n  tool_search:\n    eager: [\"mcp_github_*\"]\n");
        let catalog = Catalog::build(&snapshot, &Scope::all(), &config, true);
        let eager: Vec<_> = catalog.eager().iter().map(|t| t.name()).collect();
        assert_eq!(eager, ["mcp_github_issue", "mcp_github_pr", "read_file"]);
        assert_eq!(catalog.deferred_count(), 2);
    }

    #[test]
    fn scope_limits_what_the_catalog_holds() {
        let snapshot = registry().snapshot();
        let scope = Scope::new(["core", "mcp_github_pr"]).unwrap();
        let catalog = Catalog::build(&snapshot, &scope, &ToolSearchConfig::default(), true);
        let names: Vec<_> = catalog.in_scope().map(|t| t.name()).collect();
        assert_eq!(names, ["read_file", "mcp_github_pr"]);
        assert!(catalog.find("b64").is_none());
        assert!(catalog.find("mcp_github_pr").is_some());
    }

    #[test]
    fn no_deferral_makes_everything_eager() {
        let snapshot = registry().snapshot();
        let catalog = Catalog::build(
            &snapshot,
            &Scope::all(),
            &ToolSearchConfig::default(),
            false,
        );
        assert_eq!(catalog.eager().len(), 5);
        assert_eq!(catalog.deferred_count(), 0);
    }
}
