//! Quiver: an agent runtime that holds many tools without drowning the
//! model in schemas.
//!
//! The pieces, in the order a turn uses them:
//!
//! - [`registry`]: the live tools of every source, as immutable snapshots;
//! - [`catalog`]: one session's eager and deferred tools at one generation;
//! - [`listing`]: the token-budgeted per-server listing of the deferred tools;
//! - [`assembly`]: the exact tools array for this turn, tier by tier;
//! - [`bridge`]: `tool_search`, `tool_describe` and `tool_call`;
//! - [`core_tools`]: `read_file`, `write_file`, `list_dir`, `search_files`
//!   and `run_command`, confined to the workspace root;
//! - [`dispatch`]: the middleware chain every tool call runs, sessions and
//!   the activity feed;
//! - [`search`]: BM25 retrieval behind `tool_search`;
//! - [`plugins`]: `.so` tool plugins, hot-reloaded, called on a blocking pool;
//! - [`mcp`]: MCP servers (stdio and Streamable HTTP) through rmcp;
//! - [`model`]: model providers (OpenAI-compatible and Anthropic clients);
//! - [`agent`]: one agent turn: assemble, ask the model, dispatch, repeat;
//! - [`store`]: sessions, messages and the activity log in SQLite;
//! - [`daemon`]: `quiver serve`: the HTTP API and the MCP gateway.
//!
//! ```
//! use quiver_runtime::{assembly::Assembler, config::ToolSearchConfig, registry::ToolRegistry};
//! use quiver_runtime::{scope::Scope, tool::{ToolSource, ToolSpec}};
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

pub mod agent;
pub mod assembly;
pub mod bridge;
pub mod catalog;
pub mod catalog_file;
pub mod config;
pub mod core_tools;
pub mod daemon;
pub mod dispatch;
pub mod enhanced;
pub mod eval;
pub mod listing;
pub mod mcp;
pub mod model;
pub mod naming;
pub mod plugins;
pub mod registry;
pub mod scope;
pub mod search;
pub mod store;
pub mod tokens;
pub mod tool;
