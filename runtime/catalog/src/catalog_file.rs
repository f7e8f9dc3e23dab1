//! Catalog files: tool lists in the `{"servers": [{"name", "tools": [...]}]}`
//! format of the shared reference catalogs, read into MCP sources, and the
//! live registry written back out in the same format.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use quiver_tool::registry::{RegistryReport, ToolRegistry};
use quiver_tool::schema::Schema;
use quiver_tool::tool::{ToolAnnotations, ToolMetadata, ToolSource, ToolSpec};

/// A catalog file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CatalogFileError {
    /// The file could not be read.
    #[error("cannot read catalog {file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a catalog.
    #[error("{file}:{line}:{column}: not a tool catalog: {message}")]
    Format {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong (serde's message names the field).
        message: String,
    },
}

/// One server of a catalog file.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CatalogServer {
    /// Server name.
    pub name: String,
    /// What the server is for.
    #[serde(default)]
    pub description: String,
    /// Its display name, if the catalog gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its tools.
    pub tools: Vec<CatalogTool>,
}

/// One tool of a catalog file.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CatalogTool {
    /// Tool name on its server.
    pub name: String,
    /// Description (may be empty).
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments, read one tool at a time into its
    /// compact text (see [`Schema`]).
    #[serde(rename = "inputSchema", default = "Schema::empty_object")]
    pub input_schema: Schema,
    /// The underlying call the tool makes, if the catalog says (Gorilla's
    /// `api_call`); entries with the same call are one operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_call: Option<String>,
    /// Its display name (MCP `title`), if the catalog gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its MCP annotations (a title and behaviour hints), if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<CatalogAnnotations>,
}

/// A tool's MCP `annotations` in a catalog file.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct CatalogAnnotations {
    /// A display name, used when the tool has no `title` of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The behaviour hints (`readOnlyHint` and the others).
    #[serde(flatten)]
    pub hints: ToolAnnotations,
}

impl CatalogTool {
    /// What the tool says besides its name, description and arguments, by
    /// the rule a live MCP server's tools are read with: its own title,
    /// else its annotations' title, and the behaviour hints. So a catalog
    /// dumped from a daemon (`quiver tools --dump`) searches as the daemon
    /// does.
    fn metadata(&self) -> ToolMetadata {
        let annotations = self.annotations.as_ref();
        ToolMetadata {
            title: ToolMetadata::title_from(
                self.title.as_deref(),
                annotations.and_then(|a| a.title.as_deref()),
            ),
            annotations: annotations.map(|a| a.hints).unwrap_or_default(),
            ..ToolMetadata::default()
        }
    }
}

/// A catalog file's contents (extra fields are ignored).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CatalogDocument {
    /// The servers.
    pub servers: Vec<CatalogServer>,
}

/// Reads a catalog file.
pub fn read(path: &Path) -> Result<CatalogDocument, CatalogFileError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| CatalogFileError::Io {
        file: file.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| CatalogFileError::Format {
        file,
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// Registers every server of `documents` as an MCP source, with its title
/// and description as the source's description, in one registry generation
/// (two when descriptions change). A server name already used by an
/// earlier document gets `_2`, `_3`… and a warning. The documents' names,
/// descriptions and schemas move into the registry, not copied.
pub fn register(
    registry: &ToolRegistry,
    documents: impl IntoIterator<Item = CatalogDocument>,
) -> Vec<RegistryReport> {
    let mut used = BTreeSet::new();
    let mut sources = Vec::new();
    let mut descriptions = Vec::new();
    for document in documents {
        for server in document.servers {
            let mut name = server.name.clone();
            let mut n = 2;
            while used.contains(&name) {
                name = format!("{}_{n}", server.name);
                n += 1;
            }
            if name != server.name {
                tracing::warn!(server = %server.name, renamed = %name, "server name already loaded from another catalog");
            }
            used.insert(name.clone());
            let specs = server
                .tools
                .into_iter()
                .map(|t| {
                    let metadata = t.metadata();
                    ToolSpec::new(t.name, t.description, t.input_schema)
                        .with_operation(t.api_call)
                        .with_metadata(metadata)
                })
                .collect();
            let description = match server.title.as_deref().map(str::trim) {
                Some(title) if !title.is_empty() => format!("{title}. {}", server.description),
                _ => server.description.clone(),
            };
            descriptions.push((ToolSource::Mcp(name.clone()), description));
            sources.push((ToolSource::Mcp(name), specs));
        }
    }
    registry.set_descriptions(descriptions);
    registry.set_many(sources)
}

/// The registry's deferrable tools in catalog-file form, one server per
/// plugin or MCP server, with each tool's original name.
pub fn dump(registry: &ToolRegistry) -> CatalogDocument {
    let snapshot = registry.snapshot();
    let servers = snapshot
        .groups()
        .iter()
        // Core tools are the runtime's own, always sent: not a catalog's.
        .filter(|group| *group.source() != ToolSource::Core)
        .map(|group| CatalogServer {
            name: group.source().group().unwrap_or("core").to_owned(),
            description: group
                .description()
                .map(|d| d.to_string())
                .unwrap_or_default(),
            title: None,
            tools: group
                .tools()
                .iter()
                .map(|t| CatalogTool {
                    name: t.original_name().to_owned(),
                    description: t.description().to_owned(),
                    input_schema: t.input_schema().clone(),
                    api_call: t.operation().map(str::to_owned),
                    title: t.title().map(str::to_owned),
                    annotations: (t.annotations() != ToolAnnotations::default()).then(|| {
                        CatalogAnnotations {
                            title: None,
                            hints: t.annotations(),
                        }
                    }),
                })
                .collect(),
        })
        .collect();
    CatalogDocument { servers }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry holding the catalog file `text`, read from disk.
    fn registered(text: &str) -> ToolRegistry {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.json");
        std::fs::write(&path, text).unwrap();
        let registry = ToolRegistry::new();
        register(&registry, [read(&path).unwrap()]);
        registry
    }

    #[test]
    fn a_tools_call_is_read_as_its_operation_and_written_back() {
        let registry = registered(
            r#"{"servers": [{"name": "hub", "tools": [
                {"name": "encoder", "description": "Text vectors", "api_call": "load('encoder')"},
                {"name": "plain", "description": "No call", "api_call": "  "}
            ]}]}"#,
        );
        let snapshot = registry.snapshot();
        let tools = snapshot.groups()[0].tools();
        let operation = |name: &str| {
            tools
                .iter()
                .find(|t| t.original_name() == name)
                .and_then(|t| t.operation().map(str::to_owned))
        };
        assert_eq!(operation("encoder").as_deref(), Some("load('encoder')"));
        // A blank call declares nothing.
        assert_eq!(operation("plain"), None);
        let dumped = dump(&registry);
        let calls: Vec<Option<&str>> = dumped.servers[0]
            .tools
            .iter()
            .map(|t| t.api_call.as_deref())
            .collect();
        assert_eq!(calls, [Some("load('encoder')"), None]);
    }

    #[test]
    fn a_tools_title_and_hints_are_read_as_from_a_live_server_and_written_back() {
        let registry = registered(
            r#"{"servers": [{"name": "s", "tools": [
                {"name": "own", "description": "", "title": "Own Title",
                 "annotations": {"title": "Annotated", "readOnlyHint": true}},
                {"name": "annotated", "description": "d", "annotations": {"title": "From Hints"}},
                {"name": "blank", "description": "d", "title": "  "},
                {"name": "plain", "description": "d"}
            ]}]}"#,
        );
        let snapshot = registry.snapshot();
        let tool = |name: &str| {
            snapshot.groups()[0]
                .tools()
                .iter()
                .find(|t| t.original_name() == name)
                .unwrap()
                .clone()
        };
        assert_eq!(tool("own").title(), Some("Own Title"));
        assert_eq!(tool("own").annotations().read_only_hint, Some(true));
        assert_eq!(tool("annotated").title(), Some("From Hints"));
        assert_eq!(tool("blank").title(), None);
        assert!(tool("plain").metadata().is_none());
        // Searched by its title, as a live server's tool is.
        let assembler = crate::assembly::Assembler::new(Default::default());
        let assembly = assembler.assemble(&snapshot, &quiver_tool::scope::Scope::all(), 100_000);
        let found = assembly.search("hints", Some(1));
        assert_eq!(found[0].tool.name(), "mcp_s_annotated");

        let dumped = dump(&registry);
        let again = ToolRegistry::new();
        register(&again, [dumped]);
        let round_trip = again.snapshot();
        for (before, after) in snapshot.groups()[0]
            .tools()
            .iter()
            .zip(round_trip.groups()[0].tools())
        {
            assert_eq!(before.metadata(), after.metadata(), "{}", before.name());
        }
    }
}
