//! The contract between the Quiver host and its `.so` tool plugins.
//!
//! A plugin is a `cdylib` crate that exports one abi_stable root module,
//! [`PluginModule`]: the plugin ABI version it was built for, a function
//! returning its manifest (name, version, tools with their JSON input
//! schemas) and a synchronous `call(tool, arguments_json)`. The host checks
//! the module's type layout with abi_stable when it loads the file and
//! refuses an ABI version outside [`MIN_SUPPORTED_ABI_VERSION`]..=
//! [`PLUGIN_ABI_VERSION`].
//!
//! Plugin authors do not touch the FFI types: they write two plain Rust
//! functions and export them with [`export_plugin!`], which catches every
//! panic inside the plugin and returns it to the host as an error (a panic
//! must never unwind across the boundary).
//!
//! ```
//! use quiver_plugin_api::{PluginManifest, ToolError, ToolManifest};
//! use serde_json::{Value, json};
//!
//! fn manifest() -> PluginManifest {
//!     PluginManifest::new("hello", env!("CARGO_PKG_VERSION")).tool(ToolManifest::new(
//!         "hello",
//!         "Greets someone by name.",
//!         json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
//!     ))
//! }
//!
//! fn call(tool: &str, arguments: Value) -> Result<Value, ToolError> {
//!     match tool {
//!         "hello" => Ok(json!(format!("hello, {}", arguments["name"].as_str().unwrap_or("you")))),
//!         other => Err(ToolError::unknown_tool(other)),
//!     }
//! }
//!
//! quiver_plugin_api::export_plugin!(manifest, call);
//! ```
//!
//! Calls run on the host's blocking thread pool, one call per thread at a
//! time, possibly several calls concurrently: a plugin must be `Sync` in
//! spirit (no unsynchronised global state). Plugin code cannot see the
//! host's tokio runtime (each `.so` links its own copy of every crate), so a
//! plugin that needs async code must run its own small runtime.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RResult, RStr, RString, RVec};
use abi_stable::{StableAbi, declare_root_module_statics, package_version_strings};
use serde::{Deserialize, Serialize};

#[doc(hidden)]
pub use abi_stable;

/// The plugin ABI version this crate describes; plugins built against this
/// crate carry it in their root module.
pub const PLUGIN_ABI_VERSION: u32 = 1;

/// The oldest plugin ABI version a host built against this crate accepts.
pub const MIN_SUPPORTED_ABI_VERSION: u32 = 1;

// ---- the FFI types -----------------------------------------------------------

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
}

/// A manifest as it crosses the boundary.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct FfiManifest {
    /// Plugin name.
    pub name: RString,
    /// Plugin version (free form).
    pub version: RString,
    /// The tools.
    pub tools: RVec<FfiTool>,
}

/// An error as it crosses the boundary.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct FfiError {
    /// Whether the plugin panicked (the panic was caught inside the plugin).
    pub panicked: bool,
    /// What went wrong.
    pub message: RString,
}

/// The root module every plugin exports.
///
/// Fields after `call` may be added in later minor ABI versions (it is an
/// abi_stable prefix type); changing or removing one is a new ABI version.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    /// The plugin ABI version the plugin was built for.
    pub abi_version: u32,
    /// Returns the plugin's manifest.
    pub manifest: extern "C" fn() -> RResult<FfiManifest, FfiError>,
    /// Calls `tool` with JSON `arguments`; returns the JSON result.
    #[sabi(last_prefix_field)]
    pub call: extern "C" fn(tool: RStr<'_>, arguments_json: RStr<'_>) -> RResult<RString, FfiError>,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "quiver_plugin";
    const NAME: &'static str = "quiver_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

// ---- the author-facing types ---------------------------------------------------

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

impl PluginManifest {
    /// A manifest with no tools yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        PluginManifest {
            name: name.into(),
            version: version.into(),
            tools: Vec::new(),
        }
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: ToolManifest) -> Self {
        self.tools.push(tool);
        self
    }

    /// The manifest as it crosses the boundary.
    pub fn to_ffi(&self) -> FfiManifest {
        FfiManifest {
            name: self.name.as_str().into(),
            version: self.version.as_str().into(),
            tools: self
                .tools
                .iter()
                .map(|t| FfiTool {
                    name: t.name.as_str().into(),
                    description: t.description.as_str().into(),
                    input_schema_json: t.input_schema.to_string().into(),
                })
                .collect(),
        }
    }
}

/// One tool offered by a plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolManifest {
    /// Tool name as the model will see it: 1 to 64 of `[A-Za-z0-9_-]`.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's arguments (an object schema).
    pub input_schema: serde_json::Value,
}

impl ToolManifest {
    /// A tool from its three parts.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: serde_json::Value,
    ) -> Self {
        ToolManifest {
            name: name.into(),
            description: description.into(),
            input_schema,
        }
    }
}

/// A tool call that failed; the message is shown to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    message: String,
}

impl ToolError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
        }
    }

    /// The host asked for a tool this plugin does not have.
    pub fn unknown_tool(tool: &str) -> Self {
        ToolError::new(format!("this plugin has no tool `{tool}`"))
    }

    /// A required argument is missing or has the wrong type.
    pub fn bad_argument(name: &str, expected: &str) -> Self {
        ToolError::new(format!("argument `{name}` must be {expected}"))
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error> From<E> for ToolError {
    fn from(error: E) -> Self {
        ToolError::new(error.to_string())
    }
}

/// A string argument, or an error naming it.
pub fn str_arg<'a>(arguments: &'a serde_json::Value, name: &str) -> Result<&'a str, ToolError> {
    arguments
        .get(name)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| ToolError::bad_argument(name, "a string"))
}

// ---- glue used by `export_plugin!` ---------------------------------------------

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

fn panicked(payload: &(dyn std::any::Any + Send), during: &str) -> FfiError {
    FfiError {
        panicked: true,
        message: format!("the plugin panicked {during}: {}", panic_message(payload)).into(),
    }
}

/// Runs a manifest function, catching panics. Used by [`export_plugin!`].
#[doc(hidden)]
pub fn __manifest(manifest: fn() -> PluginManifest) -> RResult<FfiManifest, FfiError> {
    match catch_unwind(manifest) {
        Ok(manifest) => RResult::ROk(manifest.to_ffi()),
        Err(payload) => RResult::RErr(panicked(&*payload, "building its manifest")),
    }
}

/// Runs a call function, catching panics. Used by [`export_plugin!`].
#[doc(hidden)]
pub fn __call(
    call: fn(&str, serde_json::Value) -> Result<serde_json::Value, ToolError>,
    tool: RStr<'_>,
    arguments_json: RStr<'_>,
) -> RResult<RString, FfiError> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let arguments: serde_json::Value = serde_json::from_str(arguments_json.as_str())
            .map_err(|e| ToolError::new(format!("arguments are not valid JSON: {e}")))?;
        call(tool.as_str(), arguments).map(|value| value.to_string())
    }));
    match outcome {
        Ok(Ok(json)) => RResult::ROk(json.into()),
        Ok(Err(error)) => RResult::RErr(FfiError {
            panicked: false,
            message: error.message.into(),
        }),
        Err(payload) => RResult::RErr(panicked(&*payload, &format!("in `{}`", tool.as_str()))),
    }
}

/// Builds the root module. Used by [`export_plugin!`].
#[doc(hidden)]
pub fn __module(
    manifest: extern "C" fn() -> RResult<FfiManifest, FfiError>,
    call: extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<RString, FfiError>,
) -> PluginModuleRef {
    use abi_stable::prefix_type::PrefixTypeTrait;
    PluginModule {
        abi_version: PLUGIN_ABI_VERSION,
        manifest,
        call,
    }
    .leak_into_prefix()
}

/// Exports a plugin from a manifest function `fn() -> PluginManifest` and a
/// call function `fn(&str, serde_json::Value) -> Result<serde_json::Value,
/// ToolError>`. Use it once, at the crate root of a `cdylib` crate.
///
/// Panics in either function are caught inside the plugin and reach the
/// host as errors.
#[macro_export]
macro_rules! export_plugin {
    ($manifest:path, $call:path) => {
        extern "C" fn __quiver_plugin_manifest()
        -> $crate::abi_stable::std_types::RResult<$crate::FfiManifest, $crate::FfiError> {
            // A panic here would abort: `__manifest` catches every panic of
            // the author's code, and nothing else can panic.
            $crate::__manifest($manifest)
        }

        extern "C" fn __quiver_plugin_call(
            tool: $crate::abi_stable::std_types::RStr<'_>,
            arguments_json: $crate::abi_stable::std_types::RStr<'_>,
        ) -> $crate::abi_stable::std_types::RResult<
            $crate::abi_stable::std_types::RString,
            $crate::FfiError,
        > {
            $crate::__call($call, tool, arguments_json)
        }

        fn __quiver_plugin_root_module() -> $crate::PluginModuleRef {
            $crate::__module(__quiver_plugin_manifest, __quiver_plugin_call)
        }

        $crate::__export_header!(__quiver_plugin_root_module);
    };
}

/// Exports the abi_stable header for a root-module function `$root: fn() ->
/// PluginModuleRef`. [`export_plugin!`] uses it; use it directly only to
/// build a root module by hand (as the host's test fixtures do).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_header {
    ($root:path) => {
        /// The header the host finds at load: abi_stable's version, the
        /// root module's type layout and its constructor.
        #[unsafe(export_name = "_1as_0lib_1header_0root_bmodule_bloader")]
        pub static __QUIVER_PLUGIN_HEADER: $crate::abi_stable::library::LibHeader = {
            extern "C" fn constructor() -> $crate::abi_stable::library::RootModuleResult {
                $crate::abi_stable::library::__call_root_module_loader($root)
            }
            // SAFETY: `constructor` returns the erased `PluginModuleRef`
            // that `from_constructor` is told about.
            unsafe {
                $crate::abi_stable::library::LibHeader::from_constructor::<$crate::PluginModuleRef>(
                    constructor,
                    $crate::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn call(tool: &str, arguments: serde_json::Value) -> Result<serde_json::Value, ToolError> {
        match tool {
            "echo" => Ok(arguments),
            "boom" => panic!("kaboom"),
            other => Err(ToolError::unknown_tool(other)),
        }
    }

    #[test]
    fn calls_return_json_and_errors() {
        let ok = __call(call, "echo".into(), r#"{"a":1}"#.into()).unwrap();
        assert_eq!(ok.as_str(), r#"{"a":1}"#);
        let err = __call(call, "nope".into(), "{}".into()).unwrap_err();
        assert!(!err.panicked);
        assert!(err.message.contains("nope"));
        let err = __call(call, "echo".into(), "{".into()).unwrap_err();
        assert!(err.message.contains("not valid JSON"));
    }

    #[test]
    fn panics_become_errors() {
        let err = __call(call, "boom".into(), "{}".into()).unwrap_err();
        assert!(err.panicked);
        assert!(err.message.contains("kaboom"), "{}", err.message);
    }

    #[test]
    fn the_exported_header_uses_abi_stables_symbol_name() {
        assert_eq!(
            abi_stable::library::ROOT_MODULE_LOADER_NAME,
            "_1as_0lib_1header_0root_bmodule_bloader"
        );
    }

    #[test]
    fn manifest_crosses_as_json_schema_text() {
        let manifest = PluginManifest::new("p", "1").tool(ToolManifest::new(
            "t",
            "d",
            json!({"type": "object"}),
        ));
        let ffi = manifest.to_ffi();
        assert_eq!(
            ffi.tools[0].input_schema_json.as_str(),
            r#"{"type":"object"}"#
        );
    }
}
