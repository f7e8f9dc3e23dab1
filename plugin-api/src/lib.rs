//! The contract between the Quiver host and its `.so` tool plugins.
//!
//! This crate is deliberately small for now: it fixes the ABI version number
//! and the manifest shape that the host expects a plugin to describe itself
//! with. The loader and the export macro build on it.

use serde::{Deserialize, Serialize};

/// The plugin ABI version this crate describes. The host refuses plugins
/// built against a version outside its supported range.
pub const PLUGIN_ABI_VERSION: u32 = 1;

/// What a plugin says about itself: its name, version and tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginManifest {
    /// Plugin name; it becomes the catalog group and the `plugin-NAME` toolset.
    pub name: String,
    /// The plugin's own version string (free form, shown by `quiver plugin list`).
    pub version: String,
    /// The tools the plugin offers.
    pub tools: Vec<ToolManifest>,
}

/// One tool offered by a plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolManifest {
    /// Tool name as the model will see it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's arguments (an object schema).
    pub input_schema: serde_json::Value,
}
