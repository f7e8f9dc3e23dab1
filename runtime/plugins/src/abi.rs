//! Opening a plugin file with abi_stable's header API, the layout and ABI
//! version checks, and the manifest checks.
//!
//! Each generation is opened from its own path with
//! [`lib_header_from_path`] and [`LibHeader::init_root_module`]: not
//! `RootModule::load_from_file`, which caches the first module of a type
//! for the whole process and would hand every reload the first generation.
//!
//! [`LibHeader::init_root_module`]: abi_stable::library::LibHeader::init_root_module

use std::collections::HashSet;
use std::path::Path;

use abi_stable::library::{LibraryError, lib_header_from_path};
use quiver_plugin_api::{
    FfiManifest, MIN_SUPPORTED_ABI_VERSION, PLUGIN_ABI_VERSION, PluginModuleRef,
};
use serde_json::Value;

use super::PluginError;
use quiver_tool::naming::{is_bridge_name, is_valid_plain_name};
use quiver_tool::tool::ToolSpec;

/// A checked manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Plugin name.
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// Its tools, with parsed schemas.
    pub tools: Vec<ToolSpec>,
}

/// Whether the host accepts a plugin built for ABI `version`.
pub fn check_abi_version(path: &Path, version: u32) -> Result<(), PluginError> {
    if (MIN_SUPPORTED_ABI_VERSION..=PLUGIN_ABI_VERSION).contains(&version) {
        Ok(())
    } else {
        Err(PluginError::AbiVersion {
            path: path.to_owned(),
            found: version,
            min: MIN_SUPPORTED_ABI_VERSION,
            max: PLUGIN_ABI_VERSION,
        })
    }
}

/// Checks a manifest as it came across the boundary.
pub fn check_manifest(path: &Path, ffi: &FfiManifest) -> Result<Manifest, PluginError> {
    let bad = |detail: String| PluginError::Manifest {
        path: path.to_owned(),
        detail,
    };
    let name = ffi.name.as_str();
    if !is_valid_plain_name(name) {
        return Err(bad(format!(
            "plugin name `{name}` must be 1 to 64 characters from [A-Za-z0-9_-]"
        )));
    }
    let mut seen = HashSet::new();
    let mut tools = Vec::with_capacity(ffi.tools.len());
    for tool in ffi.tools.iter() {
        let tool_name = tool.name.as_str();
        if !is_valid_plain_name(tool_name) {
            return Err(bad(format!(
                "tool name `{tool_name}` must be 1 to 64 characters from [A-Za-z0-9_-]"
            )));
        }
        if is_bridge_name(tool_name) {
            return Err(bad(format!(
                "tool `{tool_name}`: the name is reserved for the tool-search bridge"
            )));
        }
        if !seen.insert(tool_name) {
            return Err(bad(format!("tool `{tool_name}` is listed twice")));
        }
        let schema: Value = serde_json::from_str(tool.input_schema_json.as_str())
            .map_err(|e| bad(format!("tool `{tool_name}`: input schema is not JSON: {e}")))?;
        if !schema.is_object() {
            return Err(bad(format!(
                "tool `{tool_name}`: input schema must be a JSON object"
            )));
        }
        tools.push(ToolSpec::new(tool_name, tool.description.as_str(), schema));
    }
    Ok(Manifest {
        name: name.to_owned(),
        version: ffi.version.to_string(),
        tools,
    })
}

fn library_error(path: &Path, error: LibraryError) -> PluginError {
    let path = path.to_owned();
    match error {
        LibraryError::OpenError { .. } | LibraryError::GetSymbolError { .. } => PluginError::Open {
            path,
            detail: error.to_string(),
        },
        LibraryError::RootModule { .. } => PluginError::Open {
            path,
            detail: error.to_string(),
        },
        other => PluginError::AbiMismatch {
            detail: summarise_layout_error(&path, &other.to_string()),
            path,
        },
    }
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

/// Opens the file at `path` (a private copy), checks its layout and ABI
/// version, and reads and checks its manifest.
pub fn open(path: &Path) -> Result<(PluginModuleRef, Manifest), PluginError> {
    let header = lib_header_from_path(path).map_err(|e| library_error(path, e))?;
    let module = header
        .init_root_module::<PluginModuleRef>()
        .map_err(|e| library_error(path, e))?;
    check_abi_version(path, module.abi_version())?;
    let ffi = match (module.manifest())() {
        abi_stable::std_types::RResult::ROk(ffi) => ffi,
        abi_stable::std_types::RResult::RErr(error) => {
            return Err(PluginError::Manifest {
                path: path.to_owned(),
                detail: error.message.to_string(),
            });
        }
    };
    let manifest = check_manifest(path, &ffi)?;
    Ok((module, manifest))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use quiver_plugin_api::FfiTool;

    fn ffi(tools: &[(&str, &str)]) -> FfiManifest {
        FfiManifest {
            name: "p".into(),
            version: "1".into(),
            tools: tools
                .iter()
                .map(|(name, schema)| FfiTool {
                    name: (*name).into(),
                    description: "d".into(),
                    input_schema_json: (*schema).into(),
                })
                .collect(),
        }
    }

    fn detail(result: Result<Manifest, PluginError>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn good_manifest_is_read() {
        let m = check_manifest(Path::new("p.so"), &ffi(&[("a", "{\"type\":\"object\"}")])).unwrap();
        assert_eq!(m.tools[0].name, "a");
    }

    #[test]
    fn bad_manifests_say_why_and_name_the_file() {
        let p = Path::new("/d/p.so");
        let e = detail(check_manifest(p, &ffi(&[("a", "{}"), ("a", "{}")])));
        assert!(e.contains("/d/p.so") && e.contains("listed twice"), "{e}");
        let e = detail(check_manifest(p, &ffi(&[("tool_search", "{}")])));
        assert!(e.contains("reserved"), "{e}");
        let e = detail(check_manifest(p, &ffi(&[("a b", "{}")])));
        assert!(e.contains("[A-Za-z0-9_-]"), "{e}");
        let e = detail(check_manifest(p, &ffi(&[("a", "{")])));
        assert!(e.contains("not JSON"), "{e}");
        let e = detail(check_manifest(p, &ffi(&[("a", "[]")])));
        assert!(e.contains("JSON object"), "{e}");
    }

    #[test]
    fn abi_versions_outside_the_range_are_refused() {
        assert!(check_abi_version(Path::new("p.so"), PLUGIN_ABI_VERSION).is_ok());
        let e = check_abi_version(Path::new("p.so"), PLUGIN_ABI_VERSION + 1).unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
        assert!(check_abi_version(Path::new("p.so"), 0).is_err());
    }
}
