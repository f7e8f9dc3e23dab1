//! The plugin host: the live plugins, one entry per file, their tools in the
//! registry, and calls on tokio's blocking pool with a per-call timeout.
//!
//! A reload loads the new file as a new [`Generation`] and only then swaps
//! it in, atomically: new calls go to it, calls in flight finish on the old
//! one (they hold an `Arc`). A load that fails leaves the previous
//! generation serving and records why ([`PluginStatus::last_error`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use serde_json::{Value, json};

use super::PluginError;
use super::files::{self, Fingerprint, ReadLimits, is_plugin_file, pin_key};
use super::generation::{CallFailure, Generation};
use crate::settings::PluginsConfig;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::tool::ToolSource;

/// Consecutive timeouts after which a plugin is marked unhealthy.
pub const UNHEALTHY_AFTER_TIMEOUTS: u32 = 3;

/// How the host loads and calls plugins.
#[derive(Debug, Clone)]
pub struct PluginHostOptions {
    /// Where private per-generation copies go.
    pub state_dir: PathBuf,
    /// Longest a call may take.
    pub call_timeout: Duration,
    /// Warn when more generations than this have been loaded.
    pub reload_warn_after: u64,
    /// Pin key (file name without `.so`) to sha256.
    pub pin: BTreeMap<String, String>,
    /// Skip the ownership and permission checks (local development).
    pub dev: bool,
    /// Pause between the two size checks of a file.
    pub stable_wait: Duration,
    /// Consecutive timeouts after which a plugin is unhealthy.
    pub unhealthy_after: u32,
    /// Only plugin files whose name matches are loaded (`None`: all).
    pub include: Option<globset::GlobSet>,
    /// Larger plugin files are refused before any of them is read.
    pub max_file_bytes: u64,
    /// Plugin name to its `plugins.config.NAME` section, handed to its
    /// `init` after it is checked against the plugin's config schema.
    pub config: BTreeMap<String, Value>,
}

impl PluginHostOptions {
    /// Options with defaults and copies under `state_dir`.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        let defaults = PluginsConfig::default();
        PluginHostOptions {
            state_dir: state_dir.into(),
            call_timeout: Duration::from_millis(defaults.call_timeout_ms),
            reload_warn_after: defaults.reload_warn_after,
            pin: BTreeMap::new(),
            dev: false,
            stable_wait: Duration::from_millis(50),
            unhealthy_after: UNHEALTHY_AFTER_TIMEOUTS,
            include: None,
            max_file_bytes: defaults.max_file_bytes,
            config: BTreeMap::new(),
        }
    }

    /// Options from the `plugins` config section.
    pub fn from_config(config: &PluginsConfig, dev: bool) -> Self {
        let state_dir = config.state_dir.clone().unwrap_or_else(default_state_dir);
        PluginHostOptions {
            call_timeout: Duration::from_millis(config.call_timeout_ms),
            reload_warn_after: config.reload_warn_after,
            pin: config.pin.clone(),
            dev,
            include: config.include_set(),
            max_file_bytes: config.max_file_bytes,
            config: config.config.clone(),
            ..PluginHostOptions::new(state_dir)
        }
    }
}

/// `$XDG_STATE_HOME/quiver/plugins`, else `~/.local/state/quiver/plugins`,
/// else a per-user directory under the system temp dir.
pub fn default_state_dir() -> PathBuf {
    quiver_config::paths::default_state_dir().join("plugins")
}

/// Whether a plugin file serves tools and answers in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Answering.
    Healthy,
    /// Timed out [`PluginHostOptions::unhealthy_after`] times in a row; its
    /// calls are refused until a new generation loads.
    Unhealthy,
    /// No generation of the file ever loaded (its load failed: see
    /// [`PluginStatus::last_error`]), so it serves no tools.
    NotLoaded,
}

/// What `quiver plugin list` shows for one plugin file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PluginStatus {
    /// The file in the plugin directory.
    pub file: PathBuf,
    /// Plugin name (`None` while no generation ever loaded).
    pub name: Option<String>,
    /// Plugin version.
    pub version: Option<String>,
    /// The serving generation's number.
    pub generation: Option<u64>,
    /// The serving generation's sha256.
    pub sha256: Option<String>,
    /// The serving generation's tools.
    pub tools: Vec<String>,
    /// Health.
    pub health: Health,
    /// Timeouts in a row.
    pub consecutive_timeouts: u32,
    /// Why the last load failed, when it did (the previous generation, if
    /// any, still serves).
    pub last_error: Option<String>,
    /// How many times the file was read (once per real change: an event
    /// on an unchanged file reads nothing).
    pub reads: u64,
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// Loaded as this generation of the file.
    Loaded {
        /// Plugin name.
        name: String,
        /// Generation number.
        generation: u64,
    },
    /// Same hash as the serving generation: nothing to do.
    Unchanged,
    /// Not a plugin file (dotfile, `*.tmp`, not `*.so`).
    Ignored,
    /// The load failed (the message is also in the plugin's status).
    Failed(String),
}

/// A plugin call that did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PluginCallError {
    /// No loaded plugin has this tool.
    #[error("no loaded plugin offers tool `{tool}`")]
    UnknownTool {
        /// The tool.
        tool: String,
    },
    /// The plugin timed out too often and is not called until it reloads.
    #[error("plugin `{plugin}` is unhealthy (it timed out repeatedly); `{tool}` was not called")]
    Unhealthy {
        /// The plugin.
        plugin: String,
        /// The tool.
        tool: String,
    },
    /// The call took longer than `plugins.call_timeout_ms`.
    #[error("plugin `{plugin}` tool `{tool}` did not answer within {timeout_ms} ms")]
    Timeout {
        /// The plugin.
        plugin: String,
        /// The tool.
        tool: String,
        /// The limit.
        timeout_ms: u64,
    },
    /// The tool reported an error.
    #[error("plugin `{plugin}` tool `{tool}` failed: {message}")]
    Failed {
        /// The plugin.
        plugin: String,
        /// The tool.
        tool: String,
        /// The plugin's error code (`invalid_argument`, `not_found`, ...).
        code: String,
        /// The plugin's message.
        message: String,
        /// The plugin's data (`{"field": ...}` for a bad argument), boxed
        /// to keep the error small.
        data: Option<Box<Value>>,
    },
    /// The tool panicked; the panic was caught inside the plugin.
    #[error("plugin `{plugin}` tool `{tool}` panicked: {message}")]
    Panicked {
        /// The plugin.
        plugin: String,
        /// The tool.
        tool: String,
        /// The panic message.
        message: String,
    },
    /// The tool returned something that is not JSON.
    #[error("plugin `{plugin}` tool `{tool}` returned invalid JSON: {detail}")]
    BadResult {
        /// The plugin.
        plugin: String,
        /// The tool.
        tool: String,
        /// The parser's message.
        detail: String,
    },
    /// The blocking pool could not run the call.
    #[error("plugin `{plugin}` tool `{tool}`: the call could not run: {detail}")]
    Pool {
        /// The plugin.
        plugin: String,
        /// The tool.
        tool: String,
        /// What happened.
        detail: String,
    },
}

#[derive(Debug, Default)]
struct Entry {
    current: Option<Arc<Generation>>,
    generations: u64,
    last_error: Option<String>,
    consecutive_timeouts: u32,
    unhealthy: bool,
    /// The file's metadata at the last attempt: an event that leaves it
    /// the same reads nothing.
    seen: Option<Fingerprint>,
    /// Reads of the file.
    reads: u64,
    /// Bytes (by sha256) whose last load failed: not copied or opened again.
    refused: Option<Refused>,
}

/// Why bytes of a file were refused after they were opened.
#[derive(Debug, Clone)]
struct Refused {
    sha256: String,
    why: RefusedWhy,
}

#[derive(Debug, Clone)]
enum RefusedWhy {
    /// The loader or the manifest refused them: the same bytes always fail.
    Bytes(String),
    /// Their name or tools were taken: refused again, without opening
    /// them, while they still are.
    Conflict { name: String, tools: Vec<String> },
}

#[derive(Debug, Default)]
struct State {
    files: BTreeMap<PathBuf, Entry>,
    /// Tool name to the file serving it.
    routes: HashMap<String, PathBuf>,
}

/// The live plugins. Share it as `Arc<PluginHost>` between the watcher and
/// the dispatch path.
pub struct PluginHost {
    registry: Arc<ToolRegistry>,
    /// Replaced whole by a config reload ([`PluginHost::reconfigure`]).
    options: RwLock<Arc<PluginHostOptions>>,
    state: RwLock<State>,
    reloads: Mutex<()>,
    loaded_total: AtomicU64,
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost")
            .field("options", &self.options())
            .finish_non_exhaustive()
    }
}

impl PluginHost {
    /// A host publishing into `registry`; prepares the state directory.
    pub fn new(
        registry: Arc<ToolRegistry>,
        options: PluginHostOptions,
    ) -> Result<PluginHost, PluginError> {
        files::prepare_state_dir(&options.state_dir)?;
        Ok(PluginHost {
            registry,
            options: RwLock::new(Arc::new(options)),
            state: RwLock::new(State::default()),
            reloads: Mutex::new(()),
            loaded_total: AtomicU64::new(0),
        })
    }

    /// The registry the host publishes into.
    pub fn registry(&self) -> &Arc<ToolRegistry> {
        &self.registry
    }

    /// The options in force.
    pub fn options(&self) -> Arc<PluginHostOptions> {
        self.options
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Applies new options and plugin directories (a config reload): the
    /// options serve the next load and call; every known plugin file
    /// outside `dirs`, or no longer accepted (`plugins.include`), is
    /// removed, its tools leaving the registry; then every file of `dirs`
    /// is loaded (a file whose content did not change keeps its
    /// generation unless its `plugins.config.NAME` changed). The copies' directory (`state_dir`) is the one the host
    /// was made with. Returns the files removed and the load outcomes.
    pub fn reconfigure(
        &self,
        options: PluginHostOptions,
        dirs: &[PathBuf],
    ) -> (Vec<PathBuf>, Vec<(PathBuf, ReloadOutcome)>) {
        let options = PluginHostOptions {
            state_dir: self.options().state_dir.clone(),
            ..options
        };
        let config_changed = self.options().config != options.config;
        *self.options.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(options);
        let options = self.options();
        // A plugin whose `plugins.config.NAME` changed is read again (its
        // file did not change) and so loads a new generation with it; bytes
        // refused (their `init` may have refused the old section) are tried
        // again with the new sections.
        for entry in self.write_state().files.values_mut() {
            let stale = entry
                .current
                .as_ref()
                .is_some_and(|g| g.config() != options.config.get(g.name()));
            let retry = config_changed
                && matches!(
                    entry.refused,
                    Some(Refused {
                        why: RefusedWhy::Bytes(_),
                        ..
                    })
                );
            if stale || retry {
                entry.seen = None;
            }
            if retry {
                entry.refused = None;
            }
        }
        let known: Vec<PathBuf> = self.read_state().files.keys().cloned().collect();
        let mut removed = Vec::new();
        for file in known {
            let in_dirs = file.parent().is_some_and(|p| dirs.iter().any(|d| d == p));
            if (!in_dirs || !self.accepts(&file)) && self.remove_path(&file) {
                removed.push(file);
            }
        }
        let loaded = self.load_dirs(dirs);
        (removed, loaded)
    }

    /// Generations loaded by this host so far (none is ever unloaded).
    pub fn loaded_generations(&self) -> u64 {
        self.loaded_total.load(Ordering::Relaxed)
    }

    /// Whether `path` is a plugin file this host loads: a `*.so` (not a
    /// dotfile, not `*.tmp`) whose name matches `plugins.include`.
    pub fn accepts(&self, path: &Path) -> bool {
        is_plugin_file(path)
            && self
                .options()
                .include
                .as_ref()
                .is_none_or(|set| path.file_name().is_some_and(|name| set.is_match(name)))
    }

    /// Loads every plugin file of `dirs` (sorted by path).
    pub fn load_dirs(&self, dirs: &[PathBuf]) -> Vec<(PathBuf, ReloadOutcome)> {
        let mut out = Vec::new();
        for dir in dirs {
            let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
                Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
                Err(error) => {
                    tracing::warn!(dir = %dir.display(), %error, "cannot read plugin directory");
                    continue;
                }
            };
            paths.sort();
            for path in paths.into_iter().filter(|p| self.accepts(p)) {
                let outcome = self.reload_path(&path);
                out.push((path, outcome));
            }
        }
        out
    }

    fn read_state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_state(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// (Re)loads the plugin file at `path`: a new generation when its hash
    /// changed; on failure the previous generation keeps serving.
    pub fn reload_path(&self, path: &Path) -> ReloadOutcome {
        if !self.accepts(path) {
            return ReloadOutcome::Ignored;
        }
        let _serial = self.reloads.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = Fingerprint::of_path(path);
        {
            let mut state = self.write_state();
            let entry = state.files.entry(path.to_owned()).or_default();
            if seen.is_some() && entry.seen == seen {
                return ReloadOutcome::Unchanged;
            }
            entry.seen = seen;
            entry.reads += 1;
        }
        match self.try_reload(path) {
            Ok(outcome) => outcome,
            Err(error) => {
                let message = error.to_string();
                tracing::warn!(file = %path.display(), error = %message, "plugin not loaded; the previous generation, if any, keeps serving");
                metrics::counter!("quiver_plugin_load_failures_total", "file" => file_label(path))
                    .increment(1);
                self.write_state()
                    .files
                    .entry(path.to_owned())
                    .or_default()
                    .last_error = Some(message.clone());
                ReloadOutcome::Failed(message)
            }
        }
    }

    fn try_reload(&self, path: &Path) -> Result<ReloadOutcome, PluginError> {
        let candidate = files::read_candidate(
            path,
            ReadLimits {
                dev: self.options().dev,
                stable_wait: self.options().stable_wait,
                max_bytes: self.options().max_file_bytes,
            },
        )?;
        let refused = self
            .read_state()
            .files
            .get(path)
            .and_then(|e| e.refused.clone())
            .filter(|r| r.sha256 == candidate.sha256);
        match refused.map(|r| r.why) {
            Some(RefusedWhy::Bytes(message)) => {
                return Err(PluginError::Open {
                    path: path.to_owned(),
                    detail: format!("unchanged since it was refused: {message}"),
                });
            }
            // Refused again before it is copied or opened while the name
            // or a tool is still taken.
            Some(RefusedWhy::Conflict { name, tools }) => {
                self.check_conflicts(path, &name, &tools)?;
            }
            None => {}
        }
        let (previous, number) = {
            let state = self.read_state();
            let entry = state.files.get(path);
            let previous = entry.and_then(|e| e.current.clone());
            let options = self.options();
            if previous.as_ref().is_some_and(|g| {
                g.sha256() == candidate.sha256 && g.config() == options.config.get(g.name())
            }) {
                return Ok(ReloadOutcome::Unchanged);
            }
            (previous, entry.map_or(0, |e| e.generations) + 1)
        };
        let key = pin_key(path);
        if let Some(expected) = self.options().pin.get(&key)
            && *expected != candidate.sha256
        {
            return Err(PluginError::PinMismatch {
                path: path.to_owned(),
                name: key,
                expected: expected.clone(),
                found: candidate.sha256,
            });
        }
        let sequence = self.loaded_total.fetch_add(1, Ordering::Relaxed) + 1;
        if sequence > self.options().reload_warn_after {
            tracing::warn!(
                loaded = sequence,
                reload_warn_after = self.options().reload_warn_after,
                "many plugin generations loaded: none is ever unloaded, each keeps its code mapped; restart the daemon to reclaim the memory"
            );
        }
        let options = self.options();
        let generation =
            match Generation::load(&candidate, &options.state_dir, number, sequence, |name| {
                options.config.get(name).cloned()
            }) {
                Ok(generation) => Arc::new(generation),
                Err(error) => {
                    self.refuse(path, &candidate, RefusedWhy::Bytes(error.to_string()));
                    return Err(error);
                }
            };
        let tool_names: Vec<String> = generation.tools().iter().map(|t| t.name.clone()).collect();
        if let Err(error) = self.check_conflicts(path, generation.name(), &tool_names) {
            // Its code stays mapped; the copy is not needed again.
            let _ = std::fs::remove_file(generation.copy());
            self.refuse(
                path,
                &candidate,
                RefusedWhy::Conflict {
                    name: generation.name().to_owned(),
                    tools: tool_names,
                },
            );
            return Err(error);
        }
        let name = generation.name().to_owned();
        {
            let mut state = self.write_state();
            if let Some(old) = &previous {
                for tool in old.tools() {
                    if state.routes.get(&tool.name).is_some_and(|f| f == path) {
                        state.routes.remove(&tool.name);
                    }
                }
            }
            for tool in generation.tools() {
                state.routes.insert(tool.name.clone(), path.to_owned());
            }
            let entry = state.files.entry(path.to_owned()).or_default();
            entry.current = Some(generation.clone());
            entry.generations = number;
            entry.last_error = None;
            entry.refused = None;
            entry.consecutive_timeouts = 0;
            entry.unhealthy = false;
        }
        if let Some(old) = &previous
            && old.name() != name
        {
            self.registry
                .remove_source(&ToolSource::Plugin(old.name().to_owned()));
        }
        let report = self.registry.set_source_tools(
            ToolSource::Plugin(name.clone()),
            generation.tools().to_vec(),
        );
        for refused in &report.refused {
            tracing::warn!(plugin = %name, tool = %refused.name, reason = %refused.reason, "plugin tool refused");
        }
        tracing::info!(plugin = %name, version = generation.version(), generation = number, file = %path.display(), "plugin loaded");
        metrics::gauge!("quiver_plugin_generation", "plugin" => name.clone()).set(number as f64);
        metrics::gauge!("quiver_plugin_generations_loaded").set(self.loaded_generations() as f64);
        Ok(ReloadOutcome::Loaded {
            name,
            generation: number,
        })
    }

    fn refuse(&self, path: &Path, candidate: &files::Candidate, why: RefusedWhy) {
        self.write_state()
            .files
            .entry(path.to_owned())
            .or_default()
            .refused = Some(Refused {
            sha256: candidate.sha256.clone(),
            why,
        });
    }

    fn check_conflicts(
        &self,
        path: &Path,
        name: &str,
        tools: &[String],
    ) -> Result<(), PluginError> {
        let state = self.read_state();
        for (file, entry) in &state.files {
            if file != path && entry.current.as_ref().is_some_and(|g| g.name() == name) {
                return Err(PluginError::NameTaken {
                    path: path.to_owned(),
                    plugin: name.to_owned(),
                    other: file.clone(),
                });
            }
        }
        let snapshot = self.registry.snapshot();
        let own = ToolSource::Plugin(name.to_owned());
        for tool in tools {
            if let Some(existing) = snapshot.get(tool)
                && *existing.source() != own
            {
                return Err(PluginError::ToolTaken {
                    path: path.to_owned(),
                    tool: tool.clone(),
                    owner: existing.source().toolset(),
                });
            }
        }
        Ok(())
    }

    /// Forgets the plugin file at `path` and unregisters its tools (they
    /// are gone from the next assembly). Its code stays mapped.
    pub fn remove_path(&self, path: &Path) -> bool {
        let _serial = self.reloads.lock().unwrap_or_else(PoisonError::into_inner);
        let removed = {
            let mut state = self.write_state();
            let removed = state.files.remove(path);
            state.routes.retain(|_, file| file != path);
            removed
        };
        match removed.and_then(|e| e.current) {
            Some(generation) => {
                self.registry
                    .remove_source(&ToolSource::Plugin(generation.name().to_owned()));
                tracing::info!(plugin = generation.name(), file = %path.display(), "plugin removed");
                metrics::gauge!("quiver_plugin_generation", "plugin" => generation.name().to_owned()).set(0.0);
                true
            }
            None => false,
        }
    }

    /// The serving generation for `tool`, or why it cannot be called.
    fn route(&self, tool: &str) -> Result<(PathBuf, Arc<Generation>), PluginCallError> {
        let state = self.read_state();
        let unknown = || PluginCallError::UnknownTool {
            tool: tool.to_owned(),
        };
        let file = state.routes.get(tool).ok_or_else(unknown)?;
        let entry = state.files.get(file).ok_or_else(unknown)?;
        let generation = entry.current.clone().ok_or_else(unknown)?;
        if entry.unhealthy {
            return Err(PluginCallError::Unhealthy {
                plugin: generation.name().to_owned(),
                tool: tool.to_owned(),
            });
        }
        Ok((file.clone(), generation))
    }

    /// The serving generation of the plugin file at `path`.
    pub fn generation_of_file(&self, path: &Path) -> Option<Arc<Generation>> {
        self.read_state()
            .files
            .get(path)
            .and_then(|e| e.current.clone())
    }

    /// The generation that would serve `tool` now.
    pub fn generation_for(&self, tool: &str) -> Option<Arc<Generation>> {
        self.route(tool).ok().map(|(_, g)| g)
    }

    /// Calls `tool` on the current thread, without a timeout (for tools
    /// and benchmarks that own their thread).
    pub fn call_blocking(&self, tool: &str, arguments: &Value) -> Result<Value, PluginCallError> {
        let (_, generation) = self.route(tool)?;
        finish(
            &generation,
            tool,
            generation.call(tool, &arguments.to_string()),
        )
    }

    /// Calls `tool` with `arguments` on tokio's blocking pool, with the
    /// configured timeout. Must run inside a tokio runtime.
    pub async fn call(&self, tool: &str, arguments: &Value) -> Result<Value, PluginCallError> {
        let (file, generation) = self.route(tool)?;
        let arguments = arguments.to_string();
        let running = generation.clone();
        let owned_tool = tool.to_owned();
        let task = tokio::task::spawn_blocking(move || running.call(&owned_tool, &arguments));
        let outcome = tokio::time::timeout(self.options().call_timeout, task).await;
        let result = match outcome {
            Err(_) => {
                self.record_timeout(&file, &generation);
                return Err(PluginCallError::Timeout {
                    plugin: generation.name().to_owned(),
                    tool: tool.to_owned(),
                    timeout_ms: self.options().call_timeout.as_millis() as u64,
                });
            }
            Ok(Err(join)) => {
                return Err(PluginCallError::Pool {
                    plugin: generation.name().to_owned(),
                    tool: tool.to_owned(),
                    detail: join.to_string(),
                });
            }
            Ok(Ok(result)) => result,
        };
        self.record_answer(&file, &generation);
        finish(&generation, tool, result)
    }

    fn record_timeout(&self, file: &Path, generation: &Arc<Generation>) {
        let mut state = self.write_state();
        if let Some(entry) = state.files.get_mut(file)
            && entry
                .current
                .as_ref()
                .is_some_and(|g| Arc::ptr_eq(g, generation))
        {
            entry.consecutive_timeouts += 1;
            if entry.consecutive_timeouts >= self.options().unhealthy_after && !entry.unhealthy {
                entry.unhealthy = true;
                tracing::error!(
                    plugin = generation.name(),
                    timeouts = entry.consecutive_timeouts,
                    "plugin marked unhealthy: its calls are refused until it is reloaded"
                );
            }
        }
    }

    fn record_answer(&self, file: &Path, generation: &Arc<Generation>) {
        if self
            .read_state()
            .files
            .get(file)
            .is_some_and(|e| e.consecutive_timeouts == 0)
        {
            return;
        }
        let mut state = self.write_state();
        if let Some(entry) = state.files.get_mut(file)
            && entry
                .current
                .as_ref()
                .is_some_and(|g| Arc::ptr_eq(g, generation))
            && !entry.unhealthy
        {
            entry.consecutive_timeouts = 0;
        }
    }

    /// Every known plugin file, sorted by path.
    pub fn list(&self) -> Vec<PluginStatus> {
        self.read_state()
            .files
            .iter()
            .map(|(file, entry)| {
                let g = entry.current.as_ref();
                PluginStatus {
                    file: file.clone(),
                    name: g.map(|g| g.name().to_owned()),
                    version: g.map(|g| g.version().to_owned()),
                    generation: g.map(|g| g.number()),
                    sha256: g.map(|g| g.sha256().to_owned()),
                    tools: g
                        .map(|g| g.tools().iter().map(|t| t.name.clone()).collect())
                        .unwrap_or_default(),
                    health: if g.is_none() {
                        Health::NotLoaded
                    } else if entry.unhealthy {
                        Health::Unhealthy
                    } else {
                        Health::Healthy
                    },
                    consecutive_timeouts: entry.consecutive_timeouts,
                    last_error: entry.last_error.clone(),
                    reads: entry.reads,
                }
            })
            .collect()
    }

    /// [`PluginHost::list`] as JSON.
    pub fn list_json(&self) -> Value {
        json!({"plugins": self.list(), "loaded_generations": self.loaded_generations()})
    }
}

fn finish(
    generation: &Generation,
    tool: &str,
    result: Result<String, CallFailure>,
) -> Result<Value, PluginCallError> {
    match result {
        Ok(text) => serde_json::from_str(&text).map_err(|e| PluginCallError::BadResult {
            plugin: generation.name().to_owned(),
            tool: tool.to_owned(),
            detail: e.to_string(),
        }),
        Err(CallFailure {
            panicked: true,
            message,
            ..
        }) => Err(PluginCallError::Panicked {
            plugin: generation.name().to_owned(),
            tool: tool.to_owned(),
            message,
        }),
        Err(CallFailure {
            code,
            message,
            data,
            ..
        }) => Err(PluginCallError::Failed {
            plugin: generation.name().to_owned(),
            tool: tool.to_owned(),
            code,
            message,
            data: data.map(Box::new),
        }),
    }
}

/// A plugin file as a metric label: its file name (the directory is the
/// operator's, and a path would make a series per checkout).
fn file_label(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
