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
use quiver_tool::tokens::json_chars;
use quiver_tool::tool::Tool;

/// Longest description returned in a search match, in characters.
pub const MATCH_DESCRIPTION_CHARS: usize = 400;

/// How many close names an unknown-tool error suggests.
pub const SUGGESTIONS: usize = 3;

pub use crate::bridge_tools::{
    MAX_BATCH, TOOL_CALL, TOOL_DESCRIBE, TOOL_SEARCH, call_schema, describe_schema, search_schema,
};

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
    /// `query` is missing.
    #[error(
        "tool_search needs `query`: keywords describing the tool you need (a string), or `queries`: a list of them"
    )]
    MissingQuery,
    /// `query` is given but is neither a string nor a list.
    #[error(
        "tool_search `query` must be a string of keywords describing the tool you need (or `queries`: a list of them), got {found}"
    )]
    QueryNotText {
        /// What was received.
        found: String,
    },
    /// `queries` or `names` is not a list of strings (nor one string).
    #[error(
        "{bridge} `{key}` must be a list of 1 to {max} strings (a single string, or a JSON-encoded list of strings, is accepted too), got {found}"
    )]
    BadBatch {
        /// Which bridge tool.
        bridge: &'static str,
        /// `queries` or `names`.
        key: &'static str,
        /// The longest list accepted.
        max: usize,
        /// What was received.
        found: String,
    },
    /// `queries` or `names` holds more items than one call takes.
    #[error(
        "{bridge} `{key}` holds {count} items, more than the {max} one call takes; send the rest in another call"
    )]
    BatchTooLong {
        /// Which bridge tool.
        bridge: &'static str,
        /// `queries` or `names`.
        key: &'static str,
        /// How many were sent.
        count: usize,
        /// The longest list accepted.
        max: usize,
    },
    /// A query is empty or only whitespace (or only `server:` filters).
    #[error(
        "tool_search needs keywords: {at} is blank; send words describing the tool you need, e.g. {{\"query\": \"create github issue\"}}"
    )]
    EmptyQuery {
        /// `query`, or `queries[i]`.
        at: String,
    },
    /// A bridge tool was called while the bridge is not active: every
    /// tool is already in the tool list.
    #[error(
        "`{name}` is not available: the tool bridge is not active in this session, so every tool is already in your tool list; call tools directly by their names"
    )]
    BridgeInactive {
        /// The bridge tool called.
        name: String,
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
    /// No tool of that name yet, and it is named like a tool of an MCP
    /// server of this session that is still connecting: not an unknown
    /// name, a server not ready.
    #[error(
        "`{name}` is not available yet: MCP server `{server}` is {state}; retry in a moment, or see tool_search"
    )]
    ServerConnecting {
        /// The name asked for.
        name: String,
        /// The server its name belongs to.
        server: String,
        /// The server's state, in words (`still connecting`, ...).
        state: String,
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
            BridgeError::QueryNotText { .. } => "query_not_text",
            BridgeError::BadBatch { .. } => "bad_batch",
            BridgeError::BatchTooLong { .. } => "batch_too_long",
            BridgeError::EmptyQuery { .. } => "empty_query",
            BridgeError::BridgeInactive { .. } => "bridge_inactive",
            BridgeError::BadLimit { .. } => "bad_limit",
            BridgeError::BridgeToolNamed { .. } => "bridge_tool_named",
            BridgeError::InvalidArgumentsJson { .. } => "invalid_arguments_json",
            BridgeError::ArgumentsNotObject { .. } => "arguments_not_object",
            BridgeError::UnknownTool { .. } => "unknown_tool",
            BridgeError::ServerConnecting { .. } => "server_connecting",
            BridgeError::NotAvailable { .. } => "not_available",
        }
    }

    /// The error as the JSON tool result the model receives.
    pub fn to_json(&self) -> Value {
        let mut out = json!({"error": self.code(), "message": self.to_string()});
        match self {
            BridgeError::UnknownTool { suggestions, .. } => {
                out["suggestions"] = json!(suggestions);
            }
            BridgeError::ServerConnecting { server, .. } => out["server"] = json!(server),
            _ => {}
        }
        out
    }
}

/// What kind of JSON value `value` is, as error messages name it
/// (`an array`, `null`, ...).
pub fn json_type(value: &Value) -> &'static str {
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
    if let Some(title) = tool.title() {
        entry["title"] = json!(title);
    }
    entry["description"] = json!(cut(tool.description(), MATCH_DESCRIPTION_CHARS));
    entry["score"] = json!(round_score(score));
    entry
}

/// Scores rounded to 6 decimals, so results print stably.
pub fn round_score(score: f64) -> f64 {
    (score * 1e6).round() / 1e6
}

/// The items of a batch argument (`queries`, `names`): a list of strings,
/// one string, or a string holding a JSON-encoded list of strings (what
/// models send when a gateway or prompt stringifies arrays). `None` when
/// the key is absent or null.
fn batch(
    bridge: &'static str,
    key: &'static str,
    arguments: &Map<String, Value>,
) -> Result<Option<Vec<String>>, BridgeError> {
    let bad = |found: &Value| BridgeError::BadBatch {
        bridge,
        key,
        max: MAX_BATCH,
        found: describe_value(found),
    };
    let value = match arguments.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(value) => value,
    };
    let decoded;
    let items: &[Value] = match value {
        Value::Array(items) => items,
        Value::String(text) if text.trim_start().starts_with('[') => {
            decoded = serde_json::from_str::<Value>(text).map_err(|_| bad(value))?;
            decoded
                .as_array()
                .map(Vec::as_slice)
                .ok_or_else(|| bad(value))?
        }
        Value::String(text) => return Ok(Some(vec![text.clone()])),
        other => return Err(bad(other)),
    };
    if items.is_empty() {
        return Err(bad(value));
    }
    if items.len() > MAX_BATCH {
        return Err(BridgeError::BatchTooLong {
            bridge,
            key,
            count: items.len(),
            max: MAX_BATCH,
        });
    }
    items
        .iter()
        .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| bad(value)))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// A short account of a received value for error messages: its JSON type,
/// and the value itself when short.
fn describe_value(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 60 {
        format!("{} ({text})", json_type(value))
    } else {
        json_type(value).to_owned()
    }
}

/// Refuses a query with no keywords (blank, or only `server:` filters).
fn check_query(query: &str, at: impl FnOnce() -> String) -> Result<(), BridgeError> {
    let (_, text) = quiver_search::enhanced::split_server_filters(query);
    if text.trim().is_empty() {
        Err(BridgeError::EmptyQuery { at: at() })
    } else {
        Ok(())
    }
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
    // `query` given a list is read as `queries`.
    let key = match arguments.get("queries") {
        None | Some(Value::Null) if arguments.get("query").is_some_and(Value::is_array) => "query",
        _ => "queries",
    };
    if let Some(queries) = batch(TOOL_SEARCH, key, arguments)? {
        for (index, query) in queries.iter().enumerate() {
            check_query(query, || format!("`{key}[{index}]`"))?;
        }
        let results: Vec<Value> = queries
            .iter()
            .map(|query| search_one(assembly, query, limit, status))
            .collect();
        return Ok(with_quarantine_note(json!({"results": results}), status));
    }
    let query = match arguments.get("query") {
        None | Some(Value::Null) => return Err(BridgeError::MissingQuery),
        Some(Value::String(query)) => query.as_str(),
        Some(other) => {
            return Err(BridgeError::QueryNotText {
                found: other.to_string(),
            });
        }
    };
    check_query(query, || "`query`".to_owned())?;
    Ok(with_quarantine_note(
        search_one(assembly, query, limit, status),
        status,
    ))
}

/// Adds `quarantined`, a sentence counting the tools of each server held
/// back until an operator accepts their definitions (never their names or
/// text), when there are any.
fn with_quarantine_note(
    mut out: Value,
    status: Option<&dyn quiver_tool::status::McpStatusView>,
) -> Value {
    if let Some(note) = status.and_then(quiver_tool::status::quarantine_note) {
        out["quarantined"] = json!(note);
    }
    out
}

/// Bounds a `tool_search` answer to `max_chars` characters of compact
/// JSON: matches are dropped from the end of the longest result lists
/// (never a match cut in the middle), and a note says how many and how to
/// get them (a lower `limit`, fewer `queries`, `server:`).
pub fn fit_search(out: &mut Value, max_chars: usize) {
    if json_chars(out) <= max_chars {
        return;
    }
    let mut dropped = 0usize;
    let note_room = 200;
    loop {
        let lists: Vec<&mut Vec<Value>> = match out.get_mut("results") {
            Some(Value::Array(results)) => results
                .iter_mut()
                .filter_map(|r| r.get_mut("matches").and_then(Value::as_array_mut))
                .collect(),
            _ => out
                .get_mut("matches")
                .and_then(Value::as_array_mut)
                .into_iter()
                .collect(),
        };
        let Some(longest) = lists
            .into_iter()
            .filter(|l| !l.is_empty())
            .max_by_key(|l| l.len())
        else {
            break;
        };
        longest.pop();
        dropped += 1;
        if json_chars(out) + note_room <= max_chars {
            break;
        }
    }
    out["note"] = json!(format!(
        "{dropped} lower-ranked matches left out to keep this result within {max_chars} characters; use a lower `limit`, fewer `queries` per call, or server:NAME to narrow the search."
    ));
}

fn search_one(
    assembly: &Assembly,
    query: &str,
    limit: Option<i64>,
    status: Option<&dyn quiver_tool::status::McpStatusView>,
) -> Value {
    let bounded = assembly.bound_query(query);
    let (hits, run) = assembly.search_bounded(&bounded, limit);
    let matches: Vec<Value> = hits
        .iter()
        .map(|hit| match_json(&hit.tool, hit.score))
        .collect();
    // The model sent the query: a long one is repeated by its start only.
    let echoed = crate::query::echo(query);
    let mut out = json!({"query": echoed, "matches": matches});
    if let Some(cut) = bounded.cut {
        out["query_cut"] = json!(cut.note());
    }
    // Which stages ranked them (`hybrid`, `lexical`), and a note when the
    // embedding stage is configured but did not rank every tool.
    if let (Some(out), Value::Object(run)) = (out.as_object_mut(), run.to_json()) {
        out.extend(run);
    }
    if hits.is_empty() {
        let mut note = empty_result_note(assembly, &echoed);
        if let Some(unavailable) = status.and_then(quiver_tool::status::unavailable_note) {
            note.push(' ');
            note.push_str(&unavailable);
        }
        if let Some(quarantined) = status.and_then(quiver_tool::status::quarantine_note) {
            note.push(' ');
            note.push_str(&quarantined);
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
            "No deferred tool matched `{query}` well enough to be worth calling. Rephrase with the words a tool's description would use for the task, fewer keywords, or server:NAME. Servers: {}.",
            groups.join(", ")
        )
    }
}

/// `tool_describe`: one `name`, or several `names` (each answered with its
/// description or its own error), uncapped.
pub fn describe(assembly: &Assembly, arguments: &Value) -> Result<Value, BridgeError> {
    describe_within(assembly, arguments, usize::MAX)
}

/// `tool_describe` whose answer stays within `max_chars` characters of
/// compact JSON: a batch keeps the tools that fit, in the order asked, and
/// names the ones left out in `omitted` with a note saying to ask for them
/// one at a time; a schema is never cut. One tool too large on its own has
/// its description shortened (`description_cut`); its schema stays whole
/// even when it alone exceeds the cap, since a cut schema cannot be used.
pub fn describe_within(
    assembly: &Assembly,
    arguments: &Value,
    max_chars: usize,
) -> Result<Value, BridgeError> {
    let arguments = object(TOOL_DESCRIBE, arguments)?;
    // `name` given a list is read as `names`.
    let key = match arguments.get("names") {
        None | Some(Value::Null) if arguments.get("name").is_some_and(Value::is_array) => "name",
        _ => "names",
    };
    if let Some(names) = batch(TOOL_DESCRIBE, key, arguments)? {
        let tools: Vec<(String, Value)> = names
            .into_iter()
            .map(|name| {
                let entry = describe_one(assembly, &name).unwrap_or_else(|e| e.to_json());
                (name, entry)
            })
            .collect();
        return Ok(fit_batch(tools, max_chars));
    }
    let name = name_argument(TOOL_DESCRIBE, arguments)?;
    let mut out = describe_one(assembly, name)?;
    shorten_description(&mut out, max_chars);
    Ok(out)
}

/// The `{"tools": [...]}` answer of a batch: every entry that fits within
/// `max_chars`, in order, the rest named in `omitted` with a note.
fn fit_batch(tools: Vec<(String, Value)>, max_chars: usize) -> Value {
    let sizes: Vec<usize> = tools.iter().map(|(_, entry)| json_chars(entry)).collect();
    let mut keep = vec![true; tools.len()];
    loop {
        let kept: Vec<Value> = tools
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|((_, entry), _)| entry.clone())
            .collect();
        let omitted: Vec<&str> = tools
            .iter()
            .zip(&keep)
            .filter(|(_, k)| !**k)
            .map(|((name, _), _)| name.as_str())
            .collect();
        let mut out = json!({"tools": kept});
        if !omitted.is_empty() {
            out["omitted"] = json!(omitted);
            out["note"] = json!(format!(
                "{} of {} tools left out to keep this result within {max_chars} characters: {}. Describe them one at a time, e.g. tool_describe {{\"name\": \"{}\"}}.",
                omitted.len(),
                tools.len(),
                omitted.join(", "),
                omitted[0],
            ));
        }
        if json_chars(&out) <= max_chars {
            return out;
        }
        // Leave out the largest entry still kept, and try again.
        let Some(largest) = (0..tools.len())
            .filter(|&i| keep[i])
            .max_by_key(|&i| (sizes[i], std::cmp::Reverse(i)))
        else {
            return out;
        };
        keep[largest] = false;
    }
}

/// Shortens the `description` of one described tool so that the answer
/// fits `max_chars`, when it can; the schema is never touched.
fn shorten_description(out: &mut Value, max_chars: usize) {
    let total = json_chars(out);
    if total <= max_chars {
        return;
    }
    let Some(description) = out.get("description").and_then(Value::as_str) else {
        return;
    };
    let length = description.chars().count();
    let note = "description cut to fit the result cap; the input schema is complete";
    // Room for the marker, the note and JSON escapes that may be removed.
    let overhead = total - max_chars + note.len() + 40;
    let keep = length.saturating_sub(overhead);
    let cut_text = cut(description, keep);
    out["description"] = json!(cut_text);
    out["description_cut"] = json!(note);
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
    if let Some(title) = tool.title() {
        out["title"] = json!(title);
    }
    out["description"] = json!(tool.description());
    out["input_schema"] = tool.input_schema().value().clone();
    if let Some(metadata) = tool.metadata() {
        // The source's claims, said as such: what the tool does to the
        // world, and the shape of its structured result.
        if !metadata.annotations.is_empty() {
            out["annotations"] = metadata.annotations.to_json();
        }
        if let Some(output) = &metadata.output_schema {
            out["output_schema"] = output.clone();
        }
    }
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
/// of one; absent, null, `""` or whitespace for none) to the real tool of this assembly: used for
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
        return Err(if via_bridge || assembly.has_bridge() {
            BridgeError::BridgeToolNamed {
                name: name.to_owned(),
            }
        } else {
            BridgeError::BridgeInactive {
                name: name.to_owned(),
            }
        });
    }
    let tool = lookup(assembly, name)?;
    let arguments = match arguments {
        None | Some(Value::Null) => Map::new(),
        // Gateways send an empty string for a tool without parameters.
        Some(Value::String(text)) if text.trim().is_empty() => Map::new(),
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
        let wrong = search(&a, &json!({"query": 5})).unwrap_err();
        assert_eq!(wrong.code(), "query_not_text");
        assert!(wrong.to_string().ends_with("got 5"), "{wrong}");
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
    fn a_search_says_which_stages_ran() {
        let a = assembly(Scope::all());
        let out = search(&a, &json!({"query": "create issue"})).unwrap();
        // The enhanced mode with no embedding stage configured.
        assert_eq!(out["search"], "lexical", "{out}");
        assert!(out.get("embedded").is_none(), "{out}");
        assert!(out.get("search_note").is_none(), "{out}");
        let batch = search(&a, &json!({"queries": ["create issue", "zzzz"]})).unwrap();
        for result in batch["results"].as_array().unwrap() {
            assert_eq!(result["search"], "lexical", "{batch}");
        }
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
        let err = search(&a, &json!({"queries": too_many})).unwrap_err();
        assert_eq!(err.code(), "batch_too_long");
        assert!(err.to_string().contains("more than the 10"), "{err}");
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
