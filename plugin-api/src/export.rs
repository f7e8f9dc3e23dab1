//! The plugin side of the boundary: the functions [`export_plugin!`] and
//! [`plugin!`] put behind the root module, each catching every panic of
//! the author's code (a panic must never unwind into the host), and the
//! `tracing` subscriber that forwards a plugin's log events to the host.
//!
//! [`export_plugin!`]: crate::export_plugin
//! [`plugin!`]: crate::plugin

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use abi_stable::std_types::{RResult, RStr, RString};
use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

use crate::ffi::{FfiError, FfiHost, FfiManifest};
use crate::{PluginManifest, ToolError};

/// The plugin's name, from its manifest (each generation is its own copy
/// of this static): log records carry it.
static PLUGIN_NAME: OnceLock<String> = OnceLock::new();

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
        code: "plugin_panicked".into(),
        message: format!("the plugin panicked {during}: {}", panic_message(payload)).into(),
        data_json: abi_stable::std_types::ROption::RNone,
    }
}

/// Runs a manifest function, catching panics. Used by the export macros.
#[doc(hidden)]
pub fn __manifest(manifest: impl FnOnce() -> PluginManifest) -> RResult<FfiManifest, FfiError> {
    match catch_unwind(AssertUnwindSafe(manifest)) {
        Ok(manifest) => {
            let _ = PLUGIN_NAME.set(manifest.name.clone());
            RResult::ROk(manifest.to_ffi())
        }
        Err(payload) => RResult::RErr(panicked(&*payload, "building its manifest")),
    }
}

/// Installs the log forwarder, then runs the plugin's own `init` with its
/// configuration, catching panics. Used by the export macros.
#[doc(hidden)]
pub fn __init(
    init: impl FnOnce(Value) -> Result<(), ToolError>,
    host: FfiHost,
    config_json: RStr<'_>,
) -> RResult<(), FfiError> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        install_host_log(host);
        let config: Value = serde_json::from_str(config_json.as_str()).map_err(|e| {
            ToolError::new("invalid_config", format!("configuration is not JSON: {e}"))
        })?;
        init(config)
    }));
    match outcome {
        Ok(Ok(())) => RResult::ROk(()),
        Ok(Err(error)) => RResult::RErr(error.to_ffi()),
        Err(payload) => RResult::RErr(panicked(&*payload, "in init")),
    }
}

/// Runs a call function, catching panics. Used by the export macros.
#[doc(hidden)]
pub fn __call(
    call: impl FnOnce(&str, Value) -> Result<Value, ToolError>,
    tool: RStr<'_>,
    arguments_json: RStr<'_>,
) -> RResult<RString, FfiError> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let arguments: Value = serde_json::from_str(arguments_json.as_str()).map_err(|e| {
            ToolError::new(
                "invalid_arguments",
                format!("arguments are not valid JSON: {e}"),
            )
        })?;
        call(tool.as_str(), arguments).map(|value| value.to_string())
    }));
    match outcome {
        Ok(Ok(json)) => RResult::ROk(json.into()),
        Ok(Err(error)) => RResult::RErr(error.to_ffi()),
        Err(payload) => RResult::RErr(panicked(&*payload, &format!("in `{}`", tool.as_str()))),
    }
}

/// Runs a shutdown hook, catching (and dropping) panics: the host has
/// nobody to report them to. Used by the export macros.
#[doc(hidden)]
pub fn __shutdown(shutdown: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(shutdown)) {
        tracing::error!("shutdown panicked: {}", panic_message(&*payload));
    }
}

/// Builds the root module. Used by the export macros.
#[doc(hidden)]
pub fn __module(
    manifest: extern "C" fn() -> RResult<FfiManifest, FfiError>,
    init: extern "C" fn(FfiHost, RStr<'_>) -> RResult<(), FfiError>,
    call: extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<RString, FfiError>,
    shutdown: extern "C" fn(),
) -> crate::PluginModuleRef {
    use abi_stable::prefix_type::PrefixTypeTrait;
    crate::ffi::PluginModule {
        abi_version: crate::PLUGIN_ABI_VERSION,
        manifest,
        init,
        call,
        shutdown,
    }
    .leak_into_prefix()
}

/// A `tracing` subscriber that hands every event to the host's log
/// callback: the record lands in the daemon's log under the plugin's name.
/// Spans are not forwarded (only their events are).
struct HostLog {
    host: FfiHost,
    plugin: String,
    max: LevelFilter,
}

fn level_number(level: Level) -> u8 {
    match level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

/// The host's level number (1 error .. 5 trace, 0 off) as a filter.
pub(crate) fn level_filter(number: u8) -> LevelFilter {
    match number {
        0 => LevelFilter::OFF,
        1 => LevelFilter::ERROR,
        2 => LevelFilter::WARN,
        3 => LevelFilter::INFO,
        4 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.rest, " {}={value}", field.name());
        }
    }
}

impl Subscriber for HostLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= self.max
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.max)
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        fields.message.push_str(&fields.rest);
        let metadata = event.metadata();
        (self.host.log)(
            level_number(*metadata.level()),
            self.plugin.as_str().into(),
            metadata.target().into(),
            fields.message.as_str().into(),
        );
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

/// Makes the plugin's `tracing` events reach the host. Each generation
/// links its own `tracing`, so this sets that copy's global subscriber
/// (a second init of the same copy keeps the first).
fn install_host_log(host: FfiHost) {
    let subscriber = HostLog {
        host,
        plugin: PLUGIN_NAME.get().cloned().unwrap_or_default(),
        max: level_filter(host.max_level),
    };
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// Exports a plugin from a manifest function `fn() -> PluginManifest` and a
/// call function `fn(&str, serde_json::Value) -> Result<serde_json::Value,
/// ToolError>`, optionally with `init = fn(serde_json::Value) -> Result<(),
/// ToolError>` (the plugin's configuration) and `shutdown = fn()`. Use it
/// once, at the crate root of a `cdylib` crate. This is the untyped layer
/// under [`plugin!`](crate::plugin); prefer that.
///
/// Panics in any of them are caught inside the plugin and reach the host
/// as errors.
#[macro_export]
macro_rules! export_plugin {
    ($manifest:path, $call:path $(, init = $init:path)? $(, shutdown = $shutdown:path)? $(,)?) => {
        extern "C" fn __quiver_plugin_manifest()
        -> $crate::abi_stable::std_types::RResult<$crate::FfiManifest, $crate::FfiError> {
            // A panic here would abort: `__manifest` catches every panic of
            // the author's code, and nothing else can panic.
            $crate::__manifest($manifest)
        }

        extern "C" fn __quiver_plugin_init(
            host: $crate::FfiHost,
            config_json: $crate::abi_stable::std_types::RStr<'_>,
        ) -> $crate::abi_stable::std_types::RResult<(), $crate::FfiError> {
            #[allow(unused_variables)]
            let init = |config: $crate::serde_json::Value| -> ::core::result::Result<(), $crate::ToolError> {
                $( return $init(config); )?
                #[allow(unreachable_code)]
                Ok(())
            };
            $crate::__init(init, host, config_json)
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

        extern "C" fn __quiver_plugin_shutdown() {
            $crate::__shutdown(|| { $( $shutdown(); )? });
        }

        fn __quiver_plugin_root_module() -> $crate::PluginModuleRef {
            $crate::__module(
                __quiver_plugin_manifest,
                __quiver_plugin_init,
                __quiver_plugin_call,
                __quiver_plugin_shutdown,
            )
        }

        $crate::__export_header!(__quiver_plugin_root_module);
    };
}

/// Exports the abi_stable header for a root-module function `$root: fn() ->
/// PluginModuleRef`, and the [`AbiStamp`](crate::AbiStamp) the host reads
/// before checking layouts. [`export_plugin!`](crate::export_plugin) uses
/// it; use it directly only to build a root module by hand (as the host's
/// test fixtures do).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_header {
    ($root:path) => {
        /// Which ABI and API version this plugin was built for.
        #[unsafe(no_mangle)]
        #[allow(non_upper_case_globals)]
        pub static quiver_plugin_abi_stamp: $crate::AbiStamp = $crate::AbiStamp::current();

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

    fn call(tool: &str, arguments: Value) -> Result<Value, ToolError> {
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
        assert_eq!(err.code.as_str(), "unknown_tool");
        assert!(err.message.contains("nope"));
        let err = __call(call, "echo".into(), "{".into()).unwrap_err();
        assert!(err.message.contains("not valid JSON"));
    }

    #[test]
    fn panics_become_errors() {
        let err = __call(call, "boom".into(), "{}".into()).unwrap_err();
        assert!(err.panicked);
        assert!(err.message.contains("kaboom"), "{}", err.message);
        __shutdown(|| panic!("ignored"));
    }

    #[test]
    fn the_exported_header_uses_abi_stables_symbol_name() {
        assert_eq!(
            abi_stable::library::ROOT_MODULE_LOADER_NAME,
            "_1as_0lib_1header_0root_bmodule_bloader"
        );
    }

    #[test]
    fn the_stamp_carries_this_crates_versions() {
        let stamp = crate::AbiStamp::current();
        assert_eq!(stamp.abi_version, crate::PLUGIN_ABI_VERSION);
        assert_eq!(stamp.api_version(), crate::API_VERSION);
        assert_eq!(crate::ABI_STAMP_SYMBOL, b"quiver_plugin_abi_stamp\0");
        let _ = json!(null);
    }
}
