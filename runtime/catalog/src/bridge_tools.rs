//! The three bridge tools as the model sees them: their names and the
//! schemas of their arguments. The assembly sends these; [`crate::bridge`]
//! carries the calls out.

use serde_json::{Value, json};

/// `tool_search`.
pub const TOOL_SEARCH: &str = "tool_search";
/// `tool_describe`.
pub const TOOL_DESCRIBE: &str = "tool_describe";
/// `tool_call`.
pub const TOOL_CALL: &str = "tool_call";

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
                "description": "Several searches at once, instead of `query`; one result list each (one string, or a JSON-encoded list, is accepted too)."
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
                "description": "Several tools at once, instead of `name` (one string, or a JSON-encoded list, is accepted too)."
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
                "description": "The tool's arguments, matching the schema from tool_describe (a JSON-encoded object string is accepted too; omit it, or send {}, for a tool without parameters)."
            }
        },
        "required": ["name"],
        "additionalProperties": false
    })
}
