//! One loaded copy of a plugin: its manifest, its hash and its root module.
//! A generation is never unloaded; calls in flight keep it alive through an
//! `Arc` and finish on it after a newer generation took over. When the last
//! `Arc` goes (the generation was replaced or removed and its last call
//! returned) the plugin's shutdown hook runs; its code stays mapped.

use std::path::{Path, PathBuf};

use abi_stable::std_types::RResult;
use quiver_plugin_api::{PluginModuleRef, ToolError as PluginToolError};
use serde_json::Value;

use super::files::{Candidate, private_copy};
use super::{PluginError, abi};
use quiver_tool::tool::ToolSpec;

/// One loaded generation of a plugin.
pub struct Generation {
    number: u64,
    name: String,
    version: String,
    sha256: String,
    source: PathBuf,
    copy: PathBuf,
    tools: Vec<ToolSpec>,
    /// The `plugins.config.NAME` section its `init` was given: a reload
    /// that changes it loads a new generation of an unchanged file.
    config: Option<Value>,
    module: PluginModuleRef,
}

impl Drop for Generation {
    fn drop(&mut self) {
        tracing::debug!(plugin = %self.name, generation = self.number, "plugin generation retired: running its shutdown hook");
        // The plugin catches its own panics (`__shutdown`).
        (self.module.shutdown())();
    }
}

impl std::fmt::Debug for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation")
            .field("number", &self.number)
            .field("name", &self.name)
            .field("version", &self.version)
            .field("sha256", &self.sha256)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// A failed call as the plugin reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallFailure {
    /// Whether the plugin panicked (and caught it).
    pub panicked: bool,
    /// The plugin's error code (`invalid_argument`, `not_found`, ...).
    pub code: String,
    /// The plugin's message.
    pub message: String,
    /// The plugin's data, if any.
    pub data: Option<Value>,
}

impl Generation {
    /// Copies `candidate` to a private path in `state_dir` and loads it as
    /// generation `number`; `sequence` makes the private path unique;
    /// `config_for` gives the `plugins.config.NAME` section of the plugin
    /// the manifest names, handed to its `init`.
    pub fn load(
        candidate: &Candidate,
        state_dir: &Path,
        number: u64,
        sequence: u64,
        config_for: impl FnOnce(&str) -> Option<Value>,
    ) -> Result<Generation, PluginError> {
        let copy = private_copy(candidate, state_dir, sequence)?;
        let mut given = None;
        let opened = abi::open(&copy, |name| {
            given = config_for(name);
            given.clone()
        });
        match opened {
            Ok((module, manifest)) => Ok(Generation {
                number,
                name: manifest.name,
                version: manifest.version,
                sha256: candidate.sha256.clone(),
                source: candidate.path.clone(),
                copy,
                tools: manifest.tools,
                config: given,
                module,
            }),
            Err(error) => {
                // Unlinking a mapped file is safe (only overwriting is not).
                let _ = std::fs::remove_file(&copy);
                Err(rename_path(error, &candidate.path))
            }
        }
    }

    /// The `plugins.config.NAME` section its `init` was given.
    pub fn config(&self) -> Option<&Value> {
        self.config.as_ref()
    }

    /// The generation number (1 for the first load of a file).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The plugin name from the manifest.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The plugin version from the manifest.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Lowercase hex sha256 of the file.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The file in the plugin directory.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The private copy the code was loaded from.
    pub fn copy(&self) -> &Path {
        &self.copy
    }

    /// The tools of the manifest.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// Calls `tool` synchronously on the current thread.
    pub fn call(&self, tool: &str, arguments_json: &str) -> Result<String, CallFailure> {
        match (self.module.call())(tool.into(), arguments_json.into()) {
            RResult::ROk(json) => Ok(json.into_string()),
            RResult::RErr(error) => {
                let structured = PluginToolError::from_ffi(&error);
                Err(CallFailure {
                    panicked: error.panicked,
                    code: structured.code().to_owned(),
                    message: structured.message().to_owned(),
                    data: structured.data().cloned(),
                })
            }
        }
    }
}

/// Errors about the private copy are reported against the file the user
/// put in the directory.
fn rename_path(error: PluginError, source: &Path) -> PluginError {
    let path = source.to_owned();
    match error {
        PluginError::Open { detail, .. } => PluginError::Open { path, detail },
        PluginError::AbiMismatch { detail, .. } => PluginError::AbiMismatch { path, detail },
        PluginError::AbiVersion {
            found, found_api, ..
        } => PluginError::AbiVersion {
            path,
            found,
            found_api,
        },
        PluginError::Manifest { detail, .. } => PluginError::Manifest { path, detail },
        PluginError::Config { detail, .. } => PluginError::Config { path, detail },
        PluginError::Init { code, message, .. } => PluginError::Init {
            path,
            code,
            message,
        },
        other => other,
    }
}
