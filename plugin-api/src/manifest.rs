//! What a plugin says about itself ([`PluginManifest`], [`ToolManifest`])
//! and how that crosses the boundary.

use abi_stable::std_types::ROption;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ffi::{FfiManifest, FfiTool};

/// What a plugin says about itself: its name, version, tools and the
/// schema of its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginManifest {
    /// Plugin name; it becomes the catalog group and the `plugin-NAME` toolset.
    pub name: String,
    /// The plugin's own version string (free form, shown by `quiver plugin list`).
    pub version: String,
    /// The tools the plugin offers.
    pub tools: Vec<ToolManifest>,
    /// JSON Schema of the plugin's `plugins.config.NAME` section (`None`:
    /// the plugin takes no configuration, and a section for it is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_schema: Option<Value>,
}

impl PluginManifest {
    /// A manifest with no tools yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        PluginManifest {
            name: name.into(),
            version: version.into(),
            tools: Vec::new(),
            config_schema: None,
        }
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: ToolManifest) -> Self {
        self.tools.push(tool);
        self
    }

    /// Declares the schema of the plugin's configuration section.
    pub fn config_schema(mut self, schema: Value) -> Self {
        self.config_schema = Some(schema);
        self
    }

    /// The manifest as it crosses the boundary.
    pub fn to_ffi(&self) -> FfiManifest {
        let text = |value: &Option<Value>| -> ROption<_> {
            value.as_ref().map(|v| v.to_string().into()).into()
        };
        FfiManifest {
            name: self.name.as_str().into(),
            version: self.version.as_str().into(),
            api_version: crate::API_VERSION.into(),
            tools: self
                .tools
                .iter()
                .map(|t| FfiTool {
                    name: t.name.as_str().into(),
                    description: t.description.as_str().into(),
                    input_schema_json: t.input_schema.to_string().into(),
                    title: t.title.as_deref().map(Into::into).into(),
                    read_only_hint: t.hints.read_only.into(),
                    destructive_hint: t.hints.destructive.into(),
                    idempotent_hint: t.hints.idempotent.into(),
                    open_world_hint: t.hints.open_world.into(),
                    output_schema_json: text(&t.output_schema),
                })
                .collect(),
            config_schema_json: text(&self.config_schema),
        }
    }
}

/// MCP's behaviour hints for a tool: the plugin's claim, not a guarantee.
/// `None` means not said (MCP's defaults then apply: not read-only,
/// destructive, not idempotent, open world).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolHints {
    /// The tool does not modify its environment.
    pub read_only: Option<bool>,
    /// The tool may destroy data (meaningful when not read-only).
    pub destructive: Option<bool>,
    /// Calling it again with the same arguments has no further effect.
    pub idempotent: Option<bool>,
    /// The tool reaches an open world (the network, say).
    pub open_world: Option<bool>,
}

/// One tool offered by a plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolManifest {
    /// Tool name as the model will see it: 1 to 64 of `[A-Za-z0-9_-]`.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's arguments (an object schema).
    pub input_schema: Value,
    /// A human-readable name for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Behaviour hints.
    #[serde(default)]
    pub hints: ToolHints,
    /// JSON Schema of the structured result (an object schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

impl ToolManifest {
    /// A tool from its three required parts.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        ToolManifest {
            name: name.into(),
            description: description.into(),
            input_schema,
            title: None,
            hints: ToolHints::default(),
            output_schema: None,
        }
    }

    /// The same tool with a display title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The same tool with these behaviour hints.
    pub fn hints(mut self, hints: ToolHints) -> Self {
        self.hints = hints;
        self
    }

    /// The same tool with an output schema.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }
}
