//! Opening a built plugin file and checking it before anything is served:
//! the ABI stamp (a plugin built against another version is refused with
//! both versions named), abi_stable's layout check, the manifest (names,
//! every schema compiled with `jsonschema`), the configuration against the
//! plugin's config schema, and `init`. The host's loader and
//! [`testing`](crate::testing) both go through here, so a plugin's own
//! tests see exactly the refusals the daemon would give.
//!
//! Each call opens the file at its own path with abi_stable's header API
//! ([`lib_header_from_raw_library`] + [`LibHeader::init_root_module`]):
//! not `RootModule::load_from_file`, which caches the first module of a
//! type for the whole process. The library is never closed.
//!
//! [`LibHeader::init_root_module`]: abi_stable::library::LibHeader::init_root_module

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use abi_stable::library::{LibraryError, RawLibrary, lib_header_from_raw_library};
use abi_stable::std_types::{RResult, RStr};
use serde_json::{Value, json};

use crate::ffi::{ABI_STAMP_SYMBOL, AbiStamp, FfiHost, FfiManifest};
use crate::{
    API_VERSION, MIN_SUPPORTED_ABI_VERSION, PLUGIN_ABI_VERSION, PluginManifest, PluginModuleRef,
    ToolError, ToolHints, ToolManifest,
};

/// The bridge's tool names: no plugin tool may take them.
pub const BRIDGE_TOOL_NAMES: [&str; 3] = ["tool_search", "tool_describe", "tool_call"];

/// Why a plugin file was not loaded (the caller adds the file's path).
#[derive(Debug, Clone, PartialEq)]
pub enum LoadError {
    /// The dynamic loader or abi_stable could not open the file.
    Open(String),
    /// The plugin was built for an ABI version this host does not speak.
    AbiVersion {
        /// The plugin's ABI version.
        found: u32,
        /// The `quiver-plugin-api` it was built against.
        found_api: String,
    },
    /// The root module's layout differs from this host's.
    AbiMismatch(String),
    /// The manifest breaks a rule.
    Manifest(String),
    /// The configuration does not fit the plugin's config schema, or the
    /// plugin takes none.
    Config(String),
    /// The plugin's `init` refused to start.
    Init(ToolError),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Open(detail) => write!(f, "cannot load: {detail}"),
            LoadError::AbiVersion { found, found_api } => write!(
                f,
                "built for plugin ABI {found} (quiver-plugin-api {found_api}), but this host speaks plugin ABI {} (quiver-plugin-api {API_VERSION}); rebuild the plugin against quiver-plugin-api {API_VERSION}",
                abi_range()
            ),
            LoadError::AbiMismatch(detail) => write!(f, "ABI mismatch: {detail}"),
            LoadError::Manifest(detail) => write!(f, "bad manifest: {detail}"),
            LoadError::Config(detail) => write!(f, "bad configuration: {detail}"),
            LoadError::Init(error) => {
                write!(f, "init failed ({}): {}", error.code(), error.message())
            }
        }
    }
}

impl std::error::Error for LoadError {}

fn abi_range() -> String {
    if MIN_SUPPORTED_ABI_VERSION == PLUGIN_ABI_VERSION {
        PLUGIN_ABI_VERSION.to_string()
    } else {
        format!("{MIN_SUPPORTED_ABI_VERSION} to {PLUGIN_ABI_VERSION}")
    }
}

/// Whether the host accepts a plugin built for ABI `version`.
pub fn abi_supported(version: u32) -> bool {
    (MIN_SUPPORTED_ABI_VERSION..=PLUGIN_ABI_VERSION).contains(&version)
}

/// The plugin's stamp, when it exports one that looks right.
fn read_stamp(library: &RawLibrary) -> Option<AbiStamp> {
    // SAFETY: the symbol, when a Quiver plugin exports it, is an
    // `AbiStamp` static (a `repr(C)` struct of plain bytes that never
    // changes shape); the magic number is checked before anything else is
    // trusted.
    let stamp = unsafe {
        let symbol = library.get::<*const AbiStamp>(ABI_STAMP_SYMBOL).ok()?;
        let pointer: *const AbiStamp = *symbol;
        if pointer.is_null() {
            return None;
        }
        std::ptr::read_unaligned(pointer)
    };
    (stamp.magic == AbiStamp::MAGIC).then_some(stamp)
}

/// abi_stable prints both layouts in full; keep its verdict (the text from
/// its last `Error:` on) and log the layouts at debug level.
fn summarise_layout_error(path: &Path, text: &str) -> String {
    tracing::debug!(file = %path.display(), layouts = text, "plugin layout check failed");
    match text.rfind("Error:") {
        Some(start) => {
            let verdict = text[start + "Error:".len()..]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .replace(" Expected: ", ": expected ")
                .replace(" Found: ", ", found ");
            format!(
                "the root module's layout differs from this host's: {verdict} (QUIVER_LOG=debug prints both layouts)"
            )
        }
        None => text.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

fn library_error(path: &Path, error: LibraryError, stamp: Option<&AbiStamp>) -> LoadError {
    match error {
        LibraryError::OpenError { .. }
        | LibraryError::GetSymbolError { .. }
        | LibraryError::RootModule { .. } => LoadError::Open(error.to_string()),
        other => {
            let verdict = summarise_layout_error(path, &other.to_string());
            let fix = match stamp {
                None => format!(
                    "the plugin exports no ABI stamp, so it was built against quiver-plugin-api 0.1 (plugin ABI 1) or is not a Quiver plugin; this host speaks plugin ABI {} (quiver-plugin-api {API_VERSION}): rebuild it against quiver-plugin-api {API_VERSION}",
                    abi_range()
                ),
                Some(stamp) => format!(
                    "the plugin was built against quiver-plugin-api {} (plugin ABI {}); rebuild it against quiver-plugin-api {API_VERSION}, the version this host was built with",
                    stamp.api_version(),
                    stamp.abi_version
                ),
            };
            LoadError::AbiMismatch(format!("{verdict}; {fix}"))
        }
    }
}

/// Opens the plugin file at `path`, checks its stamp, layout and ABI
/// version, and reads and checks its manifest. `init` is not called yet
/// (see [`init`]).
pub fn open(path: &Path) -> Result<(PluginModuleRef, PluginManifest), LoadError> {
    let library = RawLibrary::load_at(path).map_err(|e| LoadError::Open(e.to_string()))?;
    let stamp = read_stamp(&library);
    if let Some(stamp) = &stamp
        && !abi_supported(stamp.abi_version)
    {
        std::mem::forget(library);
        return Err(LoadError::AbiVersion {
            found: stamp.abi_version,
            found_api: stamp.api_version(),
        });
    }
    // SAFETY: the library stays loaded for the rest of the process (it is
    // forgotten below, never closed), which the header's `'static`
    // references need.
    let header = unsafe { lib_header_from_raw_library(&library) };
    std::mem::forget(library);
    let header = header.map_err(|e| library_error(path, e, stamp.as_ref()))?;
    let module = header
        .init_root_module::<PluginModuleRef>()
        .map_err(|e| library_error(path, e, stamp.as_ref()))?;
    if !abi_supported(module.abi_version()) {
        return Err(LoadError::AbiVersion {
            found: module.abi_version(),
            found_api: stamp.map_or_else(|| "unknown".to_owned(), |s| s.api_version()),
        });
    }
    let ffi = match (module.manifest())() {
        RResult::ROk(ffi) => ffi,
        RResult::RErr(error) => return Err(LoadError::Manifest(error.message.to_string())),
    };
    let manifest = check_manifest(&ffi)?;
    Ok((module, manifest))
}

/// Whether `name` is 1 to 64 characters from `[A-Za-z0-9_-]`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Compiles `schema` with `jsonschema` (which checks it against its
/// meta-schema first); the error names the place inside the schema.
pub fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema).map_err(|error| {
        let at = error.instance_path().as_str().to_owned();
        let at = if at.is_empty() {
            "(root)".to_owned()
        } else {
            at
        };
        format!("at {at}: {error}")
    })
}

fn parse_schema(text: &str, what: &str) -> Result<Value, String> {
    let schema: Value =
        serde_json::from_str(text).map_err(|e| format!("{what} is not JSON: {e}"))?;
    if !schema.is_object() {
        return Err(format!("{what} must be a JSON object"));
    }
    compile_schema(&schema).map_err(|e| format!("{what} is not a valid JSON Schema {e}"))?;
    Ok(schema)
}

/// Checks a manifest as it came across the boundary and parses its schemas.
pub fn check_manifest(ffi: &FfiManifest) -> Result<PluginManifest, LoadError> {
    let bad = LoadError::Manifest;
    let name = ffi.name.as_str();
    if !is_valid_name(name) {
        return Err(bad(format!(
            "plugin name `{name}` must be 1 to 64 characters from [A-Za-z0-9_-]"
        )));
    }
    let mut seen = HashSet::new();
    let mut tools = Vec::with_capacity(ffi.tools.len());
    for tool in ffi.tools.iter() {
        let tool_name = tool.name.as_str();
        if !is_valid_name(tool_name) {
            return Err(bad(format!(
                "tool name `{tool_name}` must be 1 to 64 characters from [A-Za-z0-9_-]"
            )));
        }
        if BRIDGE_TOOL_NAMES.contains(&tool_name) {
            return Err(bad(format!(
                "tool `{tool_name}`: the name is reserved for the tool-search bridge"
            )));
        }
        if !seen.insert(tool_name) {
            return Err(bad(format!("tool `{tool_name}` is listed twice")));
        }
        let in_tool = |e: String| bad(format!("tool `{tool_name}`: {e}"));
        let input_schema =
            parse_schema(tool.input_schema_json.as_str(), "input schema").map_err(in_tool)?;
        let output_schema = match tool.output_schema_json.as_ref().into_option() {
            Some(text) => {
                let schema = parse_schema(text.as_str(), "output schema").map_err(in_tool)?;
                if schema.get("type").and_then(Value::as_str) != Some("object") {
                    return Err(in_tool(
                        "output schema must describe an object (`\"type\": \"object\"`)".into(),
                    ));
                }
                Some(schema)
            }
            None => None,
        };
        tools.push(ToolManifest {
            name: tool_name.to_owned(),
            description: tool.description.to_string(),
            input_schema,
            title: tool.title.as_ref().into_option().map(|t| t.to_string()),
            hints: ToolHints {
                read_only: tool.read_only_hint.into_option(),
                destructive: tool.destructive_hint.into_option(),
                idempotent: tool.idempotent_hint.into_option(),
                open_world: tool.open_world_hint.into_option(),
            },
            output_schema,
        });
    }
    let config_schema = match ffi.config_schema_json.as_ref().into_option() {
        Some(text) => Some(parse_schema(text.as_str(), "config schema").map_err(bad)?),
        None => None,
    };
    Ok(PluginManifest {
        name: name.to_owned(),
        version: ffi.version.to_string(),
        tools,
        config_schema,
    })
}

/// Checks `config` (the `plugins.config.NAME` section, `None` when
/// absent) against the manifest's config schema; an absent section is
/// checked as `{}`.
pub fn check_config(manifest: &PluginManifest, config: Option<&Value>) -> Result<(), LoadError> {
    let key = format!("plugins.config.{}", manifest.name);
    let Some(schema) = &manifest.config_schema else {
        return match config {
            Some(_) => Err(LoadError::Config(format!(
                "{key} is set, but plugin `{}` takes no configuration (its manifest declares no config schema)",
                manifest.name
            ))),
            None => Ok(()),
        };
    };
    let validator = compile_schema(schema).map_err(LoadError::Config)?;
    let empty = json!({});
    let problems: Vec<String> = validator
        .iter_errors(config.unwrap_or(&empty))
        .map(|e| format!("{key}{}: {e}", e.instance_path().as_str().replace('/', ".")))
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(LoadError::Config(problems.join("; ")))
    }
}

/// Runs the plugin's `init` with `config` (checked with [`check_config`]
/// first) and the host's callbacks.
pub fn init(
    module: &PluginModuleRef,
    manifest: &PluginManifest,
    config: Option<&Value>,
) -> Result<(), LoadError> {
    check_config(manifest, config)?;
    let text = config.map_or_else(|| "null".to_owned(), Value::to_string);
    match (module.init())(host_callbacks(), RStr::from_str(&text)) {
        RResult::ROk(()) => Ok(()),
        RResult::RErr(error) => Err(LoadError::Init(ToolError::from_ffi(&error))),
    }
}

/// The host side of [`FfiHost`]: plugin log records go to this process's
/// `tracing` under the target `quiver::plugin`, with the plugin's name.
pub fn host_callbacks() -> FfiHost {
    use tracing::level_filters::LevelFilter;
    let max_level = match LevelFilter::current() {
        LevelFilter::OFF => 0,
        LevelFilter::ERROR => 1,
        LevelFilter::WARN => 2,
        LevelFilter::INFO => 3,
        LevelFilter::DEBUG => 4,
        _ => 5,
    };
    FfiHost {
        log: host_log,
        max_level,
    }
}

extern "C" fn host_log(level: u8, plugin: RStr<'_>, target: RStr<'_>, message: RStr<'_>) {
    // A panic must not unwind back into the plugin.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let (plugin, module, message) = (plugin.as_str(), target.as_str(), message.as_str());
        match level {
            1 => tracing::error!(target: "quiver::plugin", plugin, module, "{message}"),
            2 => tracing::warn!(target: "quiver::plugin", plugin, module, "{message}"),
            3 => tracing::info!(target: "quiver::plugin", plugin, module, "{message}"),
            4 => tracing::debug!(target: "quiver::plugin", plugin, module, "{message}"),
            _ => tracing::trace!(target: "quiver::plugin", plugin, module, "{message}"),
        }
    }));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::FfiTool;
    use abi_stable::std_types::ROption;

    fn ffi(tools: &[(&str, &str)]) -> FfiManifest {
        FfiManifest {
            name: "p".into(),
            version: "1".into(),
            api_version: API_VERSION.into(),
            tools: tools
                .iter()
                .map(|(name, schema)| FfiTool {
                    name: (*name).into(),
                    description: "d".into(),
                    input_schema_json: (*schema).into(),
                    title: ROption::RNone,
                    read_only_hint: ROption::RSome(true),
                    destructive_hint: ROption::RNone,
                    idempotent_hint: ROption::RNone,
                    open_world_hint: ROption::RNone,
                    output_schema_json: ROption::RNone,
                })
                .collect(),
            config_schema_json: ROption::RNone,
        }
    }

    fn detail(result: Result<PluginManifest, LoadError>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn good_manifest_is_read() {
        let m = check_manifest(&ffi(&[("a", "{\"type\":\"object\"}")])).unwrap();
        assert_eq!(m.tools[0].name, "a");
        assert_eq!(m.tools[0].hints.read_only, Some(true));
    }

    #[test]
    fn bad_manifests_say_why() {
        let e = detail(check_manifest(&ffi(&[("a", "{}"), ("a", "{}")])));
        assert!(e.contains("listed twice"), "{e}");
        let e = detail(check_manifest(&ffi(&[("tool_search", "{}")])));
        assert!(e.contains("reserved"), "{e}");
        let e = detail(check_manifest(&ffi(&[("a b", "{}")])));
        assert!(e.contains("[A-Za-z0-9_-]"), "{e}");
        let e = detail(check_manifest(&ffi(&[("a", "{")])));
        assert!(e.contains("not JSON"), "{e}");
        let e = detail(check_manifest(&ffi(&[("a", "[]")])));
        assert!(e.contains("JSON object"), "{e}");
        let e = detail(check_manifest(&ffi(&[(
            "a",
            r#"{"type":"object","properties":{"x":{"type":"strin"}}}"#,
        )])));
        assert!(
            e.contains("tool `a`: input schema is not a valid JSON Schema at /properties/x/type"),
            "{e}"
        );
    }

    #[test]
    fn config_is_checked_against_the_declared_schema() {
        let mut manifest = PluginManifest::new("p", "1");
        assert!(check_config(&manifest, None).is_ok());
        let e = check_config(&manifest, Some(&json!({"a": 1}))).unwrap_err();
        assert!(e.to_string().contains("takes no configuration"), "{e}");
        manifest.config_schema = Some(json!({
            "type": "object",
            "properties": {"limit": {"type": "integer"}},
            "additionalProperties": false
        }));
        assert!(check_config(&manifest, None).is_ok());
        let e = check_config(&manifest, Some(&json!({"limit": "x"}))).unwrap_err();
        assert!(e.to_string().contains("plugins.config.p.limit"), "{e}");
    }

    #[test]
    fn abi_versions_outside_the_range_are_refused() {
        assert!(abi_supported(PLUGIN_ABI_VERSION));
        assert!(!abi_supported(PLUGIN_ABI_VERSION + 1));
        assert!(!abi_supported(1));
        let e = LoadError::AbiVersion {
            found: 1,
            found_api: "0.1.0".into(),
        }
        .to_string();
        assert!(
            e.contains("plugin ABI 1 (quiver-plugin-api 0.1.0)")
                && e.contains(&format!(
                    "rebuild the plugin against quiver-plugin-api {API_VERSION}"
                )),
            "{e}"
        );
    }
}
