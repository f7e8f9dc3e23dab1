//! The agent loop: one turn of a conversation. Each step assembles the
//! session's tools afresh (stateless, so a plugin reload or an MCP server
//! going away shows on the very next step), asks the model, dispatches its
//! tool calls through the chain with their real names, appends the results
//! and asks again, until the model answers in text or a limit is reached.
//!
//! Two limits end a turn cleanly: `agent.max_steps` model requests, and
//! more than `agent.max_consecutive_searches` `tool_search` calls in a row
//! (a model searching in circles). Either way the model is told why in the
//! tool result or a closing note, and asked once more, without tools, for
//! its answer.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::assembly::Assembler;
use crate::bridge::{TOOL_CALL, TOOL_SEARCH};
use crate::daemon::settings::AgentConfig;
use crate::dispatch::{Dispatcher, Event, Session, Status};
use crate::model::{
    Completion, CompletionRequest, FinishReason, Message, ModelError, ModelProvider, Role, Usage,
};
use crate::registry::ToolRegistry;
use crate::tokens;

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered in text.
    Answer,
    /// The model ran out of output tokens mid-answer.
    Length,
    /// `agent.max_steps` model requests were made.
    StepLimit,
    /// The model called `tool_search` more than
    /// `agent.max_consecutive_searches` times in a row.
    SearchLimit,
}

/// One tool call of a turn, as the activity summary shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnToolCall {
    /// The name the model called (`tool_call` for bridge calls).
    pub called: String,
    /// The real tool run (the `name` inside a `tool_call`).
    pub tool: String,
    /// Whether it produced a result (not an error).
    pub ok: bool,
}

/// What a turn did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnOutcome {
    /// The model's final text.
    pub reply: String,
    /// Why the turn ended.
    pub stop: StopReason,
    /// Model requests made.
    pub steps: u32,
    /// Every tool call, in order.
    pub tool_calls: Vec<TurnToolCall>,
    /// Tokens used over the turn.
    pub usage: TurnUsage,
}

/// Tokens used over a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TurnUsage {
    /// Prompt tokens, summed over the requests.
    pub input_tokens: u64,
    /// Answer tokens, summed over the requests.
    pub output_tokens: u64,
}

impl TurnUsage {
    fn add(&mut self, usage: Usage) {
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
    }
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The model could not be asked.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A message could not be stored.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl TurnError {
    /// A short stable code.
    pub fn code(&self) -> &'static str {
        match self {
            TurnError::Model(e) => e.code(),
            TurnError::Store(_) => "store_error",
        }
    }
}

/// Where a turn's messages go as they happen (the session store), so a
/// turn that fails halfway keeps what it did.
pub trait TurnLog: Send {
    /// Keeps `message`.
    fn append(&mut self, message: &Message) -> Result<(), crate::store::StoreError>;
}

/// A log that keeps nothing (tests, one-off runs).
#[derive(Debug, Default)]
pub struct DiscardLog;

impl TurnLog for DiscardLog {
    fn append(&mut self, _: &Message) -> Result<(), crate::store::StoreError> {
        Ok(())
    }
}

/// Runs turns: the registry the tools come from, the assembler, the
/// dispatcher and the loop's limits. Shared by every session.
#[derive(Clone)]
pub struct Agent {
    registry: Arc<ToolRegistry>,
    assembler: Arc<Assembler>,
    dispatcher: Dispatcher,
    config: AgentConfig,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// One turn's inputs.
pub struct Turn<'a> {
    /// The session (its scope limits what is assembled and called).
    pub session: &'a Arc<Session>,
    /// The model to ask.
    pub model: &'a dyn ModelProvider,
    /// The session's context window, in tokens.
    pub context_tokens: u64,
    /// The conversation before this turn; the turn's messages are appended.
    pub history: &'a mut Vec<Message>,
    /// Receives each new message as it happens.
    pub log: &'a mut dyn TurnLog,
}

impl Agent {
    /// An agent assembling from `registry` with `assembler` and calling
    /// tools through `dispatcher`.
    pub fn new(
        registry: Arc<ToolRegistry>,
        assembler: Arc<Assembler>,
        dispatcher: Dispatcher,
        config: AgentConfig,
    ) -> Agent {
        Agent {
            registry,
            assembler,
            dispatcher,
            config,
        }
    }

    /// The loop's settings.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Runs one turn for `user_text`.
    pub async fn run_turn(
        &self,
        turn: Turn<'_>,
        user_text: &str,
    ) -> Result<TurnOutcome, TurnError> {
        let Turn {
            session,
            model,
            context_tokens,
            history,
            log,
        } = turn;
        let user = Message::user(user_text);
        log.append(&user)?;
        history.push(user);
        let mut outcome = TurnOutcome {
            reply: String::new(),
            stop: StopReason::Answer,
            steps: 0,
            tool_calls: Vec::new(),
            usage: TurnUsage::default(),
        };
        let mut consecutive_searches = 0u32;
        let mut ending: Option<(StopReason, String)> = None;
        while outcome.steps < self.config.max_steps {
            outcome.steps += 1;
            // Stateless: the tools are what the registry holds right now.
            let assembly =
                session.assemble(&self.assembler, &self.registry.snapshot(), context_tokens);
            let completion = self
                .ask(model, context_tokens, history, assembly.tools(), true)
                .await?;
            outcome.usage.add(completion.usage);
            let Completion {
                message, finish, ..
            } = completion;
            let calls = message.tool_calls.clone();
            log.append(&message)?;
            history.push(message.clone());
            if calls.is_empty() {
                outcome.reply = message.content;
                outcome.stop = match finish {
                    FinishReason::Length => StopReason::Length,
                    _ => StopReason::Answer,
                };
                return Ok(outcome);
            }
            for call in calls {
                let searching = call.name == TOOL_SEARCH;
                consecutive_searches = if searching {
                    consecutive_searches + 1
                } else {
                    0
                };
                let (content, tool, ok) = if searching
                    && consecutive_searches > self.config.max_consecutive_searches
                {
                    let note = format!(
                        "Search limit reached: this is tool_search call {consecutive_searches} in a row, more than the {} allowed in one turn. Stop searching; answer with what you have found, or tell the user what is missing.",
                        self.config.max_consecutive_searches
                    );
                    ending = Some((StopReason::SearchLimit, note.clone()));
                    let content = json!({"error": "search_limit", "message": note});
                    (content.to_string(), TOOL_SEARCH.to_owned(), false)
                } else {
                    self.call_tool(session, &assembly, &call.name, &call.arguments)
                        .await
                };
                outcome.tool_calls.push(TurnToolCall {
                    called: call.name.clone(),
                    tool,
                    ok,
                });
                let result = Message::tool_result(&call.id, &call.name, content);
                log.append(&result)?;
                history.push(result);
            }
            if ending.is_some() {
                break;
            }
        }
        let (stop, note) = ending.unwrap_or_else(|| {
            (
                StopReason::StepLimit,
                format!(
                    "Step limit reached: {} model requests in this turn. Answer now with what you have, without calling tools.",
                    self.config.max_steps
                ),
            )
        });
        // The model is told why and gets one request without tools, so the
        // turn ends with an answer rather than a dangling tool call.
        let closing = Message::user(format!("[quiver] {note}"));
        log.append(&closing)?;
        history.push(closing);
        outcome.steps += 1;
        let completion = self.ask(model, context_tokens, history, &[], false).await?;
        outcome.usage.add(completion.usage);
        // A server may ignore "no tools"; its calls are not run.
        let answer = Message::assistant(completion.message.content, Vec::new());
        log.append(&answer)?;
        history.push(answer.clone());
        outcome.reply = answer.content;
        outcome.stop = stop;
        Ok(outcome)
    }

    async fn ask(
        &self,
        model: &dyn ModelProvider,
        context_tokens: u64,
        history: &[Message],
        tools: &[Value],
        allow_tools: bool,
    ) -> Result<Completion, ModelError> {
        let tools_tokens = tokens::count(&Value::from(tools.to_vec()).to_string());
        let reserved =
            tools_tokens + tokens::count(&self.config.system_prompt) + context_tokens / 8; // room for the answer
        let window = fit_history(history, context_tokens.saturating_sub(reserved));
        model
            .complete(CompletionRequest {
                system: &self.config.system_prompt,
                messages: window,
                tools,
                max_output_tokens: 0,
                allow_tools,
            })
            .await
    }

    /// Runs one tool call; returns the result text for the model, the real
    /// tool's name and whether it succeeded.
    async fn call_tool(
        &self,
        session: &Arc<Session>,
        assembly: &crate::assembly::Assembly,
        name: &str,
        arguments: &str,
    ) -> (String, String, bool) {
        let arguments = match parse_arguments(arguments) {
            Ok(arguments) => arguments,
            Err(message) => {
                session.record(Event {
                    time: std::time::SystemTime::now(),
                    call_id: 0,
                    session: session.id().to_owned(),
                    tool: name.to_owned(),
                    via_bridge: false,
                    arguments: Value::Null,
                    status: Status::Error,
                    duration: std::time::Duration::ZERO,
                    detail: Some(message.clone()),
                });
                let error = json!({
                    "error": "invalid_arguments_json",
                    "message": format!("the arguments of `{name}` are not valid JSON: {message}"),
                });
                return (error.to_string(), name.to_owned(), false);
            }
        };
        let tool = match name {
            TOOL_CALL => arguments
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or(TOOL_CALL)
                .to_owned(),
            _ => name.to_owned(),
        };
        match self
            .dispatcher
            .dispatch(session, assembly, name, &arguments)
            .await
        {
            Ok(Value::String(text)) => (text, tool, true),
            Ok(value) => (value.to_string(), tool, true),
            Err(error) => (error.to_json().to_string(), tool, false),
        }
    }
}

/// The arguments text as JSON (empty text is `{}`), or the parser's
/// message with line and column.
fn parse_arguments(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// The most recent part of `history` that fits in `budget` tokens, cut only
/// where a user message starts (so no tool result loses its call). The
/// last user message and what follows it are always kept.
pub fn fit_history(history: &[Message], budget: u64) -> &[Message] {
    let mut used = 0u64;
    let mut start = history.len();
    let mut cut = history.len();
    for (index, message) in history.iter().enumerate().rev() {
        used += message_tokens(message);
        start = index;
        if message.role == Role::User {
            if used > budget && cut < history.len() {
                break;
            }
            cut = index;
        }
    }
    let _ = start;
    history.get(cut..).unwrap_or(history)
}

fn message_tokens(message: &Message) -> u64 {
    // A few tokens of framing per message, as the chat formats add.
    4 + tokens::count(&message.content)
        + message
            .tool_calls
            .iter()
            .map(|c| tokens::count(&c.name) + tokens::count(&c.arguments) + 4)
            .sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;

    #[test]
    fn history_is_cut_at_user_messages_only() {
        let long = "x".repeat(400); // 100 tokens
        let history = vec![
            Message::user(&long),
            Message::assistant(
                "",
                vec![ToolCall {
                    id: "1".into(),
                    name: "tool_search".into(),
                    arguments: "{}".into(),
                }],
            ),
            Message::tool_result("1", "tool_search", &long),
            Message::assistant(&long, Vec::new()),
            Message::user("second"),
            Message::assistant("answer", Vec::new()),
        ];
        assert_eq!(fit_history(&history, 10_000).len(), 6);
        // Too small for the first exchange: it goes whole, never half.
        let fitted = fit_history(&history, 50);
        assert_eq!(fitted.len(), 2);
        assert_eq!(fitted[0].content, "second");
        // Even a budget of nothing keeps the current user message.
        assert_eq!(fit_history(&history, 0).len(), 2);
    }

    #[test]
    fn arguments_text_must_be_json() {
        assert_eq!(parse_arguments("").unwrap(), json!({}));
        assert_eq!(parse_arguments("{\"a\": 1}").unwrap(), json!({"a": 1}));
        let error = parse_arguments("{\"a\": ").unwrap_err();
        assert!(error.contains("line 1"), "{error}");
    }
}
