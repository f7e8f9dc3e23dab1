//! One live rmcp client session with a server: connecting over the
//! configured transport, the client handler that hears
//! `notifications/tools/list_changed`, progress, log messages and what the
//! server says of its resources and prompts, tool
//! listing with pagination,
//! filtering and schema normalisation, and what the server says it is for.

use std::sync::Arc;

#[cfg(any(feature = "mcp-stdio", feature = "mcp-http"))]
use rmcp::ServiceExt;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam,
    ResourceUpdatedNotificationParam, ServerPeerInfo,
};
#[allow(deprecated)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient};
use tokio::sync::{Notify, broadcast};

use super::McpError;
use super::config::{McpServerConfig, McpTransportConfig, ToolFilter};
use super::schema::{SchemaOutcome, normalise};
use super::subscriptions::ResourceNotice;
#[cfg(feature = "mcp-stdio")]
use quiver_process::ProcessGroup;
use quiver_tool::tool::{ToolAnnotations, ToolMetadata, ToolSpec};
use serde_json::Value;

/// The client side of a session: answers the server's requests with rmcp's
/// defaults, wakes the supervisor on `notifications/tools/list_changed`,
/// hands `notifications/progress` to the call that subscribed to its token
/// and writes the server's log messages to Quiver's log.
pub struct QuiverClient {
    server: String,
    list_changed: Arc<Notify>,
    progress: ProgressDispatcher,
    notices: broadcast::Sender<ResourceNotice>,
}

impl QuiverClient {
    /// A handler for `server` that signals `list_changed`, routes
    /// progress through `progress` and sends what the server says of its
    /// resources and prompts to `notices`.
    pub fn new(
        server: impl Into<String>,
        list_changed: Arc<Notify>,
        progress: ProgressDispatcher,
        notices: broadcast::Sender<ResourceNotice>,
    ) -> QuiverClient {
        QuiverClient {
            server: server.into(),
            list_changed,
            progress,
            notices,
        }
    }

    fn notice(&self, notice: ResourceNotice) {
        // Nobody listening is not an error.
        let _ = self.notices.send(notice);
    }
}

impl ClientHandler for QuiverClient {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "tools/list_changed received");
        // A stored permit coalesces a burst of notifications into one refresh.
        self.list_changed.notify_one();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // A token no call subscribed to (the call ended, or nobody asked)
        // is dropped by the dispatcher.
        self.progress.handle_notification(params).await;
    }

    // Servers of the protocol versions before 2026-07-28 send these on the
    // session; later ones on the listen stream `subscriptions` opens.
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.notice(ResourceNotice::Updated {
            server: self.server.clone(),
            uri: params.uri,
        });
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notice(ResourceNotice::ResourcesChanged {
            server: self.server.clone(),
        });
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notice(ResourceNotice::PromptsChanged {
            server: self.server.clone(),
        });
    }

    // MCP deprecates logging (SEP-2577), but servers speaking the earlier
    // protocol versions still send it, and an operator wants to see it.
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        log_server_message(&self.server, &params);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("quiver", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// Writes a server's `notifications/message` to the log at the nearest
/// level, under the target `quiver::mcp::server_log`, so that an operator
/// can raise or silence upstream servers apart from Quiver's own lines.
#[allow(deprecated)]
fn log_server_message(server: &str, params: &LoggingMessageNotificationParam) {
    let logger = params.logger.as_deref().unwrap_or("");
    let data = match &params.data {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match params.level {
        LoggingLevel::Debug => {
            tracing::debug!(target: "quiver::mcp::server_log", server, logger, "{data}")
        }
        LoggingLevel::Info | LoggingLevel::Notice => {
            tracing::info!(target: "quiver::mcp::server_log", server, logger, "{data}")
        }
        LoggingLevel::Warning => {
            tracing::warn!(target: "quiver::mcp::server_log", server, logger, "{data}")
        }
        LoggingLevel::Error
        | LoggingLevel::Critical
        | LoggingLevel::Alert
        | LoggingLevel::Emergency => {
            tracing::error!(target: "quiver::mcp::server_log", server, logger, "{data}")
        }
    }
}

/// A connected session.
pub struct Connection {
    /// The rmcp service; ends when the transport closes.
    pub running: RunningService<RoleClient, QuiverClient>,
    /// The stdio child's process group (`None` for HTTP).
    #[cfg(feature = "mcp-stdio")]
    pub group: Option<ProcessGroup>,
}

impl Connection {
    /// The peer for requests (cheap to clone).
    pub fn peer(&self) -> Peer<RoleClient> {
        self.running.peer().clone()
    }
}

#[cfg(any(feature = "mcp-stdio", feature = "mcp-http"))]
fn connect_error(server: &str, error: impl std::fmt::Display) -> McpError {
    McpError::Connect {
        server: server.to_owned(),
        detail: error.to_string(),
    }
}

/// The status view of an OAuth server's login, kept current by the
/// connection's credential store.
pub type LoginView = Arc<std::sync::Mutex<quiver_tool::status::OAuthLogin>>;

/// Opens the transport and runs the MCP handshake (no timeout here: the
/// supervisor bounds the whole attempt by `connect_timeout_s`). An OAuth
/// server's login is kept current in `login`.
pub async fn connect(
    config: &McpServerConfig,
    list_changed: Arc<Notify>,
    progress: ProgressDispatcher,
    notices: broadcast::Sender<ResourceNotice>,
    login: Option<LoginView>,
) -> Result<Connection, McpError> {
    let client = QuiverClient::new(config.name.as_str(), list_changed, progress, notices);
    match &config.transport {
        McpTransportConfig::Stdio { .. } => connect_stdio(config, client).await,
        McpTransportConfig::Http { .. } => connect_http(config, client, login).await,
    }
}

#[cfg(feature = "mcp-stdio")]
async fn connect_stdio(
    config: &McpServerConfig,
    client: QuiverClient,
) -> Result<Connection, McpError> {
    let server = config.name.as_str();
    let (transport, group) = super::stdio::spawn(server, &config.transport)?;
    // If the handshake fails, `group` is dropped here and kills the child.
    let running = client
        .serve(transport)
        .await
        .map_err(|e| connect_error(server, e))?;
    Ok(Connection {
        running,
        group: Some(group),
    })
}

#[cfg(not(feature = "mcp-stdio"))]
async fn connect_stdio(
    config: &McpServerConfig,
    _client: QuiverClient,
) -> Result<Connection, McpError> {
    Err(McpError::Unsupported {
        server: config.name.clone(),
        transport: "stdio",
        feature: "mcp-stdio",
    })
}

#[cfg(feature = "mcp-http")]
async fn connect_http(
    config: &McpServerConfig,
    client: QuiverClient,
    login: Option<LoginView>,
) -> Result<Connection, McpError> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let server = config.name.as_str();
    let McpTransportConfig::Http { url, headers } = &config.transport else {
        return Err(connect_error(server, "not a Streamable HTTP server"));
    };

    let mut custom = std::collections::HashMap::new();
    for (name, value) in headers {
        let header = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| connect_error(server, format!("header `{name}`: {e}")))?;
        let mut value = http::HeaderValue::from_str(value)
            .map_err(|e| connect_error(server, format!("header `{name}`: {e}")))?;
        value.set_sensitive(true);
        custom.insert(header, value);
    }
    let transport_config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(custom);
    let running = if config.oauth.is_some() {
        let http = super::oauth::authorized_client(config, url, login).await?;
        client
            .serve(StreamableHttpClientTransport::with_client(
                http,
                transport_config,
            ))
            .await
            .map_err(|e| {
                // The token was refused even after a refresh: a new login
                // is needed, not a retry.
                if e.is_authorization_required() {
                    McpError::NeedsLogin {
                        server: server.to_owned(),
                        command: super::oauth::login_command(server),
                    }
                } else {
                    connect_error(server, e)
                }
            })?
    } else {
        client
            .serve(StreamableHttpClientTransport::from_config(transport_config))
            .await
            .map_err(|e| connect_error(server, e))?
    };
    Ok(Connection {
        running,
        #[cfg(feature = "mcp-stdio")]
        group: None,
    })
}

#[cfg(not(feature = "mcp-http"))]
async fn connect_http(
    config: &McpServerConfig,
    _client: QuiverClient,
    _login: Option<LoginView>,
) -> Result<Connection, McpError> {
    Err(McpError::Unsupported {
        server: config.name.clone(),
        transport: "http",
        feature: "mcp-http",
    })
}

/// Lists every tool of the server (following `nextCursor`), keeps those the
/// filter allows and normalises their schemas; tools whose schema cannot be
/// used are skipped with a warning naming the server and the tool.
/// Descriptions are kept whole.
pub async fn list_tools(
    config: &McpServerConfig,
    peer: &Peer<RoleClient>,
) -> Result<Vec<ToolSpec>, McpError> {
    let server = config.name.as_str();
    let tools = peer
        .list_all_tools()
        .await
        .map_err(|e| McpError::ListTools {
            server: server.to_owned(),
            detail: e.to_string(),
        })?;
    Ok(specs_from_listing(server, &config.tools, tools))
}

/// The specs of a server's `tools/list` answer (see [`list_tools`]): the
/// tools `filter` allows, schemas normalised, unusable ones skipped.
pub fn specs_from_listing(
    server: &str,
    filter: &ToolFilter,
    tools: Vec<rmcp::model::Tool>,
) -> Vec<ToolSpec> {
    let mut specs = Vec::with_capacity(tools.len());
    for tool in tools {
        let name = tool.name.as_ref();
        if !filter.allows(name) {
            tracing::debug!(
                server,
                tool = name,
                "tool left out by mcp_servers.{server}.tools"
            );
            continue;
        }
        let schema = match normalise(&tool.input_schema) {
            SchemaOutcome::Kept(schema) => schema,
            SchemaOutcome::Normalised(schema, change) => {
                tracing::warn!(server, tool = name, "{change}");
                schema
            }
            SchemaOutcome::Skipped(reason) => {
                tracing::warn!(server, tool = name, "tool skipped: {reason}");
                continue;
            }
        };
        let description = tool.description.as_deref().unwrap_or_default();
        let metadata = tool_metadata(&tool);
        specs.push(ToolSpec::new(name, description, schema).with_metadata(metadata));
    }
    specs
}

/// What an MCP tool says besides its name, description and input schema:
/// its title (the tool's own, else its annotations' title), behaviour
/// hints, output schema and `_meta`, kept as the server sent them.
pub fn tool_metadata(tool: &rmcp::model::Tool) -> ToolMetadata {
    let hints = tool.annotations.as_ref();
    ToolMetadata {
        title: ToolMetadata::title_from(
            tool.title.as_deref(),
            hints.and_then(|a| a.title.as_deref()),
        ),
        annotations: ToolAnnotations {
            read_only_hint: hints.and_then(|a| a.read_only_hint),
            destructive_hint: hints.and_then(|a| a.destructive_hint),
            idempotent_hint: hints.and_then(|a| a.idempotent_hint),
            open_world_hint: hints.and_then(|a| a.open_world_hint),
        },
        output_schema: tool
            .output_schema
            .as_ref()
            .map(|schema| Value::Object(schema.as_ref().clone())),
        meta: tool.meta.as_ref().map(|meta| meta.0.clone()),
    }
}

/// Longest server description kept for search, in characters: enough for
/// a server's title, description and usual `instructions`, while a server
/// that sends a manual there cannot grow the index without bound.
pub const MAX_SERVER_DESCRIPTION_CHARS: usize = 4_000;

/// What a server says it is for, from its initialize result: the title,
/// description and `instructions`, in that order, each once, cut at
/// [`MAX_SERVER_DESCRIPTION_CHARS`]. Empty when it says nothing. Tool
/// search uses it as server context; it is never sent to the model.
pub fn server_description(info: &ServerPeerInfo) -> String {
    let implementation = info.server_info.as_ref();
    let parts = [
        implementation.and_then(|i| i.title.as_deref()),
        implementation.and_then(|i| i.description.as_deref()),
        info.instructions.as_deref(),
    ];
    let mut text = String::new();
    for part in parts.into_iter().flatten().map(str::trim) {
        if part.is_empty() || text.contains(part) {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(part);
    }
    match text.char_indices().nth(MAX_SERVER_DESCRIPTION_CHARS) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod description_tests {
    use rmcp::model::{ProtocolVersion, ServerCapabilities};

    use super::*;

    fn info(
        title: Option<&str>,
        description: Option<&str>,
        instructions: Option<&str>,
    ) -> ServerPeerInfo {
        let mut implementation = Implementation::new("srv", "1.0");
        implementation.title = title.map(str::to_owned);
        implementation.description = description.map(str::to_owned);
        let mut info =
            ServerPeerInfo::new(ProtocolVersion::default(), ServerCapabilities::default())
                .with_server_info(implementation);
        info.instructions = instructions.map(str::to_owned);
        info
    }

    #[test]
    fn title_description_and_instructions_are_joined_once() {
        let text = server_description(&info(
            Some("Harbour charts"),
            Some(" Tides and charts for sailors "),
            Some("Tides and charts for sailors"),
        ));
        assert_eq!(text, "Harbour charts\nTides and charts for sailors");
        assert_eq!(server_description(&info(None, None, None)), "");
        assert_eq!(server_description(&info(None, None, Some("  "))), "");
    }

    #[test]
    fn long_instructions_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_SERVER_DESCRIPTION_CHARS + 10);
        let text = server_description(&info(None, None, Some(&long)));
        assert_eq!(text.chars().count(), MAX_SERVER_DESCRIPTION_CHARS);
    }
}

#[cfg(test)]
mod metadata_tests {
    use rmcp::model::{Tool, ToolAnnotations as McpAnnotations};
    use serde_json::json;

    use super::*;

    fn tool(value: Value) -> Tool {
        serde_json::from_value(value).expect("a valid MCP tool")
    }

    #[test]
    fn keeps_title_hints_output_schema_and_meta() {
        let tool = tool(json!({
            "name": "delete_file",
            "title": "Delete a file",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"deleted": {"type": "boolean"}}},
            "annotations": {"readOnlyHint": false, "destructiveHint": true},
            "_meta": {"vendor/x": 1}
        }));
        let metadata = tool_metadata(&tool);
        assert_eq!(metadata.title.as_deref(), Some("Delete a file"));
        assert_eq!(metadata.annotations.read_only_hint, Some(false));
        assert_eq!(metadata.annotations.destructive_hint, Some(true));
        assert_eq!(metadata.annotations.idempotent_hint, None);
        assert_eq!(
            metadata.annotations.to_json(),
            json!({"readOnlyHint": false, "destructiveHint": true})
        );
        assert_eq!(
            metadata.output_schema,
            Some(json!({"type": "object", "properties": {"deleted": {"type": "boolean"}}}))
        );
        assert_eq!(metadata.meta, json!({"vendor/x": 1}).as_object().cloned());
    }

    #[test]
    fn title_falls_back_to_the_annotations_title_and_plain_tools_carry_nothing() {
        let mut with_hint_title = tool(json!({"name": "t", "inputSchema": {"type": "object"}}));
        let mut hints = McpAnnotations::default();
        hints.title = Some("From hints".into());
        with_hint_title.annotations = Some(hints);
        assert_eq!(
            tool_metadata(&with_hint_title).title.as_deref(),
            Some("From hints")
        );

        let plain = tool(json!({"name": "t", "inputSchema": {"type": "object"}}));
        let spec =
            ToolSpec::new("t", "", json!({"type": "object"})).with_metadata(tool_metadata(&plain));
        assert!(spec.metadata.is_none());
    }
}
