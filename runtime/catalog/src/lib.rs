//! What the model is sent for a turn: one session's [`catalog`] of eager
//! and deferred tools, the token-budgeted [`listing`] of the deferred ones,
//! the [`assembly`] (tier 0, 1 or 2, byte-identical for the same tools),
//! the bridge tools `tool_search`, `tool_describe` and `tool_call` ([`bridge_tools`]
//! defines them, [`bridge`] carries their calls out),
//! the [`settings`] of `tools.tool_search`, [`catalog_file`], the
//! shared catalog format the CLI and benchmarks read, and [`indexing`], the
//! per-source search segments built in the background, with [`semantic`],
//! the optional embedding stage fused with them, and [`query`], how much of
//! a query is searched.
//!
//! ```
//! use quiver_catalog::{assembly::Assembler, settings::ToolSearchConfig};
//! use quiver_tool::{registry::ToolRegistry, scope::Scope, tool::{ToolSource, ToolSpec}};
//! use serde_json::json;
//!
//! let registry = ToolRegistry::new();
//! registry.set_source_tools(
//!     ToolSource::Mcp("github".into()),
//!     vec![ToolSpec::new("create_issue", "Open a new issue", json!({"type": "object"}))],
//! );
//! let assembler = Assembler::new(ToolSearchConfig::default());
//! let assembly = assembler.assemble(&registry.snapshot(), &Scope::all(), 200_000);
//! assert_eq!(assembly.tools().len(), 3); // the bridge stands in for the tool
//! let hits = assembly.search("open issue", None);
//! assert_eq!(hits[0].tool.name(), "mcp_github_create_issue");
//! ```

pub mod assembly;
pub mod background;
pub mod bridge;
pub mod bridge_tools;
pub mod catalog;
pub mod catalog_file;
pub mod indexing;
pub mod listing;
pub mod query;
pub mod semantic;
pub mod settings;
