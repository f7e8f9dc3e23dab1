//! `.so` tool plugins: checked, copied, loaded as generations, hot-reloaded
//! under a directory watcher, and called on a blocking pool.
//!
//! - [`files`]: what a file must pass before it is opened (stable size, ELF
//!   magic, sha256, pin, ownership and permissions);
//! - [`abi`]: opening a file with abi_stable, the layout and ABI-version
//!   checks, and the manifest checks;
//! - [`generation`]: one loaded copy of a plugin, never unloaded;
//! - [`host`]: the live plugins, their tools in the registry, and calls;
//! - [`watcher`]: the notify watcher that reloads plugins as files change.
//!
//! Loaded code is never unloaded (unloading Rust code is unsound as soon as
//! it has handed out a `'static` or spawned a thread): every generation
//! keeps its private copy mapped, roughly the size of the `.so`, until the
//! process exits; past `plugins.reload_warn_after` loads the host warns.

use std::path::PathBuf;

pub mod abi;
pub mod executor;
pub mod files;
pub mod generation;
pub mod host;
pub mod settings;
pub mod watcher;

pub use executor::PluginExecutor;
pub use generation::Generation;
pub use host::{
    Health, PluginCallError, PluginHost, PluginHostOptions, PluginStatus, ReloadOutcome,
};
pub use watcher::PluginWatcher;

/// Why a plugin file was not loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The file or a directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file changed size between two checks (still being written).
    #[error(
        "{path}: the file is still changing ({first} then {second} bytes); write it elsewhere and rename it into the directory"
    )]
    NotStable {
        /// The file.
        path: PathBuf,
        /// Size at the first check.
        first: u64,
        /// Size at the second check.
        second: u64,
    },
    /// The path is not a regular file (a FIFO, device, socket or
    /// directory named `*.so`); it is never opened for reading.
    #[error("{path}: not a regular file ({what}); skipped")]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// The file is larger than `plugins.max_file_bytes`; nothing of it was read.
    #[error("{path}: {size} bytes is more than plugins.max_file_bytes ({limit}); not read")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The file does not start with the ELF magic number.
    #[error("{path}: not an ELF shared object (no ELF magic number)")]
    NotElf {
        /// The file.
        path: PathBuf,
    },
    /// The ELF headers point past the end of the file (truncated) or are
    /// not those of a shared object for this machine.
    #[error("{path}: not a loadable shared object: {detail}")]
    BadElf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The file or its directory could be changed by another user.
    #[error(
        "{path}: refused: {reason} (fix the ownership or mode, or run with --dev for local development)"
    )]
    Untrusted {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file's sha256 differs from its `plugins.pin` entry.
    #[error("{path}: sha256 {found} does not match plugins.pin.{name} ({expected})")]
    PinMismatch {
        /// The file.
        path: PathBuf,
        /// The pin key (file name without `.so`).
        name: String,
        /// The pinned digest.
        expected: String,
        /// The file's digest.
        found: String,
    },
    /// The dynamic loader or abi_stable could not open the file.
    #[error("{path}: cannot load: {detail}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The loader's message.
        detail: String,
    },
    /// The root module's layout or abi_stable version differs from the host's.
    #[error("{path}: ABI mismatch: {detail}")]
    AbiMismatch {
        /// The file.
        path: PathBuf,
        /// What differs.
        detail: String,
    },
    /// The plugin was built for an ABI version outside the supported range.
    #[error("{path}: {}", abi_version_message(*.found, .found_api))]
    AbiVersion {
        /// The file.
        path: PathBuf,
        /// The plugin's ABI version.
        found: u32,
        /// The `quiver-plugin-api` version it was built against.
        found_api: String,
    },
    /// The manifest is malformed.
    #[error("{path}: bad manifest: {detail}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The plugin's `plugins.config.NAME` section does not fit its config
    /// schema, or the plugin takes no configuration.
    #[error("{path}: bad configuration: {detail}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the key.
        detail: String,
    },
    /// The plugin's `init` refused to start.
    #[error("{path}: init failed ({code}): {message}")]
    Init {
        /// The file.
        path: PathBuf,
        /// The plugin's error code.
        code: String,
        /// The plugin's message.
        message: String,
    },
    /// A tool of the plugin is already offered by another source.
    #[error(
        "{path}: tool `{tool}` is already offered by {owner}; rename the plugin's tool (plugin tools keep their own name, so pick a distinctive one such as `PLUGIN_*`)"
    )]
    ToolTaken {
        /// The file.
        path: PathBuf,
        /// The tool.
        tool: String,
        /// `core`, `plugin-X` or `mcp-Y`.
        owner: String,
    },
    /// Another file already provides a plugin of this name.
    #[error("{path}: plugin `{plugin}` is already loaded from {other}")]
    NameTaken {
        /// The file.
        path: PathBuf,
        /// The plugin name.
        plugin: String,
        /// The file that has it.
        other: PathBuf,
    },
    /// The directory watcher could not be set up.
    #[error("{path}: cannot watch: {detail}")]
    Watch {
        /// The directory.
        path: PathBuf,
        /// notify's message.
        detail: String,
    },
}

fn abi_version_message(found: u32, found_api: &str) -> String {
    quiver_plugin_api::loader::LoadError::AbiVersion {
        found,
        found_api: found_api.to_owned(),
    }
    .to_string()
}

impl PluginError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> PluginError {
        PluginError::Io {
            path: path.into(),
            source,
        }
    }
}
