//! Opening a plugin file with the shared loader of `quiver-plugin-api`
//! (ABI stamp, layout and ABI-version checks, the manifest with every
//! schema compiled, the configuration and `init`), and turning what it
//! read into the registry's [`ToolSpec`]s.
//!
//! The checks live in `quiver_plugin_api::loader` so that a plugin's own
//! tests (`quiver_plugin_api::testing`) meet exactly the refusals the host
//! gives.

use std::path::Path;

use quiver_plugin_api::loader::{self, LoadError};
use quiver_plugin_api::{PluginManifest, PluginModuleRef, ToolManifest};
use serde_json::Value;

use super::PluginError;
use quiver_tool::tool::{ToolAnnotations, ToolMetadata, ToolSpec};

/// A checked manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Plugin name.
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// Its tools, with parsed schemas and metadata.
    pub tools: Vec<ToolSpec>,
    /// The schema of its `plugins.config.NAME` section, if it takes one.
    pub config_schema: Option<Value>,
}

/// A plugin tool as the registry holds it: title, hints and output schema
/// go into the spec's [`ToolMetadata`].
pub fn tool_spec(tool: &ToolManifest) -> ToolSpec {
    ToolSpec::new(&tool.name, &tool.description, &tool.input_schema).with_metadata(ToolMetadata {
        title: tool.title.clone(),
        annotations: ToolAnnotations {
            read_only_hint: tool.hints.read_only,
            destructive_hint: tool.hints.destructive,
            idempotent_hint: tool.hints.idempotent,
            open_world_hint: tool.hints.open_world,
        },
        output_schema: tool.output_schema.clone(),
        meta: None,
    })
}

fn manifest(checked: PluginManifest) -> Manifest {
    Manifest {
        tools: checked.tools.iter().map(tool_spec).collect(),
        name: checked.name,
        version: checked.version,
        config_schema: checked.config_schema,
    }
}

/// The host's error for what the loader refused in the file at `path`.
pub fn plugin_error(path: &Path, error: LoadError) -> PluginError {
    let path = path.to_owned();
    match error {
        LoadError::Open(detail) => PluginError::Open { path, detail },
        LoadError::AbiVersion { found, found_api } => PluginError::AbiVersion {
            path,
            found,
            found_api,
        },
        LoadError::AbiMismatch(detail) => PluginError::AbiMismatch { path, detail },
        LoadError::Manifest(detail) => PluginError::Manifest { path, detail },
        LoadError::Config(detail) => PluginError::Config { path, detail },
        LoadError::Init(error) => PluginError::Init {
            path,
            code: error.code().to_owned(),
            message: error.message().to_owned(),
        },
    }
}

/// Opens the file at `path` (a private copy), checks it and its manifest,
/// then runs its `init` with `config` (the plugin's `plugins.config.NAME`,
/// looked up by the name the manifest gives).
pub fn open(
    path: &Path,
    config_for: impl FnOnce(&str) -> Option<Value>,
) -> Result<(PluginModuleRef, Manifest), PluginError> {
    let (module, checked) = loader::open(path).map_err(|e| plugin_error(path, e))?;
    let config = config_for(&checked.name);
    loader::init(&module, &checked, config.as_ref()).map_err(|e| plugin_error(path, e))?;
    Ok((module, manifest(checked)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_plugin_api::ToolHints;
    use quiver_tool::naming::is_bridge_name;
    use serde_json::json;

    #[test]
    fn the_loaders_reserved_names_are_the_bridges() {
        for name in loader::BRIDGE_TOOL_NAMES {
            assert!(is_bridge_name(name), "{name}");
        }
    }

    #[test]
    fn metadata_reaches_the_spec() {
        let tool = ToolManifest::new("t", "d", json!({"type": "object"}))
            .title("T")
            .hints(ToolHints {
                read_only: Some(true),
                open_world: Some(false),
                ..ToolHints::default()
            })
            .output_schema(json!({"type": "object"}));
        let spec = tool_spec(&tool);
        let metadata = spec
            .metadata
            .as_deref()
            .unwrap_or_else(|| panic!("no metadata"));
        assert_eq!(metadata.title.as_deref(), Some("T"));
        assert_eq!(metadata.annotations.read_only_hint, Some(true));
        assert_eq!(metadata.annotations.open_world_hint, Some(false));
        assert_eq!(metadata.annotations.idempotent_hint, None);
        assert_eq!(metadata.output_schema, Some(json!({"type": "object"})));
        let plain = tool_spec(&ToolManifest::new("t", "d", json!({"type": "object"})));
        assert!(plain.metadata.is_none());
    }
}
