//! The three bridge tools that stand in for the deferred catalog:
//! `tool_search(query, limit?)`, `tool_describe(name)` and
//! `tool_call(name, arguments)`: their schemas and their handlers.
//!
//! `tool_call` does not run anything here: it resolves the real tool and
//! its arguments into a [`ResolvedCall`] that the dispatch chain runs, with
//! the real tool name, exactly as if the model had called it directly.

use std::sync::Arc;

pub use quiver_tool::executor::ResolvedCall;
use serde_json::{Map, Value, json};

use crate::assembly::Assembly;
use quiver_tool::naming::{BRIDGE_TOOL_NAMES, is_bridge_name};
use quiver_tool::tool::Tool;

/// `tool_search`.
pub const TOOL_SEARCH: &str = "tool_search";
/// `tool_describe`.
pub const TOOL_DESCRIBE: &str = "tool_describe";
/// `tool_call`.
pub const TOOL_CALL: &str = "tool_call";

/// Longest description returned in a search match, in characters.
pub const MATCH_DESCRIPTION_CHARS: usize = 400;

/// How many close names an unknown-tool error suggests.
pub const SUGGESTIONS: usize = 3;

/// Schema of `tool_search`'s arguments.
pub fn search_schema(default_limit: usize, max_limit: usize) -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Keywords for the task or tool you need, e.g. \"create github issue\". Add server:NAME to search one server."
            },
            "queries": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": MAX_BATCH,
                "description": "Several searches at once, instead of `query`; one result list each."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": max_limit,
                "description": format!("How many matches to return (default {default_limit}, at most {max_limit}).")
            }
        },
        "additionalProperties": false
    })
}

/// Most queries or names one `tool_search` or `tool_describe` call takes.
pub const MAX_BATCH: usize = 10;

/// Schema of `tool_describe`'s arguments.
pub fn describe_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Exact tool name, as listed or found by tool_search."},
            "names": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": MAX_BATCH,
                "description": "Several tools at once, instead of `name`."
            }
        },
        "additionalProperties": false
    })
}

/// Schema of `tool_call`'s arguments.
pub fn call_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Exact tool name, as listed or found by tool_search."},
            "arguments": {
                "type": "object",
                "description": "The tool's arguments, matching the schema from tool_describe (a JSON-encoded object string is accepted too)."
            }
        },
        "required": ["name"],
        "additionalProperties": false
    })
}

/// A bridge request that cannot be carried out; the message is written for
/// the model and says what to do instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BridgeError {
    /// The bridge tool's arguments are not a JSON object.
    #[error("{bridge} takes a JSON object of arguments, got {found}")]
    NotAnObject {
        /// Which bridge tool.
        bridge: &'static str,
        /// The JSON type received.
        found: &'static str,
    },
    /// `name` is missing or not a string.
    #[error("{bridge} needs `name`: the exact name of a tool (a string)")]
    MissingName {
        /// Which bridge tool.
        bridge: &'static str,
    },
    /// `query` is missing or not a string.
    #[error(
        "tool_search needs `query`: keywords describing the tool you need (a string), or `queries`: a list of them"
    )]
    MissingQuery,
    /// `queries` or `names` is not a list of strings, or too long.
    #[error("{bridge} `{key}` must be a list of 1 to {max} strings")]
    BadBatch {
        /// Which bridge tool.
        bridge: &'static str,
        /// `queries` or `names`.
        key: &'static str,
        /// The longest list accepted.
        max: usize,
    },
    /// `limit` is not an integer.
    #[error("tool_search `limit` must be an integer from 1 to {max}, got {found}")]
    BadLimit {
        /// The value received.
        found: String,
        /// The largest limit.
        max: usize,
    },
    /// `tool_call` was asked to call a bridge tool.
    #[error("`{name}` is a bridge tool; call it directly, not through tool_call")]
    BridgeToolNamed {
        /// The bridge tool named.
        name: String,
    },
    /// `arguments` is a string that is not valid JSON.
    #[error("arguments for `{tool}` are not valid JSON: {error}")]
    InvalidArgumentsJson {
        /// The tool.
        tool: String,
        /// The parser's message, with line and column.
        error: String,
    },
    /// `arguments` is JSON but not an object.
    #[error("arguments for `{tool}` must be a JSON object, got {found}")]
    ArgumentsNotObject {
        /// The tool.
        tool: String,
        /// The JSON type received.
        found: &'static str,
    },
    /// No tool of that name exists.
    #[error("unknown tool `{name}`{}", suggestion_text(.suggestions))]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// Up to three close in-scope names.
        suggestions: Vec<String>,
    },
    /// The tool exists but this session was not granted it.
    #[error("tool `{name}` is not available in this session")]
    NotAvailable {
        /// The name asked for.
        name: String,
    },
}

fn suggestion_text(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        "; use tool_search to find tools".to_owned()
    } else {
        format!(
            "; did you mean {}?",
            suggestions
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

impl BridgeError {
    /// A short stable code for the error kind.
    pub fn code(&self) -> &'static str {
        match self {
            BridgeError::NotAnObject { .. } => "arguments_not_object",
            BridgeError::MissingName { .. } => "missing_name",
            BridgeError::MissingQuery => "missing_query",
            BridgeError::BadBatch { .. } => "bad_batch",
            BridgeError::BadLimit { .. } => "bad_limit",
            BridgeError::BridgeToolNamed { .. } => "bridge_tool_named",
            BridgeError::InvalidArgumentsJson { .. } => "invalid_arguments_json",
            BridgeError::ArgumentsNotObject { .. } => "arguments_not_object",
            BridgeError::UnknownTool { .. } => "unknown_tool",
            BridgeError::NotAvailable { .. } => "not_available",
        }
    }

    /// The error as the JSON tool result the model receives.
    pub fn to_json(&self) -> Value {
        let mut out = json!({"error": self.code(), "message": self.to_string()});
        if let BridgeError::UnknownTool { suggestions, .. } = self {
            out["suggestions"] = json!(suggestions);
        }
        out
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object<'a>(
    bridge: &'static str,
    arguments: &'a Value,
) -> Result<&'a Map<String, Value>, BridgeError> {
    arguments.as_object().ok_or(BridgeError::NotAnObject {
        bridge,
        found: json_type(arguments),
    })
}

fn name_argument<'a>(
    bridge: &'static str,
    arguments: &'a Map<String, Value>,
) -> Result<&'a str, BridgeError> {
    arguments
        .get("name")
        .and_then(Value::as_str)
        .ok_or(BridgeError::MissingName { bridge })
}

fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// One match as `tool_search` reports it.
pub fn match_json(tool: &Tool, score: f64) -> Value {
    let mut entry = json!({
        "name": tool.name(),
        "source": tool.source().kind(),
    });
    if let Some(group) = tool.source().group() {
        entry[if tool.source().kind() == "plugin" {
            "plugin"
        } else {
            "server"
        }] = json!(group);
    }
    entry["tool"] = json!(tool.original_name());
    entry["description"] = json!(cut(tool.description(), MATCH_DESCRIPTION_CHARS));
    entry["score"] = json!(round_score(score));
    entry
}

/// Scores rounded to 6 decimals, so results print stably.
pub fn round_score(score: f64) -> f64 {
    (score * 1e6).round() / 1e6
}

fn batch<'a>(
    bridge: &'static str,
    key: &'static str,
    arguments: &'a Map<String, Value>,
) -> Result<Option<Vec<&'a str>>, BridgeError> {
    let Some(value) = arguments.get(key) else {
        return Ok(None);
    };
    let bad = BridgeError::BadBatch {
        bridge,
        key,
        max: MAX_BATCH,
    };
    let items = value.as_array().ok_or(bad.clone())?;
    if items.is_empty() || items.len() > MAX_BATCH {
        return Err(bad);
    }
    items
        .iter()
        .map(|item| item.as_str().ok_or(bad.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `tool_search`: one `query`, or several `queries` answered together.
pub fn search(assembly: &Assembly, arguments: &Value) -> Result<Value, BridgeError> {
    search_with_status(assembly, arguments, None)
}

/// `tool_search`, with the MCP servers' states: when nothing matched, the
/// note also names each server that is still connecting, failing or
/// disabled (pass a [`ScopedStatus`](quiver_tool::status::ScopedStatus) so that
/// only the session's servers are named).
pub fn search_with_status(
    assembly: &Assembly,
    arguments: &Value,
    status: Option<&dyn quiver_tool::status::McpStatusView>,
) -> Result<Value, BridgeError> {
    let arguments = object(TOOL_SEARCH, arguments)?;
    let max = assembly.config().max_search_limit;
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_i64()
                .or_else(|| {
                    value
                        .as_f64()
                        .filter(|f| f.fract() == 0.0)
                        .map(|f| f as i64)
                })
                .ok_or_else(|| BridgeError::BadLimit {
                    found: value.to_string(),
                    max,
                })?,
        ),
    };
    if let Some(queries) = batch(TOOL_SEARCH, "queries", arguments)? {
        let results: Vec<Value> = queries
            .into_iter()
            .map(|query| search_one(assembly, query, limit, status))
            .collect();
        return Ok(json!({"results": results}));
    }
    let query = arguments
        .get("query")
        .and_then(Value::as_str)
        .ok_or(BridgeError::MissingQuery)?;
    Ok(search_one(assembly, query, limit, status))
}

fn search_one(
    assembly: &Assembly,
    query: &str,
    limit: Option<i64>,
    status: Option<&dyn quiver_tool::status::McpStatusView>,
) -> Value {
    let hits = assembly.search(query, limit);
    let matches: Vec<Value> = hits
        .iter()
        .map(|hit| match_json(&hit.tool, hit.score))
        .collect();
    let mut out = json!({"query": query, "matches": matches});
    if hits.is_empty() {
        let mut note = empty_result_note(assembly, query);
        if let Some(unavailable) = status.and_then(quiver_tool::status::unavailable_note) {
            note.push(' ');
            note.push_str(&unavailable);
        }
        out["note"] = json!(note);
    }
    out
}

fn empty_result_note(assembly: &Assembly, query: &str) -> String {
    let groups: Vec<&str> = assembly
        .catalog()
        .groups()
        .iter()
        .map(|g| g.name())
        .collect();
    if groups.is_empty() {
        format!(
            "No deferred tool matched `{query}`: no deferred tools are available in this session right now."
        )
    } else {
        format!(
            "No deferred tool matched `{query}`. Try other or fewer keywords, or a server name. Servers: {}.",
            groups.join(", ")
        )
    }
}

/// `tool_describe`: one `name`, or several `names` (each answered with its
/// description or its own error).
pub fn describe(assembly: &Assembly, arguments: &Value) -> Result<Value, BridgeError> {
    let arguments = object(TOOL_DESCRIBE, arguments)?;
    if let Some(names) = batch(TOOL_DESCRIBE, "names", arguments)? {
        let tools: Vec<Value> = names
            .into_iter()
            .map(|name| describe_one(assembly, name).unwrap_or_else(|e| e.to_json()))
            .collect();
        return Ok(json!({"tools": tools}));
    }
    let name = name_argument(TOOL_DESCRIBE, arguments)?;
    describe_one(assembly, name)
}

fn describe_one(assembly: &Assembly, name: &str) -> Result<Value, BridgeError> {
    if is_bridge_name(name) && assembly.has_bridge() {
        let schema = assembly.bridge_schema(name).unwrap_or(Value::Null);
        return Ok(json!({
            "name": name,
            "source": "bridge",
            "input_schema": schema,
            "note": "this bridge tool is already in your tool list; call it directly",
        }));
    }
    let tool = lookup(assembly, name)?;
    let mut out = json!({
        "name": tool.name(),
        "source": tool.source().kind(),
    });
    if let Some(group) = tool.source().group() {
        out[if tool.source().kind() == "plugin" {
            "plugin"
        } else {
            "server"
        }] = json!(group);
    }
    out["tool"] = json!(tool.original_name());
    out["description"] = json!(tool.description());
    out["input_schema"] = tool.input_schema().clone();
    if assembly.catalog().is_eager(tool.name()) {
        out["note"] = json!("this tool is already in your tool list; call it directly");
    }
    Ok(out)
}

/// Finds an in-scope tool by exact name, or says why not.
pub fn lookup<'a>(assembly: &'a Assembly, name: &str) -> Result<&'a Arc<Tool>, BridgeError> {
    if let Some(tool) = assembly.catalog().find(name) {
        return Ok(tool);
    }
    if assembly.snapshot().get(name).is_some() {
        return Err(BridgeError::NotAvailable {
            name: name.to_owned(),
        });
    }
    Err(BridgeError::UnknownTool {
        name: name.to_owned(),
        suggestions: closest_names(assembly, name),
    })
}

/// Up to [`SUGGESTIONS`] in-scope names closest to `name` (case-insensitive
/// edit distance; ties by name). Out-of-scope names are never suggested.
pub fn closest_names(assembly: &Assembly, name: &str) -> Vec<String> {
    let wanted = name.trim().to_lowercase();
    let mut scored: Vec<(f64, &str)> = assembly
        .catalog()
        .in_scope()
        .map(|t| {
            (
                strsim::normalized_damerau_levenshtein(&wanted, &t.name().to_lowercase()),
                t.name(),
            )
        })
        .chain(
            assembly
                .has_bridge()
                .then_some(BRIDGE_TOOL_NAMES)
                .into_iter()
                .flatten()
                .map(|b| (strsim::normalized_damerau_levenshtein(&wanted, b), b)),
        )
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored
        .into_iter()
        .filter(|(similarity, _)| *similarity > 0.0)
        .take(SUGGESTIONS)
        .map(|(_, n)| n.to_owned())
        .collect()
}

/// Resolves a call of `name` with raw `arguments` (an object, a JSON string
/// of one, or null for none) to the real tool of this assembly: used for
/// `tool_call` and for direct calls. The arguments are not checked against
/// the schema here: the dispatch chain validates them against the whole
/// schema, so that one error lists every problem. The session's scope is
/// checked by the dispatcher.
pub fn resolve(
    assembly: &Assembly,
    name: &str,
    arguments: Option<&Value>,
    via_bridge: bool,
) -> Result<ResolvedCall, BridgeError> {
    if is_bridge_name(name) {
        return Err(BridgeError::BridgeToolNamed {
            name: name.to_owned(),
        });
    }
    let tool = lookup(assembly, name)?;
    let arguments = match arguments {
        None | Some(Value::Null) => Map::new(),
        Some(Value::String(text)) => {
            let parsed: Value =
                serde_json::from_str(text).map_err(|e| BridgeError::InvalidArgumentsJson {
                    tool: tool.name().to_owned(),
                    error: e.to_string(),
                })?;
            match parsed {
                Value::Object(map) => map,
                other => {
                    return Err(BridgeError::ArgumentsNotObject {
                        tool: tool.name().to_owned(),
                        found: json_type(&other),
                    });
                }
            }
        }
        Some(Value::Object(map)) => map.clone(),
        Some(other) => {
            return Err(BridgeError::ArgumentsNotObject {
                tool: tool.name().to_owned(),
                found: json_type(other),
            });
        }
    };
    Ok(ResolvedCall {
        tool: tool.clone(),
        arguments,
        via_bridge,
    })
}

/// `tool_call`: its `name` and `arguments` resolved (see [`resolve`]).
pub fn call(assembly: &Assembly, arguments: &Value) -> Result<ResolvedCall, BridgeError> {
    let arguments = object(TOOL_CALL, arguments)?;
    let name = name_argument(TOOL_CALL, arguments)?;
    resolve(assembly, name, arguments.get("arguments"), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assembly::Assembler;
    use crate::settings::ToolSearchConfig;
    use quiver_tool::registry::ToolRegistry;
    use quiver_tool::scope::Scope;
    use quiver_tool::tool::{ToolSource, ToolSpec};

    fn assembly(scope: Scope) -> Assembly {
        let registry = ToolRegistry::new();
        registry.set_source_tools(ToolSource::Core, vec![ToolSpec::new("read_file", "Read a file", json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}))]);
        registry.set_source_tools(
            ToolSource::Mcp("github".into()),
            vec![
                ToolSpec::new("create_issue", "Create an issue", json!({"type": "object", "properties": {"title": {}, "body": {}}, "required": ["title"]})),
                ToolSpec::new("list_issues", "List issues", json!({"type": "object"})),
            ],
        );
        registry.set_source_tools(
            ToolSource::Mcp("secret".into()),
            vec![ToolSpec::new(
                "create_issue",
                "Hidden",
                json!({"type": "object"}),
            )],
        );
        Assembler::new(ToolSearchConfig::default()).assemble(&registry.snapshot(), &scope, 100_000)
    }

    #[test]
    fn search_validates_its_arguments() {
        let a = assembly(Scope::all());
        assert_eq!(
            search(&a, &json!({})).unwrap_err(),
            BridgeError::MissingQuery
        );
        assert_eq!(
            search(&a, &json!("issue")).unwrap_err().code(),
            "arguments_not_object"
        );
        assert_eq!(
            search(&a, &json!({"query": "x", "limit": "many"}))
                .unwrap_err()
                .code(),
            "bad_limit"
        );
        let out = search(&a, &json!({"query": "issue", "limit": 1})).unwrap();
        assert_eq!(out["matches"].as_array().unwrap().len(), 1);
        let m = &out["matches"][0];
        assert_eq!(m["source"], "mcp");
        assert_eq!(m["server"], "github");
        assert!(m["tool"] == "create_issue" || m["tool"] == "list_issues");
    }

    #[test]
    fn empty_search_names_the_servers() {
        let a = assembly(Scope::new(["core", "mcp-github"]).unwrap());
        let out = search(&a, &json!({"query": "zzzz"})).unwrap();
        let note = out["note"].as_str().unwrap();
        assert!(
            note.contains("github") && !note.contains("secret"),
            "{note}"
        );
    }

    #[test]
    fn describe_gives_full_schema_and_notes_visible_tools() {
        let a = assembly(Scope::all());
        let out = describe(&a, &json!({"name": "mcp_github_create_issue"})).unwrap();
        assert_eq!(out["input_schema"]["required"], json!(["title"]));
        assert!(out.get("note").is_none());
        let out = describe(&a, &json!({"name": "read_file"})).unwrap();
        assert!(out["note"].as_str().unwrap().contains("already"));
        let out = describe(&a, &json!({"name": "tool_call"})).unwrap();
        assert_eq!(out["source"], "bridge");
        assert_eq!(describe(&a, &json!({})).unwrap_err().code(), "missing_name");
    }

    #[test]
    fn out_of_scope_tools_are_not_available_and_never_suggested() {
        let a = assembly(Scope::new(["core", "mcp-github"]).unwrap());
        let err = describe(&a, &json!({"name": "mcp_secret_create_issue"})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tool `mcp_secret_create_issue` is not available in this session"
        );
        assert!(err.to_json().get("input_schema").is_none());
        let err = call(&a, &json!({"name": "mcp_secret_create_issu"})).unwrap_err();
        match err {
            BridgeError::UnknownTool { suggestions, .. } => {
                assert!(suggestions.len() <= SUGGESTIONS);
                assert!(
                    suggestions.iter().all(|s| !s.contains("secret")),
                    "{suggestions:?}"
                );
            }
            other => panic!("expected unknown tool, got {other:?}"),
        }
    }

    #[test]
    fn call_resolves_the_real_tool() {
        let a = assembly(Scope::all());
        let resolved = call(
            &a,
            &json!({"name": "mcp_github_create_issue", "arguments": {"title": "t"}}),
        )
        .unwrap();
        assert_eq!(resolved.tool.name(), "mcp_github_create_issue");
        assert!(resolved.via_bridge);
        let resolved = call(
            &a,
            &json!({"name": "mcp_github_create_issue", "arguments": "{\"title\": \"t\"}"}),
        )
        .unwrap();
        assert_eq!(resolved.arguments["title"], "t");
        let resolved = call(&a, &json!({"name": "mcp_github_list_issues"})).unwrap();
        assert!(resolved.arguments.is_empty());
    }

    #[test]
    fn call_errors_are_specific() {
        let a = assembly(Scope::all());
        let code = |v: Value| call(&a, &v).unwrap_err().code();
        assert_eq!(code(json!({})), "missing_name");
        assert_eq!(code(json!({"name": 3})), "missing_name");
        assert_eq!(
            code(json!({"name": "tool_call", "arguments": {}})),
            "bridge_tool_named"
        );
        assert_eq!(
            code(json!({"name": "mcp_github_create_issue", "arguments": "{bad"})),
            "invalid_arguments_json"
        );
        assert_eq!(
            code(json!({"name": "mcp_github_create_issue", "arguments": [1]})),
            "arguments_not_object"
        );
        assert_eq!(
            code(json!({"name": "mcp_github_create_issue", "arguments": "[1]"})),
            "arguments_not_object"
        );
        let err = call(&a, &json!({"name": "MCP_github_create_issue"})).unwrap_err();
        match err {
            BridgeError::UnknownTool { suggestions, .. } => {
                assert_eq!(suggestions[0], "mcp_github_create_issue")
            }
            other => panic!("expected unknown tool, got {other:?}"),
        }
    }

    #[test]
    fn invalid_json_error_carries_the_parse_position() {
        let a = assembly(Scope::all());
        let err = call(
            &a,
            &json!({"name": "mcp_github_create_issue", "arguments": "{\"title\": }"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("line 1 column"), "{err}");
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;
    use crate::assembly::Assembler;
    use crate::settings::ToolSearchConfig;
    use quiver_tool::registry::ToolRegistry;
    use quiver_tool::scope::Scope;
    use quiver_tool::tool::{ToolSource, ToolSpec};

    fn assembly() -> Assembly {
        let registry = ToolRegistry::new();
        registry.set_source_tools(
            ToolSource::Mcp("github".into()),
            vec![
                ToolSpec::new("create_issue", "Create an issue", json!({"type": "object"})),
                ToolSpec::new(
                    "merge_pull_request",
                    "Merge a pull request",
                    json!({"type": "object"}),
                ),
            ],
        );
        Assembler::new(ToolSearchConfig::default()).assemble(
            &registry.snapshot(),
            &Scope::all(),
            100_000,
        )
    }

    #[test]
    fn several_queries_in_one_call() {
        let a = assembly();
        let out = search(
            &a,
            &json!({"queries": ["open an issue", "merge pull request"], "limit": 1}),
        )
        .unwrap();
        let results = out["results"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(results[0]["matches"][0]["tool"], "create_issue");
        assert_eq!(results[1]["matches"][0]["tool"], "merge_pull_request");
        assert_eq!(
            search(&a, &json!({"queries": []})).unwrap_err().code(),
            "bad_batch"
        );
        assert_eq!(
            search(&a, &json!({"queries": [1]})).unwrap_err().code(),
            "bad_batch"
        );
        let too_many: Vec<String> = (0..=MAX_BATCH).map(|i| format!("q{i}")).collect();
        assert_eq!(
            search(&a, &json!({"queries": too_many}))
                .unwrap_err()
                .code(),
            "bad_batch"
        );
    }

    #[test]
    fn several_names_in_one_describe() {
        let a = assembly();
        let out = describe(&a, &json!({"names": ["mcp_github_create_issue", "nope"]})).unwrap();
        let tools = out["tools"].as_array().unwrap();
        assert_eq!(tools[0]["tool"], "create_issue");
        assert_eq!(tools[1]["error"], "unknown_tool");
    }
}
