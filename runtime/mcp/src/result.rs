//! `tools/call` results mapped to the runtime's tool result: the content
//! blocks (text, image, audio, resources) as JSON in MCP's own shape, plus
//! the structured content when the server sent one. An `isError` result
//! becomes [`McpCallError::ToolError`] so that the model sees it as a tool
//! error, not as data. Resource links and embedded resources are renamed
//! to Quiver's names for them ([`crate::resource_uri`]), so that whoever
//! got the result can read them through Quiver.

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::{Value, json};

use super::McpCallError;

/// A tool's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpToolOutput {
    /// The content blocks, e.g. `{"type": "text", "text": ...}` or
    /// `{"type": "image", "data": <base64>, "mimeType": "image/png"}`.
    pub content: Vec<Value>,
    /// The structured result, when the server sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
}

impl McpToolOutput {
    /// The text blocks joined by newlines.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The result as JSON for the model: `{"content": [...],
    /// "structured_content"?: ...}`.
    pub fn to_json(&self) -> Value {
        let mut out = json!({"content": self.content});
        if let Some(structured) = &self.structured_content {
            out["structured_content"] = structured.clone();
        }
        out
    }
}

fn block_json(block: &ContentBlock) -> Value {
    serde_json::to_value(block).unwrap_or_else(|error| {
        json!({"type": "text", "text": format!("<content the runtime could not represent: {error}>")})
    })
}

/// `block` with the URI of a resource it links or embeds as Quiver names
/// it.
fn renamed_resources(server: &str, mut block: Value) -> Value {
    let uri = match block["type"].as_str() {
        Some("resource_link") => block.get_mut("uri"),
        Some("resource") => block.get_mut("resource").and_then(|r| r.get_mut("uri")),
        _ => None,
    };
    if let Some(Value::String(uri)) = uri {
        *uri = super::resource_uri(server, uri);
    }
    block
}

/// Maps a `tools/call` result; `isError: true` becomes an error naming the
/// server and the tool.
pub fn map_result(
    server: &str,
    tool: &str,
    result: CallToolResult,
) -> Result<McpToolOutput, McpCallError> {
    let output = McpToolOutput {
        content: result
            .content
            .iter()
            .map(|block| renamed_resources(server, block_json(block)))
            .collect(),
        structured_content: result.structured_content,
    };
    if result.is_error == Some(true) {
        let text = output.text();
        let message = if text.is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            text
        };
        return Err(McpCallError::ToolError {
            server: server.to_owned(),
            tool: tool.to_owned(),
            message,
            output: Box::new(output),
        });
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_image_and_structured_results_are_kept() {
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("hello"),
            ContentBlock::image("AAAA", "image/png"),
        ]);
        result.structured_content = Some(json!({"sum": 3}));
        let output = map_result("s", "t", result).unwrap();
        assert_eq!(output.text(), "hello");
        assert_eq!(output.content[1]["type"], "image");
        assert_eq!(output.content[1]["mimeType"], "image/png");
        assert_eq!(output.to_json()["structured_content"]["sum"], 3);
    }

    #[test]
    fn linked_and_embedded_resources_are_named_as_quiver_serves_them() {
        let link =
            ContentBlock::resource_link(rmcp::model::Resource::new("test://notes/first", "first"));
        let embedded = ContentBlock::embedded_text("test://notes/second", "note second");
        let output =
            map_result("notes", "t", CallToolResult::success(vec![link, embedded])).unwrap();
        assert_eq!(
            output.content[0]["uri"],
            "quiver://mcp/notes/test://notes/first"
        );
        assert_eq!(
            output.content[1]["resource"]["uri"],
            "quiver://mcp/notes/test://notes/second"
        );
        assert_eq!(output.content[1]["resource"]["text"], "note second");
    }

    #[test]
    fn is_error_names_server_and_tool() {
        let result = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        let error = map_result("files", "read", result).unwrap_err();
        assert_eq!(
            error.to_string(),
            "MCP server `files` tool `read` failed: no such file"
        );
        assert_eq!(error.code(), "tool_error");
    }
}
