//! `quiver-test-mcp-server`: an MCP server written with rmcp that the
//! end-to-end tests and the MCP benchmark drive. It speaks stdio by default,
//! or Streamable HTTP on a 127.0.0.1 address with `--http`.
//!
//! Tools (always present):
//!
//! - `echo {text}`: returns `text` as text content;
//! - `add {a, b}`: returns the sum as structured content;
//! - `image`: returns a 1x1 PNG as image content;
//! - `fail {message}`: returns an `isError` result with `message`;
//! - `add_tool {name}` / `remove_tool {name}`: changes the tool list, then
//!   sends `notifications/tools/list_changed`;
//! - `hang`: never answers; counts the cancellations it receives;
//! - `stats`: `{"cancelled": N, "calls": N}`;
//! - `crash`: ends the process at once (exit code 101);
//! - `describe_me`: a tool with a long, multi-sentence description;
//! - `set_description {name, description}`: gives a tool a new description
//!   (a rug pull), then sends `notifications/tools/list_changed`;
//! - `rename_tool {name, to}`: lists a tool under a new name, same
//!   definition otherwise, then sends `list_changed`.
//!
//! `add_tool` takes an optional `description`. `--description TOOL=TEXT`
//! starts with another description for a tool.
//!
//! With `--annotated`, also `wipe {target}` (`destructiveHint: true`) and
//! `lookup {key}` (`readOnlyHint: true`).
//!
//! With `--rich`, tools that say more about themselves:
//!
//! - `sum {a, b}`: titled "Sum of two numbers", read-only, idempotent,
//!   closed-world hints, an output schema and `_meta`; returns `{"sum"}`;
//! - `miscount`: declares an output schema `{"count": integer}` and returns
//!   `{"count": "many"}`, which does not match it.
//!
//! With `--chatty`, tools that talk while they work:
//!
//! - `count_up {steps}`: sends `notifications/progress` for each step (to
//!   the request's progress token, when it has one), then returns
//!   `counted N`;
//! - `say {level, text}`: sends `text` as a `notifications/message` log
//!   message at `level`, then returns `said`.
//!
//! With `--resources`, two resources (`test://notes/first`, text, and
//! `test://notes/second`), a template `test://notes/{name}` (any name reads
//! as `note NAME`), a prompt `greet {name}`, and a tool `link_note` whose
//! result links `test://notes/first` and embeds `test://notes/second`.
//! Resources can be subscribed to, both ways (`resources/subscribe` on a
//! session, or named in `subscriptions/listen`): `touch_note {name}` sends
//! `notifications/resources/updated` for `test://notes/NAME` to each
//! subscriber and answers `touched N`; `stats` then also reports how many
//! subscriptions are held (`subscriptions`).
//!
//! Flags: `--initialize-delay-ms MS` answers `initialize` that much later
//! (a server slow to start), `--tools N` adds `tool_0..tool_N-1`, `--page-size K` paginates
//! `tools/list`, `--bad-schemas` adds tools with malformed input schemas,
//! `--spawn-grandchild FILE` starts a `sleep` in the server's own process
//! group and writes its pid to FILE, `--pid-file FILE` writes the server's
//! pid, `--require-header NAME=VALUE` makes the HTTP mode refuse requests
//! without that header, `--stderr TEXT` writes a line to stderr at start.
//!
//! With `--http ADDR --oauth`, `/mcp` needs a bearer token that the OAuth
//! authorization server this process runs beside it issued (see
//! `oauth_server.rs`); tokens live `--oauth-token-lifetime-s` seconds.

// `say` sends MCP log messages, deprecated by SEP-2577 but still sent by
// servers of the earlier protocol versions, which Quiver must keep hearing.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use clap::Parser;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Reference, Resource, ResourceContents,
    ResourceTemplate,
};
use rmcp::model::{SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams};
use rmcp::service::{RequestContext, SubscriptionContext, SubscriptionSink};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[path = "../oauth_server.rs"]
mod oauth_server;

/// A 1x1 transparent PNG, base64.
const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

#[derive(Parser, Debug, Clone)]
#[command(name = "quiver-test-mcp-server")]
struct Args {
    /// Serve Streamable HTTP at http://ADDR/mcp (ADDR must be on 127.0.0.1)
    /// instead of stdio; prints the URL as the first line of stdout.
    #[arg(long)]
    http: Option<String>,
    /// Extra generated tools `tool_0` .. `tool_{N-1}`.
    #[arg(long, default_value_t = 0)]
    tools: usize,
    /// Tools per `tools/list` page (0: one page).
    #[arg(long, default_value_t = 0)]
    page_size: usize,
    /// Add tools whose input schemas are malformed.
    #[arg(long)]
    bad_schemas: bool,
    /// Start a long `sleep` grandchild in this process group; write its pid here.
    #[arg(long)]
    spawn_grandchild: Option<String>,
    /// Write this server's pid here.
    #[arg(long)]
    pid_file: Option<String>,
    /// HTTP only: refuse requests without this header (`NAME=VALUE`).
    #[arg(long)]
    require_header: Option<String>,
    /// HTTP only: protect `/mcp` with OAuth, this process being the
    /// authorization server.
    #[arg(long)]
    oauth: bool,
    /// With `--oauth`: how long an access token lives.
    #[arg(long, default_value_t = 3600)]
    oauth_token_lifetime_s: u64,
    /// Write this line to stderr at start.
    #[arg(long)]
    stderr: Option<String>,
    /// The `instructions` of the initialize result.
    #[arg(long)]
    instructions: Option<String>,
    /// Add the tools with titles, hints and output schemas (see above).
    #[arg(long)]
    rich: bool,
    /// Offer resources, a resource template and a prompt (see above).
    #[arg(long)]
    resources: bool,
    /// Add `count_up` (progress) and `say` (log messages), see above.
    #[arg(long)]
    chatty: bool,
    /// Answer `initialize` this many milliseconds late.
    #[arg(long, default_value_t = 0)]
    initialize_delay_ms: u64,
    /// Add `wipe` (destructive) and `lookup` (read-only), with MCP annotations.
    #[arg(long)]
    annotated: bool,
    /// `TOOL=TEXT`: start with this description for TOOL (repeatable), as
    /// a new release of a server would.
    #[arg(long = "description")]
    descriptions: Vec<String>,
}

/// Changes made through `set_description` and `rename_tool`.
#[derive(Default)]
struct Edits {
    descriptions: BTreeMap<String, String>,
    renames: BTreeMap<String, String>,
}

/// Who subscribed to which note: sessions (`resources/subscribe`) and
/// listen streams (`subscriptions/listen`), each with a number of its own
/// to be told apart when it goes.
#[derive(Default)]
struct Subscribers {
    next: u64,
    sessions: Vec<(u64, rmcp::Peer<RoleServer>, String)>,
    streams: Vec<(u64, SubscriptionSink, Vec<String>)>,
}

impl Subscribers {
    fn held(&self) -> usize {
        self.sessions.len()
            + self
                .streams
                .iter()
                .map(|(_, _, uris)| uris.len())
                .sum::<usize>()
    }
}

#[derive(Clone)]
struct TestServer {
    args: Arc<Args>,
    added: Arc<Mutex<BTreeMap<String, Option<String>>>>,
    edits: Arc<Mutex<Edits>>,
    cancelled: Arc<AtomicU64>,
    calls: Arc<AtomicU64>,
    subscribers: Arc<Mutex<Subscribers>>,
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

fn tool(name: &str, description: &str, schema: Value) -> Tool {
    Tool::new(name.to_owned(), description.to_owned(), object(schema))
}

/// The `--rich` tools, in MCP's wire shape (read as rmcp's `Tool`).
fn rich_tools() -> Vec<Tool> {
    let wire = [
        json!({
            "name": "sum",
            "title": "Sum of two numbers",
            "description": "Add two numbers; the structured result holds the sum.",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
            "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]},
            "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
            "_meta": {"quiver.test/kind": "arithmetic"}
        }),
        json!({
            "name": "miscount",
            "description": "Count things; its structured result does not match its output schema.",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
        }),
    ];
    wire.into_iter()
        .filter_map(|tool| serde_json::from_value(tool).ok())
        .collect()
}

fn string_arg(request: &CallToolRequestParams, key: &str) -> Option<String> {
    request
        .arguments
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

impl TestServer {
    fn tools(&self) -> Vec<Tool> {
        let text_arg = |name: &str| json!({"type": "object", "properties": {name: {"type": "string"}}, "required": [name]});
        let mut tools = vec![
            tool("echo", "Echo the given text back.", text_arg("text")),
            tool(
                "add",
                "Add two numbers and return the sum as structured content.",
                json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            ),
            tool(
                "image",
                "Return a tiny PNG image.",
                json!({"type": "object"}),
            ),
            tool("fail", "Always report a tool error.", text_arg("message")),
            tool(
                "add_tool",
                "Add a tool with the given name, then notify that the tool list changed.",
                text_arg("name"),
            ),
            tool(
                "remove_tool",
                "Remove a tool added with add_tool, then notify that the tool list changed.",
                text_arg("name"),
            ),
            tool(
                "hang",
                "Never answer (until cancelled).",
                json!({"type": "object"}),
            ),
            tool(
                "stats",
                "Report how many calls were made and cancelled.",
                json!({"type": "object"}),
            ),
            tool(
                "crash",
                "End the server process at once.",
                json!({"type": "object"}),
            ),
            tool(
                "set_description",
                "Give a tool a new description, then notify that the tool list changed.",
                json!({"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"}}, "required": ["name", "description"]}),
            ),
            tool(
                "rename_tool",
                "List a tool under a new name, then notify that the tool list changed.",
                json!({"type": "object", "properties": {"name": {"type": "string"}, "to": {"type": "string"}}, "required": ["name", "to"]}),
            ),
            tool(
                "describe_me",
                &format!(
                    "A tool with a long description. {}The end.",
                    "This sentence is here to make the description long. ".repeat(12)
                ),
                json!({"type": "object"}),
            ),
        ];
        if self.args.rich {
            tools.extend(rich_tools());
        }
        if self.args.chatty {
            tools.push(tool(
                "count_up",
                "Count to a number of steps, reporting progress at each.",
                json!({"type": "object", "properties": {"steps": {"type": "integer"}}, "required": ["steps"]}),
            ));
            tools.push(tool(
                "say",
                "Write a log message at a level.",
                json!({"type": "object", "properties": {"level": {"type": "string"}, "text": {"type": "string"}}, "required": ["level", "text"]}),
            ));
        }
        if self.args.resources {
            tools.push(tool(
                "link_note",
                "Link the first note and embed the second.",
                json!({"type": "object", "properties": {}}),
            ));
            tools.push(tool(
                "touch_note",
                "Tell the note's subscribers that it changed.",
                text_arg("name"),
            ));
        }
        for index in 0..self.args.tools {
            tools.push(tool(
                &format!("tool_{index}"),
                &format!("Generated tool number {index}."),
                json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
            ));
        }
        if self.args.annotated {
            let mut wipe = tool(
                "wipe",
                "Erase everything stored under a target.",
                text_arg("target"),
            );
            let mut hints = rmcp::model::ToolAnnotations::new();
            hints.destructive_hint = Some(true);
            hints.read_only_hint = Some(false);
            wipe.annotations = Some(hints);
            let mut lookup = tool("lookup", "Look a key up in the store.", text_arg("key"));
            let mut hints = rmcp::model::ToolAnnotations::new();
            hints.read_only_hint = Some(true);
            lookup.annotations = Some(hints);
            tools.push(wipe);
            tools.push(lookup);
        }
        if self.args.bad_schemas {
            tools.push(tool(
                "string_schema",
                "A tool whose input schema is a string schema.",
                json!({"type": "string"}),
            ));
            tools.push(tool(
                "untyped_schema",
                "A tool whose input schema has properties but no type.",
                json!({"properties": {"q": {"type": "string"}}, "required": ["q"]}),
            ));
        }
        for (name, description) in self
            .added
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let description = description
                .clone()
                .unwrap_or_else(|| format!("Dynamically added tool {name}."));
            tools.push(tool(name, &description, json!({"type": "object"})));
        }
        let edits = self.edits.lock().unwrap_or_else(PoisonError::into_inner);
        for tool in &mut tools {
            if let Some(description) = edits.descriptions.get(tool.name.as_ref()) {
                tool.description = Some(description.clone().into());
            }
            if let Some(to) = edits.renames.get(tool.name.as_ref()) {
                tool.name = to.clone().into();
            }
        }
        tools
    }

    async fn edit(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (Some(name), description, to) = (
            string_arg(request, "name"),
            string_arg(request, "description"),
            string_arg(request, "to"),
        ) else {
            return CallToolResult::error(vec![ContentBlock::text("`name` is required")]);
        };
        {
            let mut edits = self.edits.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(description) = description {
                edits.descriptions.insert(name.clone(), description);
            }
            if let Some(to) = to {
                edits.renames.insert(name.clone(), to);
            }
        }
        if let Err(error) = context.peer.notify_tool_list_changed().await {
            eprintln!("cannot send list_changed: {error}");
        }
        CallToolResult::success(vec![ContentBlock::text(format!("changed {name}"))])
    }

    /// Sends `notifications/resources/updated` for `uri` to each of its
    /// subscribers.
    async fn touch(&self, uri: &str) -> CallToolResult {
        let (sessions, streams) = {
            let subscribers = self
                .subscribers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let sessions: Vec<_> = subscribers
                .sessions
                .iter()
                .filter(|(_, _, subscribed)| subscribed == uri)
                .map(|(_, peer, _)| peer.clone())
                .collect();
            let streams: Vec<_> = subscribers
                .streams
                .iter()
                .filter(|(_, _, uris)| uris.iter().any(|u| u == uri))
                .map(|(_, sink, _)| sink.clone())
                .collect();
            (sessions, streams)
        };
        let mut touched = 0;
        for peer in sessions {
            let params = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
            if peer.notify_resource_updated(params).await.is_ok() {
                touched += 1;
            }
        }
        for sink in streams {
            if sink.notify_resource_updated(uri).await.is_ok() {
                touched += 1;
            }
        }
        CallToolResult::success(vec![ContentBlock::text(format!("touched {touched}"))])
    }

    async fn change_list(
        &self,
        name: Option<String>,
        description: Option<String>,
        add: bool,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let Some(name) = name else {
            return CallToolResult::error(vec![ContentBlock::text("`name` is required")]);
        };
        {
            let mut added = self.added.lock().unwrap_or_else(PoisonError::into_inner);
            if add {
                added.insert(name.clone(), description);
            } else {
                added.remove(&name);
            }
        }
        if let Err(error) = context.peer.notify_tool_list_changed().await {
            eprintln!("cannot send list_changed: {error}");
        }
        CallToolResult::success(vec![ContentBlock::text(format!(
            "{} {name}",
            if add { "added" } else { "removed" }
        ))])
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        // Without `--resources` the server offers neither, as most do.
        if !self.args.resources {
            capabilities.completions = None;
            capabilities.prompts = None;
            capabilities.resources = None;
        }
        let info = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "quiver-test-mcp-server",
            env!("CARGO_PKG_VERSION"),
        ));
        match &self.args.instructions {
            Some(instructions) => info.with_instructions(instructions.clone()),
            None => info,
        }
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if self.args.initialize_delay_ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(
                self.args.initialize_delay_ms,
            ))
            .await;
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.args.resources || !request.uri.starts_with("test://notes/") {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        let mut subscribers = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        subscribers.next += 1;
        let id = subscribers.next;
        subscribers.sessions.push((id, context.peer, request.uri));
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sessions
            .retain(|(_, _, uri)| *uri != request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = requested.clone();
        // Notes only, as `resources/subscribe` takes.
        accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
            uris.iter()
                .filter(|uri| uri.starts_with("test://notes/"))
                .cloned()
                .collect()
        });
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let id = {
            let mut subscribers = self
                .subscribers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            subscribers.next += 1;
            let id = subscribers.next;
            subscribers.streams.push((id, context.sink().clone(), uris));
            id
        };
        context.cancelled().await;
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .streams
            .retain(|(other, _, _)| *other != id);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        if !self.args.resources {
            return Ok(ListResourcesResult::default());
        }
        let mut first = Resource::new("test://notes/first", "first");
        first.mime_type = Some("text/plain".to_owned());
        let second = Resource::new("test://notes/second", "second");
        Ok(ListResourcesResult::with_all_items(vec![first, second]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        if !self.args.resources {
            return Ok(ListResourceTemplatesResult::default());
        }
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("test://notes/{name}", "note"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let name = request
            .uri
            .strip_prefix("test://notes/")
            .filter(|_| self.args.resources)
            .ok_or_else(|| {
                ErrorData::resource_not_found(format!("no resource {}", request.uri), None)
            })?;
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            format!("note {name}"),
            request.uri.clone(),
        )])
        .into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        if !self.args.resources {
            return Ok(ListPromptsResult::default());
        }
        let mut name = PromptArgument::new("name");
        name.required = Some(true);
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            "greet",
            Some("Greet someone by name."),
            Some(vec![name]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if !self.args.resources || request.name != "greet" {
            return Err(ErrorData::invalid_params(
                format!("no prompt {}", request.name),
                None,
            ));
        }
        let name = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("name"))
            .and_then(Value::as_str)
            .ok_or_else(|| ErrorData::invalid_params("greet needs `name`", None))?;
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            rmcp::model::Role::User,
            format!("Say hello to {name}."),
        )])
        .into())
    }

    /// Completes greet's `name` from a few names and the notes template's
    /// `name` from the notes, by prefix.
    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let known: &[&str] = match &request.r#ref {
            Reference::Prompt(p) if p.name == "greet" => &["Ada", "Alan", "Grace"],
            Reference::Resource(r) if r.uri == "test://notes/{name}" => &["first", "second"],
            _ => return Err(ErrorData::invalid_params("nothing to complete there", None)),
        };
        let values = known
            .iter()
            .filter(|v| v.starts_with(&request.argument.value))
            .map(|v| (*v).to_owned())
            .collect();
        let completion =
            CompletionInfo::new(values).map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(CompleteResult::new(completion))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools();
        if self.args.page_size == 0 {
            return Ok(ListToolsResult::with_all_items(tools));
        }
        let start: usize = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse()
                .map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
        };
        let end = (start + self.args.page_size).min(tools.len());
        let page: Vec<Tool> = tools
            .get(start..end)
            .map(<[Tool]>::to_vec)
            .unwrap_or_default();
        let mut result = ListToolsResult::with_all_items(page);
        if end < tools.len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let result = match request.name.as_ref() {
            "echo" => match string_arg(&request, "text") {
                Some(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
                None => {
                    return Err(ErrorData::invalid_params("echo needs `text`", None));
                }
            },
            "add" => {
                let number = |key: &str| {
                    request
                        .arguments
                        .as_ref()
                        .and_then(|a| a.get(key))
                        .and_then(Value::as_f64)
                };
                match (number("a"), number("b")) {
                    (Some(a), Some(b)) => CallToolResult::structured(json!({"sum": a + b})),
                    _ => return Err(ErrorData::invalid_params("add needs numbers a and b", None)),
                }
            }
            "image" => CallToolResult::success(vec![
                ContentBlock::text("a tiny image"),
                ContentBlock::image(PNG_1X1, "image/png"),
            ]),
            "fail" => CallToolResult::error(vec![ContentBlock::text(
                string_arg(&request, "message").unwrap_or_else(|| "failed".to_owned()),
            )]),
            "add_tool" => {
                self.change_list(
                    string_arg(&request, "name"),
                    string_arg(&request, "description"),
                    true,
                    &context,
                )
                .await
            }
            "remove_tool" => {
                self.change_list(string_arg(&request, "name"), None, false, &context)
                    .await
            }
            "set_description" | "rename_tool" => self.edit(&request, &context).await,
            "hang" => {
                context.ct.cancelled().await;
                self.cancelled.fetch_add(1, Ordering::Relaxed);
                CallToolResult::error(vec![ContentBlock::text("cancelled")])
            }
            "stats" => CallToolResult::structured(json!({
                "cancelled": self.cancelled.load(Ordering::Relaxed),
                "calls": self.calls.load(Ordering::Relaxed),
                "subscriptions": self.subscribers.lock().unwrap_or_else(PoisonError::into_inner).held(),
            })),
            "touch_note" if self.args.resources => {
                let uri = format!(
                    "test://notes/{}",
                    string_arg(&request, "name").unwrap_or_default()
                );
                self.touch(&uri).await
            }
            "crash" => std::process::exit(101),
            "sum" if self.args.rich => {
                let number = |key: &str| {
                    request
                        .arguments
                        .as_ref()
                        .and_then(|a| a.get(key))
                        .and_then(Value::as_f64)
                };
                match (number("a"), number("b")) {
                    (Some(a), Some(b)) => CallToolResult::structured(json!({"sum": a + b})),
                    _ => return Err(ErrorData::invalid_params("sum needs numbers a and b", None)),
                }
            }
            "count_up" if self.args.chatty => {
                let steps = request
                    .arguments
                    .as_ref()
                    .and_then(|a| a.get("steps"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
                    .min(1_000);
                if let Some(token) = context.meta.get_progress_token() {
                    for step in 1..=steps {
                        let mut params = ProgressNotificationParam::new(token.clone(), step as f64);
                        params.total = Some(steps as f64);
                        params.message = Some(format!("step {step} of {steps}"));
                        if let Err(error) = context.peer.notify_progress(params).await {
                            eprintln!("cannot send progress: {error}");
                        }
                    }
                }
                CallToolResult::success(vec![ContentBlock::text(format!("counted {steps}"))])
            }
            "say" if self.args.chatty => {
                let level = match string_arg(&request, "level").as_deref() {
                    Some("debug") => LoggingLevel::Debug,
                    Some("warning") => LoggingLevel::Warning,
                    Some("error") => LoggingLevel::Error,
                    _ => LoggingLevel::Info,
                };
                let text = string_arg(&request, "text").unwrap_or_default();
                let mut params = LoggingMessageNotificationParam::new(level, json!(text));
                params.logger = Some("test-logger".to_owned());
                if let Err(error) = context.peer.notify_logging_message(params).await {
                    eprintln!("cannot send a log message: {error}");
                }
                CallToolResult::success(vec![ContentBlock::text("said")])
            }
            "link_note" if self.args.resources => CallToolResult::success(vec![
                ContentBlock::resource_link(Resource::new("test://notes/first", "first")),
                ContentBlock::embedded_text("test://notes/second", "note second"),
            ]),
            "miscount" if self.args.rich => CallToolResult::structured(json!({"count": "many"})),
            name if self.tools().iter().any(|t| t.name == name) => {
                CallToolResult::success(vec![ContentBlock::text(format!("called {name}"))])
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{}`", request.name),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

fn write_file(path: &str, text: &str) {
    if let Err(error) = std::fs::write(path, text) {
        eprintln!("cannot write {path}: {error}");
        std::process::exit(2);
    }
}

async fn serve_http(server: TestServer, addr: &str) -> std::io::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    if !local.ip().is_loopback() {
        return Err(std::io::Error::other(format!(
            "refusing to serve on {local}: only loopback addresses are allowed"
        )));
    }
    let required = server.args.require_header.clone();
    let oauth = server.args.oauth.then(|| {
        oauth_server::Authority::new(
            format!("http://{local}"),
            server.args.oauth_token_lifetime_s,
        )
    });
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(server.clone()),
            Default::default(),
            StreamableHttpServerConfig::default(),
        );
    let mut router = axum::Router::new().nest_service("/mcp", service);
    if let Some(required) = required {
        let (name, value) = required
            .split_once('=')
            .map(|(n, v)| (n.to_ascii_lowercase(), v.to_owned()))
            .unwrap_or_default();
        router = router.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let allowed = request
                    .headers()
                    .get(name.as_str())
                    .and_then(|v| v.to_str().ok())
                    == Some(value.as_str());
                async move {
                    if allowed {
                        next.run(request).await
                    } else {
                        axum::response::IntoResponse::into_response(
                            axum::http::StatusCode::UNAUTHORIZED,
                        )
                    }
                }
            },
        ));
    }
    if let Some(authority) = oauth {
        router = authority.router(router);
    }
    println!("http://{local}/mcp");
    let _ = std::io::stdout().flush();
    axum::serve(listener, router).await
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Some(line) = &args.stderr {
        eprintln!("{line}");
    }
    if let Some(path) = &args.pid_file {
        write_file(path, &std::process::id().to_string());
    }
    // Kept alive (and never waited for) so that it outlives a killed parent:
    // only ending the whole process group removes it.
    let _grandchild =
        args.spawn_grandchild.as_ref().map(|path| {
            match std::process::Command::new("sleep")
                .arg("600")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .spawn()
            {
                Ok(child) => {
                    write_file(path, &child.id().to_string());
                    child
                }
                Err(error) => {
                    eprintln!("cannot spawn the grandchild: {error}");
                    std::process::exit(2);
                }
            }
        });
    let mut edits = Edits::default();
    for entry in &args.descriptions {
        let Some((tool, text)) = entry.split_once('=') else {
            eprintln!("--description takes TOOL=TEXT, not `{entry}`");
            std::process::exit(2);
        };
        edits.descriptions.insert(tool.to_owned(), text.to_owned());
    }
    let server = TestServer {
        args: Arc::new(args.clone()),
        added: Arc::default(),
        edits: Arc::new(Mutex::new(edits)),
        cancelled: Arc::default(),
        calls: Arc::default(),
        subscribers: Arc::default(),
    };
    let outcome = match &args.http {
        Some(addr) => serve_http(server, addr).await.map_err(|e| e.to_string()),
        None => match server.serve(rmcp::transport::stdio()).await {
            Ok(running) => running
                .waiting()
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(error) => Err(error.to_string()),
        },
    };
    if let Err(error) = outcome {
        eprintln!("quiver-test-mcp-server: {error}");
        std::process::exit(1);
    }
    // stdin may still block runtime shutdown (see rmcp::transport::io).
    std::process::exit(0);
}
