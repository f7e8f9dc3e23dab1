//! The contract between the Quiver host and its `.so` tool plugins, typed
//! tools on top of it, and a harness that loads a built plugin the way the
//! host does.
//!
//! A plugin is a `cdylib` crate. Its tools are plain Rust functions marked
//! [`#[tool]`](macro@tool): the argument type (`Deserialize + JsonSchema`)
//! gives the input schema, with `additionalProperties: false`; the doc
//! comment gives the description; the result type gives the output schema.
//! [`plugin!`] exports them:
//!
//! ```
//! use quiver_plugin_api::{JsonSchema, ToolError, tool};
//! use serde::{Deserialize, Serialize};
//!
//! /// Arguments of `hello`.
//! #[derive(Deserialize, JsonSchema)]
//! struct HelloArgs {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! /// The greeting.
//! #[derive(Serialize, JsonSchema)]
//! struct Hello {
//!     greeting: String,
//! }
//!
//! /// Greets someone by name.
//! #[tool(read_only, idempotent)]
//! fn hello(args: HelloArgs) -> Result<Hello, ToolError> {
//!     if args.name.is_empty() {
//!         return Err(ToolError::invalid_argument("name", "must not be empty"));
//!     }
//!     Ok(Hello { greeting: format!("hello, {}", args.name) })
//! }
//!
//! quiver_plugin_api::plugin! { name: "hello", tools: [hello] }
//! # fn main() {}
//! ```
//!
//! Underneath, the plugin exports one abi_stable root module,
//! [`PluginModule`]: the plugin ABI version, `manifest()`, `init(host,
//! config)`, `call(tool, arguments_json)` and `shutdown()`, plus a plain
//! [`AbiStamp`] the host reads first, so that a plugin built against
//! another version is refused with both versions named. [`export_plugin!`]
//! is that layer for plugins written without the typed API. Every export
//! catches panics inside the plugin and returns them to the host as errors
//! (a panic must never unwind across the boundary).
//!
//! Calls run on the host's blocking thread pool, one call per thread at a
//! time, possibly several calls concurrently: a plugin must be `Sync` in
//! spirit (no unsynchronised global state). Plugin code cannot see the
//! host's tokio runtime (each `.so` links its own copy of every crate), so a
//! plugin that needs async code must run its own small runtime. `tracing`
//! events a plugin emits land in the daemon's log under the plugin's name.
//!
//! With the `testing` feature, [`testing::TestPlugin`] loads the built
//! `.so` through the host's own checks and calls its tools with JSON.

mod error;
mod export;
mod ffi;
#[cfg(feature = "loader")]
pub mod loader;
mod manifest;
#[cfg(feature = "testing")]
pub mod testing;
pub mod typed;

#[doc(hidden)]
pub use abi_stable;
pub use error::ToolError;
#[doc(hidden)]
pub use export::{__call, __init, __manifest, __module, __shutdown};
pub use ffi::{
    ABI_STAMP_SYMBOL, AbiStamp, FfiError, FfiHost, FfiManifest, FfiTool, PluginModule,
    PluginModuleRef,
};
pub use manifest::{PluginManifest, ToolHints, ToolManifest};
/// Makes a plugin tool of a plain function; see the crate documentation.
pub use quiver_tool_macros::tool;
pub use schemars::{self, JsonSchema};
pub use serde_json;
/// The `tracing` whose events reach the host's log (use this one: each
/// plugin's events go through the copy of `tracing` this crate links).
pub use tracing;

/// The plugin ABI version this crate describes; plugins built against this
/// crate carry it in their root module and their [`AbiStamp`].
///
/// 2 (quiver-plugin-api 0.2): structured errors, tool titles, hints and
/// output schemas, config schemas, `init` and `shutdown`, the stamp.
/// 1 (quiver-plugin-api 0.1): manifest and call only.
pub const PLUGIN_ABI_VERSION: u32 = 2;

/// The oldest plugin ABI version a host built against this crate accepts.
pub const MIN_SUPPORTED_ABI_VERSION: u32 = 2;

/// This crate's version: what a plugin must be built against to load into
/// a host built with it.
pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A string argument, or an [`invalid_argument`](ToolError::invalid_argument)
/// error naming it (for plugins written without the typed API).
pub fn str_arg<'a>(arguments: &'a serde_json::Value, name: &str) -> Result<&'a str, ToolError> {
    arguments
        .get(name)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| ToolError::invalid_argument(name, "must be a string"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn manifest_crosses_as_json_schema_text() {
        let manifest = PluginManifest::new("p", "1").tool(
            ToolManifest::new("t", "d", json!({"type": "object"}))
                .title("T")
                .hints(ToolHints {
                    read_only: Some(true),
                    ..ToolHints::default()
                }),
        );
        let ffi = manifest.to_ffi();
        assert_eq!(
            ffi.tools[0].input_schema_json.as_str(),
            r#"{"type":"object"}"#
        );
        assert_eq!(ffi.api_version.as_str(), API_VERSION);
        assert_eq!(ffi.tools[0].read_only_hint.into_option(), Some(true));
        assert_eq!(ffi.tools[0].idempotent_hint.into_option(), None);
        assert!(ffi.config_schema_json.is_none());
    }

    #[test]
    fn str_arg_names_the_argument() {
        let error = str_arg(&json!({"a": 1}), "a").unwrap_err();
        assert_eq!(error.code(), ToolError::INVALID_ARGUMENT);
        assert_eq!(error.data().unwrap()["field"], "a");
    }
}
