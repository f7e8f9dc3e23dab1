//! `quiver example-mcp-server`: a small notes MCP server (rmcp, stdio) that
//! ships inside the `quiver` binary, so that the embedded default config
//! has a real MCP server to connect, list, search and call. Notes are kept
//! in a JSON file (`--file`, default `notes.json` in the state directory),
//! written atomically after each change.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result};
use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `quiver example-mcp-server` arguments.
#[derive(Args)]
pub(crate) struct ExampleServerArgs {
    /// The notes file (default: notes.json in the state directory).
    #[arg(long)]
    file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Note {
    id: u64,
    title: String,
    text: String,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Notes {
    next_id: u64,
    notes: BTreeMap<u64, Note>,
}

#[derive(Clone)]
struct NotesServer {
    file: Arc<PathBuf>,
    notes: Arc<Mutex<Notes>>,
}

fn tool(name: &str, description: &str, schema: Value) -> Tool {
    let schema: JsonObject = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    Tool::new(name.to_owned(), description.to_owned(), schema)
}

fn tools() -> Vec<Tool> {
    let id = json!({"type": "object", "properties": {"id": {"type": "integer", "description": "The note's id."}}, "required": ["id"], "additionalProperties": false});
    vec![
        tool(
            "add_note",
            "Save a new note with a title, text and optional tags; returns its id.",
            json!({"type": "object", "properties": {
                "title": {"type": "string", "description": "A short title."},
                "text": {"type": "string", "description": "The note itself."},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels to find it by."}
            }, "required": ["title", "text"], "additionalProperties": false}),
        ),
        tool(
            "list_notes",
            "List saved notes (id, title, tags), optionally only those with a tag.",
            json!({"type": "object", "properties": {"tag": {"type": "string"}}, "additionalProperties": false}),
        ),
        tool(
            "search_notes",
            "Find notes whose title, text or tags contain every word of the query (case-insensitive).",
            json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"], "additionalProperties": false}),
        ),
        tool("get_note", "Read one note in full by its id.", id.clone()),
        tool("delete_note", "Delete a note by its id.", id),
    ]
}

fn text(value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

fn failure(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

impl NotesServer {
    fn save(&self, notes: &Notes) -> Result<(), String> {
        let body = serde_json::to_vec_pretty(notes).map_err(|e| e.to_string())?;
        let temporary = self.file.with_extension("json.tmp");
        std::fs::write(&temporary, body)
            .and_then(|()| std::fs::rename(&temporary, self.file.as_ref()))
            .map_err(|e| format!("cannot write {}: {e}", self.file.display()))
    }

    fn call(&self, name: &str, arguments: &JsonObject) -> CallToolResult {
        let string = |key: &str| arguments.get(key).and_then(Value::as_str);
        let id = arguments.get("id").and_then(Value::as_u64);
        let mut notes = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        match name {
            "add_note" => {
                let (Some(title), Some(body)) = (string("title"), string("text")) else {
                    return failure("add_note needs `title` and `text`".into());
                };
                let tags = arguments
                    .get("tags")
                    .and_then(Value::as_array)
                    .map(|t| {
                        t.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                notes.next_id += 1;
                let note = Note {
                    id: notes.next_id,
                    title: title.to_owned(),
                    text: body.to_owned(),
                    tags,
                };
                notes.notes.insert(note.id, note.clone());
                match self.save(&notes) {
                    Ok(()) => text(json!({"id": note.id, "saved": true})),
                    Err(error) => failure(error),
                }
            }
            "list_notes" => {
                let tag = string("tag");
                let listed: Vec<Value> = notes
                    .notes
                    .values()
                    .filter(|n| tag.is_none_or(|t| n.tags.iter().any(|x| x == t)))
                    .map(|n| json!({"id": n.id, "title": n.title, "tags": n.tags}))
                    .collect();
                text(json!({"notes": listed}))
            }
            "search_notes" => {
                let Some(query) = string("query") else {
                    return failure("search_notes needs `query`".into());
                };
                let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
                let found: Vec<&Note> = notes
                    .notes
                    .values()
                    .filter(|n| {
                        let haystack =
                            format!("{} {} {}", n.title, n.text, n.tags.join(" ")).to_lowercase();
                        words.iter().all(|w| haystack.contains(w.as_str()))
                    })
                    .collect();
                text(json!({"notes": found}))
            }
            "get_note" => match id.and_then(|id| notes.notes.get(&id)) {
                Some(note) => text(json!(note)),
                None => failure(format!("no note with id {}", id.unwrap_or_default())),
            },
            "delete_note" => match id.and_then(|id| notes.notes.remove(&id)) {
                Some(note) => match self.save(&notes) {
                    Ok(()) => text(json!({"id": note.id, "deleted": true})),
                    Err(error) => failure(error),
                },
                None => failure(format!("no note with id {}", id.unwrap_or_default())),
            },
            other => failure(format!("unknown tool `{other}`")),
        }
    }
}

impl ServerHandler for NotesServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "quiver-example-notes",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("Notes: save, list, search, read and delete short text notes.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        Ok(self.call(&request.name, &arguments).into())
    }
}

/// Serves the notes on stdin/stdout until the client goes away.
pub(crate) fn run(args: ExampleServerArgs) -> Result<()> {
    let file = match args.file {
        Some(file) => file,
        None => {
            let dir = quiver_config::paths::default_state_dir();
            quiver_config::paths::make_private_dir(&dir)?;
            dir.join("notes.json")
        }
    };
    let notes = match std::fs::read(&file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a notes file", file.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Notes::default(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let server = NotesServer {
        file: Arc::new(file),
        notes: Arc::new(Mutex::new(notes)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .context("MCP handshake failed")?;
        running.waiting().await.context("MCP session failed")?;
        Ok::<_, anyhow::Error>(())
    })?;
    // stdin may keep the runtime's blocking reader alive; the session is over.
    std::process::exit(0);
}
