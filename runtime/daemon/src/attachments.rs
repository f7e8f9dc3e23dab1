//! MCP resources and prompts a user attaches to a chat message, read into
//! the message before the turn: a prompt's rendering starts it, the user's
//! own text follows, then each resource's text in a block naming its URI.
//!
//! MCP leaves resources to the application and prompts to the user (only
//! tools are the model's to pick), so the agent loop takes them from whoever
//! sends the message, never from the model: they are not in the tools the
//! model is sent, deferred or not. Only servers in the session's grant are
//! read, under the gateway's names (`quiver://mcp/SERVER/URI`,
//! `mcp_SERVER_PROMPT`), and each read shows in the session's feed as the
//! gateway's do ([`record_request`]).

use std::time::Instant;

use rmcp::model::{ContentBlock, ResourceContents};
use serde::Deserialize;
use serde_json::{Map, Value};

use quiver_dispatch::Session;
use quiver_dispatch::feed::{Event, Status};
use quiver_mcp::McpCallError;
use quiver_tool::naming::mcp_tool_name;
use quiver_tool::scope::Scope;
use quiver_tool::tool::ToolSource;

use super::{Daemon, DaemonError};

/// What a message attaches besides its text (the API reads it from the
/// message's `resources` and `prompt` fields).
#[derive(Debug, Default)]
pub struct Attachments {
    /// Resources by the gateway's names (`quiver://mcp/SERVER/URI`), read
    /// and added after the text, in this order.
    pub resources: Vec<String>,
    /// A prompt by the gateway's name, rendered with its arguments at the
    /// start of the message.
    pub prompt: Option<PromptRequest>,
}

impl Attachments {
    /// Whether nothing is attached.
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.prompt.is_none()
    }
}

/// A prompt to render.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptRequest {
    /// Its gateway name, `mcp_SERVER_PROMPT`.
    pub name: String,
    /// Its arguments (MCP's are strings).
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// Why an attachment could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AttachmentError {
    /// Not one of the gateway's resource names, or of a server outside
    /// the session's grant (or not connected now).
    #[error(
        "no resource `{uri}` in this session's grant: resources are named quiver://mcp/SERVER/URI, SERVER one of: {servers}"
    )]
    UnknownResource {
        /// As asked for.
        uri: String,
        /// The ready servers in the grant.
        servers: String,
    },
    /// No prompt of that name in the session's grant.
    #[error(
        "no prompt `{name}` in this session's grant: prompts are named mcp_SERVER_PROMPT (see the gateway's prompts/list)"
    )]
    UnknownPrompt {
        /// As asked for.
        name: String,
    },
    /// The server refused or failed.
    #[error(transparent)]
    Upstream(#[from] McpCallError),
}

impl AttachmentError {
    /// A short stable code.
    pub fn code(&self) -> &'static str {
        match self {
            AttachmentError::UnknownResource { .. } => "unknown_resource",
            AttachmentError::UnknownPrompt { .. } => "unknown_prompt",
            AttachmentError::Upstream(_) => "attachment_failed",
        }
    }
}

/// Records a resource or prompt request in `session`'s feed like a tool
/// call: the method as the tool (`resources/read`, `prompts/get`,
/// `resources/subscribe`), what it named as the arguments.
pub(crate) fn record_request(
    session: &Session,
    method: &str,
    name: &str,
    started: Instant,
    error: Option<&McpCallError>,
) {
    let (status, detail) = match error {
        None => (Status::Ok, None),
        Some(error) => (Status::Error, Some(error.to_string())),
    };
    let key = if method.starts_with("prompts/") {
        "name"
    } else {
        "uri"
    };
    let event = Event::new(session, method, status)
        .arguments(session, &serde_json::json!({ key: name }))
        .duration(started.elapsed())
        .detail(detail);
    session.record(event);
}

impl Daemon {
    /// The message `text` with `attachments` read into it, for session
    /// `id`; `text` unchanged when nothing is attached. Nothing is stored
    /// here: a refused attachment leaves the session as it was.
    pub async fn compose_message(
        &self,
        id: &str,
        text: String,
        attachments: &Attachments,
    ) -> Result<String, DaemonError> {
        if attachments.is_empty() {
            return Ok(text);
        }
        let live = self.session(id).await?;
        let session = &live.session;
        let granted = self.granted_mcp_servers(session.scope());
        let mut parts = Vec::new();
        if let Some(prompt) = &attachments.prompt {
            parts.push(self.render_prompt(session, &granted, prompt).await?);
        }
        if !text.trim().is_empty() {
            parts.push(text);
        }
        for uri in &attachments.resources {
            parts.push(self.read_attached(session, &granted, uri).await?);
        }
        Ok(parts.join("\n\n"))
    }

    /// The ready MCP servers `scope` grants: the only ones whose resources
    /// and prompts a session or gateway client reaches.
    pub(crate) fn granted_mcp_servers(&self, scope: &Scope) -> Vec<String> {
        self.mcp()
            .status()
            .into_iter()
            .filter(|s| s.state.is_ready())
            .filter(|s| scope.allows_toolset(&ToolSource::Mcp(s.name.clone()).toolset()))
            .map(|s| s.name)
            .collect()
    }

    /// The server among `servers` and its own name of the prompt the
    /// gateway calls `name`. Exposed names may be shortened with a hash,
    /// so they are found by listing, as a client sees them.
    pub(crate) async fn find_prompt(
        &self,
        servers: &[String],
        name: &str,
    ) -> Option<(String, String)> {
        for server in servers {
            let Ok(prompts) = self.mcp().prompts(server).await else {
                continue;
            };
            if let Some(prompt) = prompts
                .into_iter()
                .find(|p| mcp_tool_name(server, &p.name) == name)
            {
                return Some((server.clone(), prompt.name));
            }
        }
        None
    }

    async fn render_prompt(
        &self,
        session: &Session,
        granted: &[String],
        prompt: &PromptRequest,
    ) -> Result<String, AttachmentError> {
        let Some((server, own)) = self.find_prompt(granted, &prompt.name).await else {
            return Err(AttachmentError::UnknownPrompt {
                name: prompt.name.clone(),
            });
        };
        let started = Instant::now();
        let rendered = self
            .mcp()
            .get_prompt(&server, &own, Some(prompt.arguments.clone()))
            .await;
        record_request(
            session,
            "prompts/get",
            &prompt.name,
            started,
            rendered.as_ref().err(),
        );
        let texts: Vec<String> = rendered?
            .messages
            .into_iter()
            .filter_map(|message| match message.content {
                ContentBlock::Text(text) => Some(text.text),
                ContentBlock::Resource(embedded) => {
                    Some(resource_text(&server, &embedded.resource))
                }
                // Images, audio and links have no text to give.
                _ => None,
            })
            .collect();
        Ok(texts.join("\n\n"))
    }

    async fn read_attached(
        &self,
        session: &Session,
        granted: &[String],
        uri: &str,
    ) -> Result<String, AttachmentError> {
        let unknown = || AttachmentError::UnknownResource {
            uri: uri.to_owned(),
            servers: if granted.is_empty() {
                "none".to_owned()
            } else {
                granted.join(", ")
            },
        };
        let (server, own) = quiver_mcp::split_resource_uri(uri).ok_or_else(unknown)?;
        if !granted.iter().any(|g| g == server) {
            return Err(unknown());
        }
        let started = Instant::now();
        let read = self.mcp().read_resource(server, own).await;
        record_request(session, "resources/read", uri, started, read.as_ref().err());
        let blocks: Vec<String> = read?
            .contents
            .iter()
            .map(|contents| resource_text(server, contents))
            .collect();
        Ok(blocks.join("\n\n"))
    }
}

/// One resource's contents as the model reads them: its text in a block
/// naming it, or a line saying what binary content was left out.
fn resource_text(server: &str, contents: &ResourceContents) -> String {
    match contents {
        ResourceContents::TextResourceContents { uri, text, .. } => format!(
            "<resource uri=\"{}\">\n{text}\n</resource>",
            quiver_mcp::resource_uri(server, uri)
        ),
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => format!(
            "<resource uri=\"{}\" mime_type=\"{}\">(binary content, {} bytes in base64, not included)</resource>",
            quiver_mcp::resource_uri(server, uri),
            mime_type.as_deref().unwrap_or("unknown"),
            blob.len()
        ),
        // A kind of contents newer than this build: named, not read.
        _ => "<resource>(contents of a kind this version cannot read)</resource>".to_owned(),
    }
}
