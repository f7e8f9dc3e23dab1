//! The live tool registry: every source's current tools, named and checked,
//! published as immutable generation-numbered snapshots.
//!
//! Sources (core, each plugin, each MCP server) replace their whole tool list
//! at once. Each change publishes a new [`RegistrySnapshot`]; readers take an
//! `Arc` of the current one and never see a half-applied change.
//!
//! A snapshot is made of one shared group per source and a persistent name
//! map, so publishing a change to one source costs that source's tools, not
//! the registry's: unchanged groups are shared with the previous snapshot.
//! Only a change that touches a contested name (one two sources want)
//! rebuilds every source's naming, since who wins can then change anywhere.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::naming::{hashed_name, is_bridge_name, is_valid_plain_name, mcp_tool_name};
use crate::tool::{Tool, ToolSource, ToolSpec};

/// Why a source's tool was not registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefusalReason {
    /// The tool uses a bridge tool's reserved name.
    #[error("`{0}` is reserved for the tool-search bridge")]
    BridgeName(String),
    /// The same source lists the name twice.
    #[error("the source lists `{0}` more than once")]
    DuplicateInSource(String),
    /// Another source already registered this name.
    #[error("`{name}` is already registered by {owner}")]
    NameTaken {
        /// The contested name.
        name: String,
        /// `core`, `plugin-X` or `mcp-Y`.
        owner: String,
    },
    /// A core or plugin tool name outside `[A-Za-z0-9_-]{1,64}`.
    #[error("`{0}` is not a valid tool name: use 1 to 64 characters from [A-Za-z0-9_-]")]
    InvalidName(String),
}

/// A tool that a source offered and the registry refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedTool {
    /// The source that offered it.
    pub source: ToolSource,
    /// The name the source gave.
    pub name: String,
    /// Why it was refused.
    pub reason: RefusalReason,
}

/// An MCP tool whose natural `mcp_<server>_<tool>` name was taken and that
/// got a hashed name instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenamedTool {
    /// The MCP server.
    pub server: String,
    /// The tool's own name on that server.
    pub tool: String,
    /// The name it would have had.
    pub wanted: String,
    /// The name it got.
    pub exposed: String,
}

/// One source's registered tools, sorted by exposed name.
#[derive(Debug)]
pub struct SourceGroup {
    source: ToolSource,
    /// Shared with every catalog that holds the whole group, so building
    /// one costs a pointer per source, not one per tool.
    tools: Arc<[Arc<Tool>]>,
    description: Option<Arc<str>>,
}

impl SourceGroup {
    /// The source.
    pub fn source(&self) -> &ToolSource {
        &self.source
    }

    /// Its tools, sorted by exposed name.
    pub fn tools(&self) -> &[Arc<Tool>] {
        &self.tools
    }

    /// Its tools as the shared slice.
    pub fn shared_tools(&self) -> &Arc<[Arc<Tool>]> {
        &self.tools
    }

    /// What the source says it is for (see
    /// [`ToolRegistry::set_descriptions`]); searched, never sent.
    pub fn description(&self) -> Option<&Arc<str>> {
        self.description.as_ref()
    }
}

/// An immutable view of every registered tool at one generation.
#[derive(Debug, Default)]
pub struct RegistrySnapshot {
    registry_id: u64,
    generation: u64,
    /// Sorted by source.
    groups: Vec<Arc<SourceGroup>>,
    /// Exposed name → the source registering it.
    by_name: imbl::HashMap<String, ToolSource>,
    /// Grouped by source, in source order.
    refused: Vec<RefusedTool>,
    renamed: Vec<RenamedTool>,
}

impl RegistrySnapshot {
    /// Identifies the registry this snapshot came from (unique per process).
    pub fn registry_id(&self) -> u64 {
        self.registry_id
    }

    /// Increases by one with every change; caches key on it.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Source groups: core first, then plugins by name, then MCP servers by name.
    pub fn groups(&self) -> &[Arc<SourceGroup>] {
        &self.groups
    }

    /// Every registered tool, group by group.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.groups.iter().flat_map(|group| group.tools.iter())
    }

    /// Number of registered tools.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The tool exposed under exactly this name (no case folding, no trimming).
    pub fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        let source = self.by_name.get(name)?;
        let group = &self.groups[self.group_position(source).ok()?];
        let at = group.tools.binary_search_by(|t| t.name().cmp(name)).ok()?;
        group.tools.get(at)
    }

    /// The group of `source`, if it registered any tool.
    pub fn group(&self, source: &ToolSource) -> Option<&Arc<SourceGroup>> {
        Some(&self.groups[self.group_position(source).ok()?])
    }

    fn group_position(&self, source: &ToolSource) -> Result<usize, usize> {
        self.groups.binary_search_by(|g| g.source.cmp(source))
    }

    /// Tools the sources offered but the registry refused, with reasons.
    pub fn refused(&self) -> &[RefusedTool] {
        &self.refused
    }

    /// MCP tools that were given a hashed name because of a collision.
    pub fn renamed(&self) -> &[RenamedTool] {
        &self.renamed
    }
}

/// A source and what happened when its tools were set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryReport {
    /// The source.
    pub source: ToolSource,
    /// What happened.
    pub report: RegistrationReport,
}

/// What happened to one source's tool list when it was set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistrationReport {
    /// The generation that includes the change.
    pub generation: u64,
    /// Exposed names of this source's registered tools.
    pub registered: Vec<String>,
    /// This source's refused tools.
    pub refused: Vec<RefusedTool>,
}

#[derive(Default)]
struct RegistryState {
    registry_id: u64,
    /// Each source's specs, shared with the tools built from them.
    sources: BTreeMap<ToolSource, Vec<Arc<ToolSpec>>>,
    /// Tools built at the last publish, per source.
    built: HashMap<ToolSource, BuiltTools>,
    /// What each source says it is for.
    descriptions: BTreeMap<ToolSource, Arc<str>>,
    generation: u64,
}

/// The tools one source's last publish built, found by their own name.
/// A tool holds its own and its exposed name, so the table keeps only the
/// tool: a map from a copy of one name to a copy of the other cost about
/// 100 bytes per tool.
#[derive(Default)]
struct BuiltTools {
    tools: hashbrown::HashTable<Arc<Tool>>,
}

/// The hash a tool is filed under in [`BuiltTools`]: of its own name.
fn own_name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one(name)
}

impl BuiltTools {
    fn with_capacity(capacity: usize) -> BuiltTools {
        BuiltTools {
            tools: hashbrown::HashTable::with_capacity(capacity),
        }
    }

    /// The tool whose own name is `name`.
    fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools
            .find(own_name_hash(name), |tool| tool.original_name() == name)
    }

    /// Takes out the tool whose own name is `name`.
    fn remove(&mut self, name: &str) -> Option<Arc<Tool>> {
        self.tools
            .find_entry(own_name_hash(name), |tool| tool.original_name() == name)
            .ok()
            .map(|entry| entry.remove().0)
    }

    /// Files `tool`, replacing one of the same own name.
    fn insert(&mut self, tool: Arc<Tool>) {
        self.remove(tool.original_name());
        self.tools
            .insert_unique(own_name_hash(tool.original_name()), tool, |tool| {
                own_name_hash(tool.original_name())
            });
    }

    fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// The registry every tool source writes to and every assembly reads from.
///
/// ```
/// use quiver_tool::registry::ToolRegistry;
/// use quiver_tool::tool::{ToolSource, ToolSpec};
/// let registry = ToolRegistry::new();
/// registry.set_source_tools(
///     ToolSource::Mcp("github".into()),
///     vec![ToolSpec::new("create_issue", "Open an issue", serde_json::json!({"type": "object"}))],
/// );
/// let snapshot = registry.snapshot();
/// assert!(snapshot.get("mcp_github_create_issue").is_some());
/// ```
pub struct ToolRegistry {
    state: Mutex<RegistryState>,
    current: RwLock<Arc<RegistrySnapshot>>,
    /// The generation of the latest snapshot, for whoever must react to a
    /// change (the MCP gateway's `list_changed`) instead of polling.
    changes: tokio::sync::watch::Sender<u64>,
}

static NEXT_REGISTRY_ID: AtomicU64 = AtomicU64::new(1);

impl Default for ToolRegistry {
    fn default() -> Self {
        ToolRegistry::new()
    }
}

impl ToolRegistry {
    /// An empty registry at generation 0.
    pub fn new() -> ToolRegistry {
        let registry_id = NEXT_REGISTRY_ID.fetch_add(1, Ordering::Relaxed);
        ToolRegistry {
            state: Mutex::new(RegistryState {
                registry_id,
                ..RegistryState::default()
            }),
            current: RwLock::new(Arc::new(RegistrySnapshot {
                registry_id,
                ..RegistrySnapshot::default()
            })),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    /// A receiver that sees the generation of every new snapshot (the
    /// latest one only: a burst of changes may be seen as one).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<RegistrySnapshot> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces every tool of `source` with `specs` and publishes a new generation.
    pub fn set_source_tools(&self, source: ToolSource, specs: Vec<ToolSpec>) -> RegistrationReport {
        let mut reports = self.set_many(vec![(source, specs)]);
        reports.pop().map(|r| r.report).unwrap_or_default()
    }

    /// Replaces the tools of several sources at once, in one new generation
    /// (loading a catalog of many servers costs one rebuild, not one each).
    pub fn set_many(&self, sources: Vec<(ToolSource, Vec<ToolSpec>)>) -> Vec<RegistryReport> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changed = Vec::with_capacity(sources.len());
        for (source, specs) in sources {
            // An unchanged spec keeps the `Arc` its built tool already shares,
            // so a reload neither copies schemas nor rebuilds tools.
            let specs = specs
                .into_iter()
                .map(|spec| {
                    match state
                        .built
                        .get(&source)
                        .and_then(|built| built.get(&spec.name))
                    {
                        Some(tool) if **tool.spec() == spec => tool.spec().clone(),
                        _ => Arc::new(spec),
                    }
                })
                .collect();
            state.sources.insert(source.clone(), specs);
            changed.push(source);
        }
        let snapshot = self.publish(&mut state, &changed);
        changed
            .into_iter()
            .map(|source| RegistryReport {
                report: report_for(&snapshot, &source),
                source,
            })
            .collect()
    }

    /// Sets what sources say they are for (an MCP server's title and
    /// `instructions`, a catalog file's server description); an empty text
    /// clears it. Tool search matches it as server context. Publishes one
    /// new generation when anything changed.
    pub fn set_descriptions(&self, descriptions: impl IntoIterator<Item = (ToolSource, String)>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changed = Vec::new();
        for (source, text) in descriptions {
            let text = text.trim();
            if text.is_empty() {
                if state.descriptions.remove(&source).is_some() {
                    changed.push(source);
                }
            } else if state.descriptions.get(&source).map(|d| &**d) != Some(text) {
                state.descriptions.insert(source.clone(), Arc::from(text));
                changed.push(source);
            }
        }
        if !changed.is_empty() {
            self.publish(&mut state, &changed);
        }
    }

    /// Removes every tool of `source` (and its description); returns
    /// whether it had any entry.
    pub fn remove_source(&self, source: &ToolSource) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.descriptions.remove(source);
        if state.sources.remove(source).is_none() {
            return false;
        }
        self.publish(&mut state, std::slice::from_ref(source));
        true
    }

    /// Publishes the next generation, in which the tools or descriptions
    /// of `changed` differ from the current one's.
    fn publish(&self, state: &mut RegistryState, changed: &[ToolSource]) -> Arc<RegistrySnapshot> {
        state.generation += 1;
        let current = self.snapshot();
        let snapshot =
            Arc::new(republish(state, &current, changed).unwrap_or_else(|| build_snapshot(state)));
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = snapshot.clone();
        // Sent under the state lock, so generations arrive in order.
        self.changes.send_replace(snapshot.generation);
        snapshot
    }
}

fn report_for(snapshot: &RegistrySnapshot, source: &ToolSource) -> RegistrationReport {
    RegistrationReport {
        generation: snapshot.generation,
        registered: snapshot
            .group(source)
            .into_iter()
            .flat_map(|g| g.tools.iter().map(|t| t.name().to_owned()))
            .collect(),
        refused: snapshot
            .refused
            .iter()
            .filter(|r| &r.source == source)
            .cloned()
            .collect(),
    }
}

/// A tool that passed the per-source checks and waits for its exposed name.
struct Candidate<'a> {
    source: &'a ToolSource,
    spec: &'a Arc<ToolSpec>,
    position: u32,
    wanted: String,
}

fn build_snapshot(state: &mut RegistryState) -> RegistrySnapshot {
    let mut refused = Vec::new();
    let mut renamed = Vec::new();
    let mut owner: HashMap<String, ToolSource> = HashMap::new();
    let mut assigned: Vec<(&ToolSource, &Arc<ToolSpec>, u32, String)> = Vec::new();
    let mut mcp: Vec<Candidate<'_>> = Vec::new();

    for (source, specs) in &state.sources {
        let mut seen = std::collections::HashSet::new();
        for (position, spec) in specs.iter().enumerate() {
            let position = position as u32;
            let refuse = |reason| RefusedTool {
                source: source.clone(),
                name: spec.name.clone(),
                reason,
            };
            let wanted = match wanted_name(source, spec, &mut seen) {
                Ok(wanted) => wanted,
                Err(reason) => {
                    refused.push(refuse(reason));
                    continue;
                }
            };
            match source {
                ToolSource::Mcp(_) => mcp.push(Candidate {
                    source,
                    spec,
                    position,
                    wanted,
                }),
                ToolSource::Core | ToolSource::Plugin(_) => {
                    if let Some(taken_by) = owner.get(&wanted) {
                        refused.push(refuse(RefusalReason::NameTaken {
                            name: wanted,
                            owner: taken_by.toolset(),
                        }));
                    } else {
                        owner.insert(wanted.clone(), source.clone());
                        assigned.push((source, spec, position, wanted));
                    }
                }
            }
        }
    }

    // MCP names: the first (server, tool) in sorted order keeps its natural
    // name; every other claimant gets a hashed one, so the outcome does not
    // depend on the order servers connected in.
    mcp.sort_by(|a, b| {
        (a.wanted.as_str(), a.source, a.spec.name.as_str()).cmp(&(
            b.wanted.as_str(),
            b.source,
            b.spec.name.as_str(),
        ))
    });
    let mut losers = Vec::new();
    for candidate in mcp {
        if owner.contains_key(&candidate.wanted) {
            losers.push(candidate);
        } else {
            owner.insert(candidate.wanted.clone(), candidate.source.clone());
            assigned.push((
                candidate.source,
                candidate.spec,
                candidate.position,
                candidate.wanted,
            ));
        }
    }
    for candidate in losers {
        let server = candidate.source.group().unwrap_or_default();
        let mut attempt = 0;
        let mut exposed = hashed_name(&candidate.wanted, server, &candidate.spec.name, attempt);
        while owner.contains_key(&exposed) {
            attempt += 1;
            exposed = hashed_name(&candidate.wanted, server, &candidate.spec.name, attempt);
        }
        tracing::warn!(
            server,
            tool = %candidate.spec.name,
            wanted = %candidate.wanted,
            exposed = %exposed,
            "MCP tool name collides with another tool; exposing it under a hashed name"
        );
        owner.insert(exposed.clone(), candidate.source.clone());
        renamed.push(RenamedTool {
            server: server.to_owned(),
            tool: candidate.spec.name.clone(),
            wanted: candidate.wanted,
            exposed: exposed.clone(),
        });
        assigned.push((
            candidate.source,
            candidate.spec,
            candidate.position,
            exposed,
        ));
    }

    for refusal in &refused {
        tracing::warn!(
            source = %refusal.source.toolset(),
            tool = %refusal.name,
            reason = %refusal.reason,
            "tool refused"
        );
    }

    // Reuse the built `Tool` when nothing about it changed: building one
    // serialises its schema, which dominates the cost of a reload. Specs
    // that did not change share the tool's `Arc` (see `set_many`), so
    // pointer equality is enough.
    let mut previous = std::mem::take(&mut state.built);
    let mut built: HashMap<ToolSource, BuiltTools> = HashMap::new();
    let mut grouped: BTreeMap<&ToolSource, Vec<Arc<Tool>>> = BTreeMap::new();
    for (source, spec, position, exposed) in assigned {
        let earlier = previous
            .get_mut(source)
            .and_then(|built| built.remove(&spec.name));
        let tool = reuse_or_build(earlier, source, spec, position, &exposed);
        grouped.entry(source).or_default().push(tool.clone());
        built.entry(source.clone()).or_default().insert(tool);
    }
    state.built = built;

    let mut groups = Vec::with_capacity(grouped.len());
    let mut by_name = imbl::HashMap::new();
    for (source, tools) in grouped {
        for tool in &tools {
            by_name.insert(tool.name().to_owned(), source.clone());
        }
        groups.push(source_group(state, source, tools));
    }
    RegistrySnapshot {
        registry_id: state.registry_id,
        generation: state.generation,
        groups,
        by_name,
        refused,
        renamed,
    }
}

/// The name `spec` wants, or why its own source rules it out (a name it
/// lists twice, a bridge name, an invalid plain name): the checks that
/// need no other source. `seen`: the names the source listed before it.
fn wanted_name<'a>(
    source: &ToolSource,
    spec: &'a ToolSpec,
    seen: &mut std::collections::HashSet<&'a str>,
) -> Result<String, RefusalReason> {
    if !seen.insert(spec.name.as_str()) {
        return Err(RefusalReason::DuplicateInSource(spec.name.clone()));
    }
    if source.is_deferrable() && is_bridge_name(&spec.name) {
        return Err(RefusalReason::BridgeName(spec.name.clone()));
    }
    match source {
        ToolSource::Mcp(server) => Ok(mcp_tool_name(server, &spec.name)),
        ToolSource::Core | ToolSource::Plugin(_) if is_valid_plain_name(&spec.name) => {
            Ok(spec.name.clone())
        }
        ToolSource::Core | ToolSource::Plugin(_) => {
            Err(RefusalReason::InvalidName(spec.name.clone()))
        }
    }
}

/// The tool built earlier for the same spec, position and exposed name,
/// else a new one: building one serialises its schema, which dominates
/// the cost of a reload. Specs that did not change share the tool's `Arc`
/// (see [`ToolRegistry::set_many`]), so pointer equality is enough.
fn reuse_or_build(
    earlier: Option<Arc<Tool>>,
    source: &ToolSource,
    spec: &Arc<ToolSpec>,
    position: u32,
    exposed: &str,
) -> Arc<Tool> {
    match earlier {
        Some(tool)
            if tool.name() == exposed
                && Arc::ptr_eq(tool.spec(), spec)
                && tool.position() == position =>
        {
            tool
        }
        _ => Arc::new(
            Tool::from_shared(exposed.to_owned(), source.clone(), spec.clone())
                .at_position(position),
        ),
    }
}

fn source_group(
    state: &RegistryState,
    source: &ToolSource,
    mut tools: Vec<Arc<Tool>>,
) -> Arc<SourceGroup> {
    tools.sort_by(|a, b| a.name().cmp(b.name()));
    Arc::new(SourceGroup {
        description: state.descriptions.get(source).cloned(),
        source: source.clone(),
        tools: tools.into(),
    })
}

/// The next snapshot from `current`, redoing only the `changed` sources'
/// names and groups; `None` when a change touches a contested name (one
/// that a renamed MCP tool or a refused tool wanted, or that another
/// source holds), whose outcome only a full build settles. Equal to what
/// [`build_snapshot`] makes of the same state.
fn republish(
    state: &mut RegistryState,
    current: &RegistrySnapshot,
    changed: &[ToolSource],
) -> Option<RegistrySnapshot> {
    let mut contested: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut involved: std::collections::HashSet<&ToolSource> = std::collections::HashSet::new();
    for renamed in &current.renamed {
        contested.insert(&renamed.wanted);
        involved.insert(current.by_name.get(&renamed.exposed)?);
    }
    for refused in &current.refused {
        if let RefusalReason::NameTaken { name, .. } = &refused.reason {
            contested.insert(name);
            involved.insert(&refused.source);
        }
    }
    let mut by_name = current.by_name.clone();
    let mut groups = current.groups.clone();
    let mut refused = current.refused.clone();
    let mut done: Vec<&ToolSource> = Vec::with_capacity(changed.len());
    let mut built_now = Vec::with_capacity(changed.len());
    for source in changed {
        if done.contains(&source) {
            continue;
        }
        done.push(source);
        if involved.contains(source) {
            return None;
        }
        let position = groups.binary_search_by(|g| g.source.cmp(source));
        let old_names: &[Arc<Tool>] = match position {
            Ok(at) => &groups[at].tools,
            Err(_) => &[],
        };
        if old_names.iter().any(|t| contested.contains(t.name())) {
            return None;
        }
        let specs = state.sources.get(source).map(Vec::as_slice).unwrap_or(&[]);
        let earlier = state.built.get(source);
        let mut seen = std::collections::HashSet::new();
        let mut own_refused = Vec::new();
        let mut tools = Vec::with_capacity(specs.len());
        let mut built = BuiltTools::with_capacity(specs.len());
        let mut exposed_now = std::collections::HashSet::with_capacity(specs.len());
        for (position, spec) in specs.iter().enumerate() {
            let exposed = match wanted_name(source, spec, &mut seen) {
                Ok(wanted) => wanted,
                Err(reason) => {
                    own_refused.push(RefusedTool {
                        source: source.clone(),
                        name: spec.name.clone(),
                        reason,
                    });
                    continue;
                }
            };
            let held_by_another = by_name.get(&exposed).is_some_and(|owner| owner != source);
            if contested.contains(exposed.as_str())
                || held_by_another
                || !exposed_now.insert(exposed.clone())
            {
                // Wanted by another source, or twice by this one.
                return None;
            }
            let again = earlier.and_then(|built| built.get(&spec.name)).cloned();
            let tool = reuse_or_build(again, source, spec, position as u32, &exposed);
            built.insert(tool.clone());
            tools.push(tool);
        }
        // The name map changes only when the names do (a server that
        // changed descriptions keeps every name).
        let same_names = old_names.len() == exposed_now.len()
            && old_names.iter().all(|t| exposed_now.contains(t.name()));
        if !same_names {
            for tool in old_names {
                by_name.remove(tool.name());
            }
            for exposed in exposed_now {
                by_name.insert(exposed, source.clone());
            }
        }
        let from = refused.partition_point(|r| r.source < *source);
        let to = refused.partition_point(|r| r.source <= *source);
        for refusal in &own_refused {
            tracing::warn!(
                source = %refusal.source.toolset(),
                tool = %refusal.name,
                reason = %refusal.reason,
                "tool refused"
            );
        }
        refused.splice(from..to, own_refused);
        match (position, tools.is_empty()) {
            (Ok(at), true) => {
                groups.remove(at);
            }
            (Ok(at), false) => groups[at] = source_group(state, source, tools),
            (Err(at), false) => groups.insert(at, source_group(state, source, tools)),
            (Err(_), true) => {}
        }
        built_now.push((source.clone(), built));
    }
    for (source, built) in built_now {
        if built.is_empty() {
            state.built.remove(&source);
        } else {
            state.built.insert(source, built);
        }
    }
    Some(RegistrySnapshot {
        registry_id: state.registry_id,
        generation: state.generation,
        groups,
        by_name,
        refused,
        renamed: current.renamed.clone(),
    })
}

#[cfg(test)]
mod republish_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::naming::MAX_TOOL_NAME_CHARS;
    use serde_json::json;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec::new(name, format!("{name} tool"), json!({"type": "object"}))
    }

    fn mcp(name: &str) -> ToolSource {
        ToolSource::Mcp(name.into())
    }

    #[test]
    fn descriptions_reach_the_group_and_go_with_the_source() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(mcp("a"), vec![spec("x")]);
        let generation = registry.snapshot().generation();
        registry.set_descriptions([(mcp("a"), " Browser automation ".to_owned())]);
        let snapshot = registry.snapshot();
        assert_eq!(snapshot.generation(), generation + 1);
        assert_eq!(
            snapshot.groups()[0].description().map(|d| &**d),
            Some("Browser automation")
        );
        // Unchanged: no new generation.
        registry.set_descriptions([(mcp("a"), "Browser automation".to_owned())]);
        assert_eq!(registry.snapshot().generation(), generation + 1);
        registry.set_descriptions([(mcp("a"), String::new())]);
        assert!(registry.snapshot().groups()[0].description().is_none());
        registry.set_descriptions([(mcp("a"), "again".to_owned())]);
        assert!(registry.remove_source(&mcp("a")));
        registry.set_source_tools(mcp("a"), vec![spec("x")]);
        assert!(registry.snapshot().groups()[0].description().is_none());
    }

    #[test]
    fn tools_keep_their_position_in_their_source_list() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(mcp("a"), vec![spec("zeta"), spec("alpha"), spec("mid")]);
        let positions = |registry: &ToolRegistry| -> Vec<(String, u32)> {
            registry.snapshot().groups()[0]
                .tools()
                .iter()
                .map(|t| (t.original_name().to_owned(), t.position()))
                .collect()
        };
        // Listed by exposed name, each tool knows where its server put it.
        assert_eq!(
            positions(&registry),
            [("alpha".into(), 1), ("mid".into(), 2), ("zeta".into(), 0)]
        );
        // Reordered by the server: the positions follow.
        registry.set_source_tools(mcp("a"), vec![spec("alpha"), spec("mid"), spec("zeta")]);
        assert_eq!(
            positions(&registry),
            [("alpha".into(), 0), ("mid".into(), 1), ("zeta".into(), 2)]
        );
    }

    #[test]
    fn generations_increase_and_snapshots_are_immutable() {
        let registry = ToolRegistry::new();
        let before = registry.snapshot();
        assert_eq!(before.generation(), 0);
        registry.set_source_tools(mcp("a"), vec![spec("x")]);
        let after = registry.snapshot();
        assert_eq!(after.generation(), 1);
        assert!(before.is_empty());
        assert_eq!(after.len(), 1);
        assert!(registry.remove_source(&mcp("a")));
        assert!(registry.snapshot().is_empty());
        assert_eq!(registry.snapshot().generation(), 2);
        assert!(!registry.remove_source(&mcp("a")));
    }

    #[test]
    fn bridge_names_are_refused_for_plugins_and_servers() {
        let registry = ToolRegistry::new();
        let report = registry.set_source_tools(
            ToolSource::Plugin("p".into()),
            vec![spec("tool_search"), spec("ok")],
        );
        assert_eq!(report.registered, ["ok"]);
        assert_eq!(
            report.refused[0].reason,
            RefusalReason::BridgeName("tool_search".into())
        );
        let report = registry.set_source_tools(mcp("s"), vec![spec("tool_call")]);
        assert!(report.registered.is_empty());
        assert_eq!(report.refused.len(), 1);
    }

    #[test]
    fn plugin_names_must_be_valid_and_unique() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(ToolSource::Plugin("a".into()), vec![spec("echo")]);
        let report = registry.set_source_tools(
            ToolSource::Plugin("b".into()),
            vec![spec("echo"), spec("bad name"), spec("dup"), spec("dup")],
        );
        assert_eq!(report.registered, ["dup"]);
        let reasons: Vec<_> = report.refused.iter().map(|r| r.reason.clone()).collect();
        assert!(reasons.contains(&RefusalReason::NameTaken {
            name: "echo".into(),
            owner: "plugin-a".into()
        }));
        assert!(reasons.contains(&RefusalReason::InvalidName("bad name".into())));
        assert!(reasons.contains(&RefusalReason::DuplicateInSource("dup".into())));
    }

    #[test]
    fn mcp_collisions_resolve_the_same_whatever_the_order() {
        // `mcp_a_b_c` is claimed by server `a` tool `b_c`, server `a_b` tool
        // `c` and server `a` tool `b.c`.
        let orders = [
            vec![
                (mcp("a"), vec![spec("b_c"), spec("b.c")]),
                (mcp("a_b"), vec![spec("c")]),
            ],
            vec![
                (mcp("a_b"), vec![spec("c")]),
                (mcp("a"), vec![spec("b.c"), spec("b_c")]),
            ],
        ];
        let mut outcomes = Vec::new();
        for order in orders {
            let registry = ToolRegistry::new();
            for (source, specs) in order {
                registry.set_source_tools(source, specs);
            }
            let snapshot = registry.snapshot();
            let mut names: Vec<(String, String, String)> = snapshot
                .tools()
                .map(|t| {
                    (
                        t.source().group().unwrap_or_default().to_owned(),
                        t.original_name().to_owned(),
                        t.name().to_owned(),
                    )
                })
                .collect();
            names.sort();
            assert_eq!(snapshot.renamed().len(), 2);
            outcomes.push(names);
        }
        assert_eq!(outcomes[0], outcomes[1]);
        let winner = outcomes[0]
            .iter()
            .find(|(_, _, exposed)| exposed == "mcp_a_b_c")
            .expect("someone keeps the natural name");
        assert_eq!((winner.0.as_str(), winner.1.as_str()), ("a", "b.c"));
        for (_, _, exposed) in &outcomes[0] {
            assert!(exposed.len() <= MAX_TOOL_NAME_CHARS);
        }
    }

    #[test]
    fn unchanged_tools_are_reused_across_generations() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(mcp("a"), vec![spec("x")]);
        let first = registry
            .snapshot()
            .get("mcp_a_x")
            .cloned()
            .expect("registered");
        registry.set_source_tools(mcp("b"), vec![spec("y")]);
        let second = registry
            .snapshot()
            .get("mcp_a_x")
            .cloned()
            .expect("registered");
        assert!(Arc::ptr_eq(&first, &second));
    }

    #[test]
    fn lookup_is_exact() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(ToolSource::Plugin("p".into()), vec![spec("echo")]);
        let snapshot = registry.snapshot();
        assert!(snapshot.get("echo").is_some());
        assert!(snapshot.get("Echo").is_none());
        assert!(snapshot.get(" echo").is_none());
    }
}
