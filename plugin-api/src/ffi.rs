//! The types that cross the boundary between the host and a plugin: all
//! `#[repr(C)]` abi_stable types, checked by layout when a plugin loads,
//! plus the plain version stamp read before that check.

use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{ROption, RResult, RStr, RString, RVec};
use abi_stable::{StableAbi, declare_root_module_statics, package_version_strings};

/// A tool as it crosses the boundary.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct FfiTool {
    /// Tool name.
    pub name: RString,
    /// What the tool does.
    pub description: RString,
    /// JSON Schema of the arguments, as JSON text.
    pub input_schema_json: RString,
    /// A human-readable name for display.
    pub title: ROption<RString>,
    /// MCP `readOnlyHint`.
    pub read_only_hint: ROption<bool>,
    /// MCP `destructiveHint`.
    pub destructive_hint: ROption<bool>,
    /// MCP `idempotentHint`.
    pub idempotent_hint: ROption<bool>,
    /// MCP `openWorldHint`.
    pub open_world_hint: ROption<bool>,
    /// JSON Schema of the structured result, as JSON text.
    pub output_schema_json: ROption<RString>,
}

/// A manifest as it crosses the boundary.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct FfiManifest {
    /// Plugin name.
    pub name: RString,
    /// Plugin version (free form).
    pub version: RString,
    /// The `quiver-plugin-api` version the plugin was built against.
    pub api_version: RString,
    /// The tools.
    pub tools: RVec<FfiTool>,
    /// JSON Schema of the plugin's `plugins.config.NAME` section, as JSON
    /// text; `None`: the plugin takes no configuration.
    pub config_schema_json: ROption<RString>,
}

/// An error as it crosses the boundary: what the model receives as
/// `{"error": code, "message", "data"}`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct FfiError {
    /// Whether the plugin panicked (the panic was caught inside the plugin).
    pub panicked: bool,
    /// A short stable code (`invalid_argument`, `not_found`, `tool_failed`, ...).
    pub code: RString,
    /// What went wrong.
    pub message: RString,
    /// More about it, as JSON text (`{"field": ...}` for a bad argument).
    pub data_json: ROption<RString>,
}

/// How a plugin reaches the host: handed to `init`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct FfiHost {
    /// Writes one record to the host's log: `level` 1 (error) to 5
    /// (trace), the plugin's name, the event's target (its module path) and
    /// the formatted message with its fields.
    pub log: extern "C" fn(level: u8, plugin: RStr<'_>, target: RStr<'_>, message: RStr<'_>),
    /// The most verbose level the host records (0 off, 1 error .. 5
    /// trace): the plugin does not format events the host would drop.
    pub max_level: u8,
}

/// The root module every plugin exports.
///
/// Fields after `shutdown` may be added in later minor ABI versions (it is
/// an abi_stable prefix type); changing or removing one is a new ABI
/// version.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    /// The plugin ABI version the plugin was built for.
    pub abi_version: u32,
    /// Returns the plugin's manifest.
    pub manifest: extern "C" fn() -> RResult<FfiManifest, FfiError>,
    /// Called once per generation, before any call, with the host's
    /// callbacks and the plugin's configuration (`plugins.config.NAME`, as
    /// JSON text, already validated against the manifest's config schema;
    /// `null` when the section is absent).
    pub init: extern "C" fn(host: FfiHost, config_json: RStr<'_>) -> RResult<(), FfiError>,
    /// Calls `tool` with JSON `arguments`; returns the JSON result.
    pub call: extern "C" fn(tool: RStr<'_>, arguments_json: RStr<'_>) -> RResult<RString, FfiError>,
    /// Called once when the generation no longer serves (replaced or
    /// removed) and its last call has returned. Its code stays mapped.
    #[sabi(last_prefix_field)]
    pub shutdown: extern "C" fn(),
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "quiver_plugin";
    const NAME: &'static str = "quiver_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

/// The name of the [`AbiStamp`] symbol, nul-terminated.
pub const ABI_STAMP_SYMBOL: &[u8] = b"quiver_plugin_abi_stamp\0";

/// Written by every plugin as a plain `#[no_mangle]` static, so that the
/// host can read which ABI and API version a plugin was built for
/// *before* it checks the root module's layout: a plugin built against
/// another version then gets a message naming both versions and the
/// `quiver-plugin-api` to rebuild against, not a layout difference.
/// This struct never changes shape.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AbiStamp {
    /// Always [`AbiStamp::MAGIC`].
    pub magic: [u8; 8],
    /// The plugin ABI version.
    pub abi_version: u32,
    /// How many bytes of `api_version` are used.
    pub api_version_len: u32,
    /// The `quiver-plugin-api` version, UTF-8, unused bytes zero.
    pub api_version: [u8; 32],
}

impl AbiStamp {
    /// Identifies a stamp.
    pub const MAGIC: [u8; 8] = *b"QVRPLUG\0";

    /// The stamp of this crate's ABI and version.
    pub const fn current() -> AbiStamp {
        let version = crate::API_VERSION.as_bytes();
        let mut api_version = [0u8; 32];
        let mut index = 0;
        while index < version.len() && index < api_version.len() {
            api_version[index] = version[index];
            index += 1;
        }
        AbiStamp {
            magic: AbiStamp::MAGIC,
            abi_version: crate::PLUGIN_ABI_VERSION,
            api_version_len: index as u32,
            api_version,
        }
    }

    /// The API version as text (lossy: the stamp comes from another binary).
    pub fn api_version(&self) -> String {
        let len = (self.api_version_len as usize).min(self.api_version.len());
        String::from_utf8_lossy(&self.api_version[..len]).into_owned()
    }
}
