//! The MCP gateway: the daemon as an MCP server (rmcp), over stdio
//! (`quiver serve --stdio`) or Streamable HTTP (`/mcp`). A client sees the
//! assembled view of its grant, exactly as a model would: core tools, the
//! bridge tools with the deferred listing (or every tool, at tier 0), and
//! nothing outside its grant. Its calls run through the dispatch chain in a
//! session of its own (`gateway-NAME`), and it is told
//! `notifications/tools/list_changed` whenever what it would see changes
//! (a plugin reload, an MCP server's tools coming or going).
//!
//! Both notification paths of the protocol are served: clients that
//! initialize a session (protocol versions before 2026-07-28) get the
//! notification on their session; newer clients get it on the
//! `subscriptions/listen` stream they open. Resource subscriptions and the
//! resource and prompt lists of upstream servers changing reach clients
//! the same two ways ([`notices`]).

mod notices;

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, CustomRequest, CustomResult, GetPromptRequestParams, GetPromptResponse,
    Implementation, InitializeRequestParams, InitializeResult, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Reference, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use quiver_tool::naming::mcp_tool_name;

use super::{Daemon, DaemonError, LiveSession, jsonrpc};

/// Who a gateway connection acts as, and what it was granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayIdentity {
    /// The client's name (`stdio`, `daemon` for the daemon's own token, or
    /// a gateway client's name); its session is `gateway-NAME`.
    pub client: String,
    /// Its grant.
    pub grants: Vec<String>,
}

/// The rmcp server handler of the gateway. One per stdio connection, or
/// one per Streamable HTTP session (the HTTP auth layer puts the caller's
/// [`GatewayIdentity`] in the request's extensions).
#[derive(Clone)]
pub struct GatewayHandler {
    daemon: Arc<Daemon>,
    identity: Arc<OnceLock<GatewayIdentity>>,
    /// The session's `resources/subscribe` subscriptions.
    subscriptions: notices::Subscriptions,
}

impl std::fmt::Debug for GatewayHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayHandler")
            .field("identity", &self.identity.get())
            .finish_non_exhaustive()
    }
}

impl GatewayHandler {
    /// A handler acting as `identity` (stdio).
    pub fn fixed(daemon: Arc<Daemon>, identity: GatewayIdentity) -> GatewayHandler {
        let cell = OnceLock::new();
        let _ = cell.set(identity);
        GatewayHandler {
            daemon,
            identity: Arc::new(cell),
            subscriptions: notices::Subscriptions::default(),
        }
    }

    /// A handler that learns its identity from each HTTP request.
    pub fn http(daemon: Arc<Daemon>) -> GatewayHandler {
        GatewayHandler {
            daemon,
            identity: Arc::new(OnceLock::new()),
            subscriptions: notices::Subscriptions::default(),
        }
    }

    fn identity(&self, extensions: &rmcp::model::Extensions) -> Result<GatewayIdentity, ErrorData> {
        let from_request = extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<GatewayIdentity>())
            .cloned();
        match (from_request, self.identity.get()) {
            (Some(identity), _) => {
                let _ = self.identity.set(identity.clone());
                Ok(identity)
            }
            (None, Some(identity)) => Ok(identity.clone()),
            (None, None) => Err(ErrorData::invalid_request(
                "the gateway could not tell who is calling",
                None,
            )),
        }
    }

    /// The server and its own name of the prompt a client calls `name`.
    async fn granted_prompt(
        &self,
        context: &RequestContext<RoleServer>,
        name: &str,
    ) -> Result<(String, String), ErrorData> {
        let servers = self.granted_servers(context).await?;
        self.daemon
            .find_prompt(&servers, name)
            .await
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("no prompt `{name}` in this client's grant (see prompts/list)"),
                    None,
                )
            })
    }

    /// Subscribes the client to the resource it calls `uri` (in its grant),
    /// recorded in its session's feed as `resources/subscribe`.
    async fn subscribe(
        &self,
        context: &RequestContext<RoleServer>,
        uri: &str,
    ) -> Result<quiver_mcp::ResourceSubscription, ErrorData> {
        let (server, own) = self
            .granted_resource(context, uri, resource_not_found)
            .await?;
        let started = std::time::Instant::now();
        let subscribed = self.daemon.mcp().subscribe_resource(server, own).await;
        self.record(
            context,
            "resources/subscribe",
            uri,
            started,
            subscribed.as_ref().err(),
        )
        .await;
        subscribed.map_err(|error| upstream_error(&error))
    }

    /// Records a resource or prompt request in the client's session feed.
    async fn record(
        &self,
        context: &RequestContext<RoleServer>,
        method: &str,
        name: &str,
        started: std::time::Instant,
        error: Option<&quiver_mcp::McpCallError>,
    ) {
        let Ok(identity) = self.identity(&context.extensions) else {
            return;
        };
        if let Ok(live) = self.session(&identity).await {
            super::attachments::record_request(&live.session, method, name, started, error);
        }
    }

    /// The server and its own URI of the resource (or template) a client
    /// calls `uri`, if it is one of the gateway's names of a server in the
    /// client's grant; else the error `refuse` makes of why not.
    async fn granted_resource<'u>(
        &self,
        context: &RequestContext<RoleServer>,
        uri: &'u str,
        refuse: fn(String, Option<Value>) -> ErrorData,
    ) -> Result<(&'u str, &'u str), ErrorData> {
        let Some((server, own)) = quiver_mcp::split_resource_uri(uri) else {
            return Err(refuse(
                format!(
                    "`{uri}` is not one of this gateway's resources: they are named {}SERVER/URI (see resources/list and resources/templates/list)",
                    quiver_mcp::RESOURCE_URI_PREFIX,
                ),
                None,
            ));
        };
        if !self
            .granted_servers(context)
            .await?
            .iter()
            .any(|s| s == server)
        {
            return Err(refuse(
                format!("`{uri}`: no MCP server `{server}` in this client's grant"),
                None,
            ));
        }
        Ok((server, own))
    }

    /// The MCP servers, ready now, whose toolset the client's grant holds:
    /// their resources and prompts go with their tools.
    async fn granted_servers(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Vec<String>, ErrorData> {
        let identity = self.identity(&context.extensions)?;
        let live = self.session(&identity).await?;
        Ok(self.daemon.granted_mcp_servers(live.session.scope()))
    }

    async fn session(&self, identity: &GatewayIdentity) -> Result<Arc<LiveSession>, ErrorData> {
        self.daemon
            .gateway_session(&identity.client, &identity.grants)
            .await
            .map_err(|e| internal(&e))
    }

    /// Calls `send` each time the tools `identity` sees change, until
    /// `stop` completes or `send` fails.
    fn watch_tools<S, SF, T>(
        &self,
        identity: GatewayIdentity,
        mut send: S,
        stop: T,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        S: FnMut() -> SF + Send + 'static,
        SF: Future<Output = bool> + Send,
        T: Future<Output = ()> + Send + 'static,
    {
        let daemon = self.daemon.clone();
        async move {
            let Ok(live) = daemon
                .gateway_session(&identity.client, &identity.grants)
                .await
            else {
                return;
            };
            let mut changes = daemon.registry().subscribe();
            let mut last = tools_digest(&daemon, &live);
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    () = &mut stop => break,
                    changed = changes.changed() => if changed.is_err() { break },
                }
                // Told only once `tool_search` finds what changed: the
                // change's search segments are built in the background.
                let generation = *changes.borrow_and_update();
                daemon.search_ready(generation).await;
                let now = tools_digest(&daemon, &live);
                if now != last {
                    last = now;
                    if !send().await {
                        break;
                    }
                }
            }
        }
    }
}

/// A fingerprint of the tools array a session would be sent now.
fn tools_digest(daemon: &Daemon, live: &LiveSession) -> u64 {
    let assembly = daemon.assemble(&live.session, live.record.context_tokens);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    Value::from(assembly.tools().to_vec())
        .to_string()
        .hash(&mut hasher);
    hasher.finish()
}

/// Completes once `peer`'s transport has closed (rmcp has no such future;
/// looked at each second).
async fn closed(peer: rmcp::Peer<RoleServer>) {
    while !peer.is_transport_closed() {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

fn internal(error: &DaemonError) -> ErrorData {
    tracing::warn!(%error, "a gateway request failed");
    ErrorData::internal_error(error.to_string(), None)
}

/// `-32602` for a `cursor` the gateway did not give: its lists come whole,
/// in one page, so no cursor is one of its own.
fn invalid_cursor(method: &str, cursor: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "invalid cursor `{cursor}` for {method}: this server returns the whole list in one page and gives no cursors"
        ),
        Some(serde_json::json!({"cursor": cursor})),
    )
}

/// An OpenAI-style function definition as an MCP tool, with what the
/// tool's source says besides (title, behaviour hints, output schema,
/// `_meta`) when `tool` is the registered tool it defines.
fn mcp_tool(definition: &Value, tool: Option<&quiver_tool::tool::Tool>) -> Option<Tool> {
    let function = definition.get("function")?;
    let name = function.get("name")?.as_str()?;
    let description = function
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let schema = match function.get("parameters") {
        Some(Value::Object(map)) => Value::Object(map.clone()),
        _ => Value::Object(JsonObject::new()),
    };
    let mut wire = serde_json::json!({
        "name": name,
        "description": description,
        "inputSchema": schema,
    });
    if let Some(metadata) = tool.and_then(quiver_tool::tool::Tool::metadata) {
        if let Some(title) = &metadata.title {
            wire["title"] = Value::String(title.clone());
        }
        if !metadata.annotations.is_empty() {
            wire["annotations"] = metadata.annotations.to_json();
        }
        if let Some(output) = metadata.output_schema.as_ref().filter(|s| s.is_object()) {
            wire["outputSchema"] = output.clone();
        }
        if let Some(meta) = &metadata.meta {
            wire["_meta"] = Value::Object(meta.clone());
        }
    }
    match serde_json::from_value(wire) {
        Ok(tool) => Some(tool),
        Err(error) => {
            tracing::warn!(tool = name, %error, "a tool cannot be described to the gateway client; its metadata is left out");
            let schema = match function.get("parameters") {
                Some(Value::Object(map)) => map.clone(),
                _ => JsonObject::new(),
            };
            Some(Tool::new(name.to_owned(), description.to_owned(), schema))
        }
    }
}

/// A dispatch result as an MCP tool result: MCP tools' own content blocks
/// pass through; anything else is one text block (plus structured content
/// for objects).
fn call_result(value: Value) -> CallToolResult {
    if let Some(blocks) = value
        .get("content")
        .and_then(|c| serde_json::from_value::<Vec<ContentBlock>>(c.clone()).ok())
    {
        let mut result = CallToolResult::success(blocks);
        result.structured_content = value.get("structured_content").cloned();
        return result;
    }
    match value {
        Value::String(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        other => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(other.to_string())]);
            if other.is_object() {
                result.structured_content = Some(other);
            }
            result
        }
    }
}

impl ServerHandler for GatewayHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
                .enable_completions()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("quiver", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Quiver gateway: tools not listed directly are found with tool_search, \
             read with tool_describe and run with tool_call.",
        )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.identity(&context.extensions)?;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Ok(identity) = self.identity(&context.extensions) else {
            return;
        };
        let peer = context.peer.clone();
        let watch = self.watch_tools(
            identity.clone(),
            move || {
                let peer = peer.clone();
                async move { peer.notify_tool_list_changed().await.is_ok() }
            },
            closed(context.peer.clone()),
        );
        tokio::spawn(watch);
        if let Ok(live) = self.session(&identity).await {
            tokio::spawn(notices::forward(
                self.daemon.mcp().resource_notices(),
                live,
                self.subscriptions.clone(),
                notices::Audience::Session(context.peer.clone()),
                closed(context.peer.clone()),
            ));
        }
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let request = context.request_context();
        let identity = self.identity(&request.extensions)?;
        let accepted = context.accepted().clone();
        let sink = context.sink().clone();
        let cancelled = request.ct.clone();
        // The stream's resources, held upstream while it lasts. The filter
        // was acknowledged before this runs, so a resource that cannot be
        // held is told in the log and the feed, and simply never updates.
        let subscriptions = notices::Subscriptions::default();
        for uri in accepted.resource_subscriptions.iter().flatten() {
            if let Ok(subscription) = self.subscribe(request, uri).await {
                subscriptions
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(uri.clone(), subscription);
            }
        }
        let tools_sink = sink.clone();
        let tools = async {
            if accepted.tools_list_changed == Some(true) {
                let sink = tools_sink;
                self.watch_tools(
                    identity.clone(),
                    move || {
                        let sink = sink.clone();
                        async move { sink.notify_tool_list_changed().await.is_ok() }
                    },
                    cancelled.clone().cancelled_owned(),
                )
                .await;
            }
        };
        let live = self.session(&identity).await?;
        let notices = notices::forward(
            self.daemon.mcp().resource_notices(),
            live,
            subscriptions,
            notices::Audience::Stream {
                sink,
                resources_changed: accepted.resources_list_changed == Some(true),
                prompts_changed: accepted.prompts_list_changed == Some(true),
            },
            cancelled.clone().cancelled_owned(),
        );
        // Until the client ends the stream (or is gone); a watch with
        // nothing to do returns at once and must not end it.
        tokio::join!(tools, notices, cancelled.cancelled());
        Ok(())
    }

    #[allow(deprecated)] // the session path of the protocol versions before 2026-07-28
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let subscription = GatewayHandler::subscribe(self, &context, &request.uri).await?;
        self.subscriptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(request.uri, subscription);
        Ok(())
    }

    #[allow(deprecated)] // the session path of the protocol versions before 2026-07-28
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Unsubscribing from what was never subscribed changes nothing.
        self.subscriptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&request.uri);
        Ok(())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let error = jsonrpc::custom_request_error(&request.method, request.params.as_ref());
        // Clients probe for methods and send what they built: theirs to fix,
        // not a fault of the daemon's.
        tracing::debug!(method = %request.method, code = error.code.0, message = %error.message, "gateway request refused");
        Err(error)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        refuse_cursor("resources/list", request.as_ref())?;
        let mut all = Vec::new();
        for server in self.granted_servers(&context).await? {
            match self.daemon.mcp().resources(&server).await {
                Ok(resources) => all.extend(resources.into_iter().map(|mut resource| {
                    resource.uri = quiver_mcp::resource_uri(&server, &resource.uri);
                    resource
                })),
                Err(error) => {
                    tracing::warn!(server, %error, "cannot list an MCP server's resources for the gateway; left out")
                }
            }
        }
        Ok(ListResourcesResult::with_all_items(all))
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        refuse_cursor("resources/templates/list", request.as_ref())?;
        let mut all = Vec::new();
        for server in self.granted_servers(&context).await? {
            match self.daemon.mcp().resource_templates(&server).await {
                Ok(templates) => all.extend(templates.into_iter().map(|mut template| {
                    template.uri_template =
                        quiver_mcp::resource_uri(&server, &template.uri_template);
                    template
                })),
                Err(error) => {
                    tracing::warn!(server, %error, "cannot list an MCP server's resource templates for the gateway; left out")
                }
            }
        }
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let (server, uri) = self
            .granted_resource(&context, &request.uri, resource_not_found)
            .await?;
        let started = std::time::Instant::now();
        let read = self.daemon.mcp().read_resource(server, uri).await;
        self.record(
            &context,
            "resources/read",
            &request.uri,
            started,
            read.as_ref().err(),
        )
        .await;
        let read = read.map_err(|error| upstream_error(&error))?;
        // The contents name their URIs too: the gateway's names, so that a
        // client can read them again.
        let mut read = serde_json::to_value(read)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        if let Some(contents) = read.get_mut("contents").and_then(Value::as_array_mut) {
            for content in contents {
                if let Some(Value::String(uri)) = content.get_mut("uri") {
                    *uri = quiver_mcp::resource_uri(server, uri);
                }
            }
        }
        let read: ReadResourceResult = serde_json::from_value(read)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(read.into())
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        refuse_cursor("prompts/list", request.as_ref())?;
        let mut all = Vec::new();
        for server in self.granted_servers(&context).await? {
            match self.daemon.mcp().prompts(&server).await {
                Ok(prompts) => all.extend(prompts.into_iter().map(|mut prompt| {
                    prompt.name = mcp_tool_name(&server, &prompt.name);
                    prompt
                })),
                Err(error) => {
                    tracing::warn!(server, %error, "cannot list an MCP server's prompts for the gateway; left out")
                }
            }
        }
        Ok(ListPromptsResult::with_all_items(all))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let (server, prompt) = self.granted_prompt(&context, &request.name).await?;
        let started = std::time::Instant::now();
        let rendered = self
            .daemon
            .mcp()
            .get_prompt(&server, &prompt, request.arguments)
            .await;
        self.record(
            &context,
            "prompts/get",
            &request.name,
            started,
            rendered.as_ref().err(),
        )
        .await;
        let rendered = rendered.map_err(|error| upstream_error(&error))?;
        Ok(rendered.into())
    }

    async fn complete(
        &self,
        mut request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        // The reference is renamed to the server's own, and answered there.
        let server = match &mut request.r#ref {
            Reference::Prompt(reference) => {
                let (server, prompt) = self.granted_prompt(&context, &reference.name).await?;
                reference.name = prompt;
                server
            }
            Reference::Resource(reference) => {
                let (server, uri) = self
                    .granted_resource(&context, &reference.uri, invalid_params)
                    .await?;
                let (server, uri) = (server.to_owned(), uri.to_owned());
                reference.uri = uri;
                server
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "completion/complete: the gateway completes prompt (`ref/prompt`) and resource template (`ref/resource`) arguments only",
                    None,
                ));
            }
        };
        self.daemon
            .mcp()
            .complete(&server, request)
            .await
            .map_err(|error| upstream_error(&error))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if let Some(cursor) = request.as_ref().and_then(|r| r.cursor.as_deref()) {
            tracing::debug!(cursor, "tools/list with a cursor the gateway never gave");
            return Err(invalid_cursor("tools/list", cursor));
        }
        let identity = self.identity(&context.extensions)?;
        let live = self.session(&identity).await?;
        let assembly = self
            .daemon
            .assemble(&live.session, live.record.context_tokens);
        let catalog = assembly.catalog();
        let tools = assembly
            .tools()
            .iter()
            .filter_map(|definition| {
                let name = definition.pointer("/function/name").and_then(Value::as_str);
                let tool = name
                    .filter(|n| catalog.is_eager(n))
                    .and_then(|n| catalog.find(n));
                mcp_tool(definition, tool.map(|t| t.as_ref()))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let identity = self.identity(&context.extensions)?;
        let live = self.session(&identity).await?;
        let assembly = self
            .daemon
            .assemble(&live.session, live.record.context_tokens);
        let progress_token = context
            .meta
            .get_progress_token()
            .or_else(|| request.meta.as_ref().and_then(|m| m.get_progress_token()));
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let dispatcher = self.daemon.dispatcher();
        let dispatch = dispatcher.dispatch(&live.session, &assembly, &request.name, &arguments);
        let dispatch = async {
            match progress_token {
                Some(token) => {
                    let (sink, forwarded) = progress_to_client(context.peer.clone(), token);
                    let result = quiver_tool::progress::report_to(sink, dispatch).await;
                    // The reports go out before the answer: the call has
                    // dropped every copy of the sink, so the forwarder ends
                    // once it has sent what is queued (bounded, in case the
                    // client stopped reading).
                    let _ = tokio::time::timeout(PROGRESS_FLUSH_PATIENCE, forwarded).await;
                    result
                }
                None => dispatch.await,
            }
        };
        let result = tokio::select! {
            result = dispatch => result,
            () = context.ct.cancelled() => {
                tracing::debug!(tool = %request.name, "a gateway call was cancelled by its client");
                return Err(ErrorData::internal_error("the call was cancelled by the client", None));
            }
        };
        Ok(match result {
            Ok(value) => call_result(value),
            // Tool errors are results the model reads, as with a direct call.
            Err(error) => {
                CallToolResult::error(vec![ContentBlock::text(error.to_json().to_string())])
            }
        }
        .into())
    }
}

fn resource_not_found(message: String, data: Option<Value>) -> ErrorData {
    ErrorData::resource_not_found(message, data)
}

fn invalid_params(message: String, data: Option<Value>) -> ErrorData {
    ErrorData::invalid_params(message, data)
}

/// Pages are never split: the gateway lists everything at once.
fn refuse_cursor(method: &str, request: Option<&PaginatedRequestParams>) -> Result<(), ErrorData> {
    match request.and_then(|r| r.cursor.as_deref()) {
        Some(cursor) => Err(invalid_cursor(method, cursor)),
        None => Ok(()),
    }
}

/// An upstream server's refusal as the client's error: its own code and
/// message when it answered, else an internal error naming the server.
fn upstream_error(error: &quiver_mcp::McpCallError) -> ErrorData {
    match error {
        quiver_mcp::McpCallError::Protocol { code, message, .. } => {
            ErrorData::new(rmcp::model::ErrorCode(*code), message.clone(), None)
        }
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

/// Progress reports of one call waiting for a slow client.
const PROGRESS_BACKLOG: usize = 64;

/// How long a finished call's answer waits for its queued progress
/// reports to be sent.
const PROGRESS_FLUSH_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// A progress sink that sends each report to the client as
/// `notifications/progress` under the client's own `token`, in order (one
/// forwarding task per call; it ends when the call drops the sink). A
/// client slower than its server loses intermediate reports, never memory:
/// each report supersedes the one before.
fn progress_to_client(
    peer: rmcp::Peer<RoleServer>,
    token: ProgressToken,
) -> (
    quiver_tool::progress::ProgressSink,
    tokio::task::JoinHandle<()>,
) {
    let (reports, mut pending) =
        tokio::sync::mpsc::channel::<quiver_tool::progress::Progress>(PROGRESS_BACKLOG);
    let forwarder = tokio::spawn(async move {
        while let Some(report) = pending.recv().await {
            let mut params = ProgressNotificationParam::new(token.clone(), report.progress);
            params.total = report.total;
            params.message = report.message;
            if peer.notify_progress(params).await.is_err() {
                // The client went away; the call finishes on its own.
                break;
            }
        }
    });
    let sink: quiver_tool::progress::ProgressSink = Arc::new(move |report| {
        let _ = reports.try_send(report);
    });
    (sink, forwarder)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn function_definitions_become_mcp_tools() {
        let tool = mcp_tool(
            &json!({"type": "function", "function": {
            "name": "tool_search", "description": "Find tools", "parameters": {"type": "object"}}}),
            None,
        )
        .unwrap();
        assert_eq!(tool.name, "tool_search");
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
        assert!(mcp_tool(&json!({"type": "function"}), None).is_none());
    }

    #[test]
    fn mcp_content_passes_through_and_other_values_become_text() {
        let mcp = call_result(
            json!({"content": [{"type": "text", "text": "hi"}], "structured_content": {"a": 1}}),
        );
        assert_eq!(mcp.structured_content, Some(json!({"a": 1})));
        assert_eq!(mcp.content.len(), 1);
        let plain = call_result(json!({"sum": 3}));
        assert_eq!(plain.structured_content, Some(json!({"sum": 3})));
        let text = call_result(json!("done"));
        assert!(text.structured_content.is_none());
    }
}
