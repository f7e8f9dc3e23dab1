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

pub mod settings;

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::settings::AgentConfig;
use quiver_catalog::assembly::Assembler;
use quiver_catalog::bridge::TOOL_SEARCH;
use quiver_dispatch::{Dispatcher, Event, Session, Status};
use quiver_model::{
    Completion, CompletionRequest, FinishReason, Message, ModelError, ModelProvider, Role,
    StreamDelta, ToolCall, Usage,
};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::tokens;

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
    Store(#[from] quiver_store::StoreError),
}

impl TurnError {
    /// A short stable code.
    pub fn code(&self) -> &'static str {
        match self {
            TurnError::Model(e) => e.code(),
            TurnError::Store(e) => e.code(),
        }
    }
}

/// Where a turn's messages go as they happen (the session store), so a
/// turn that fails halfway keeps what it did; and where the model's answers
/// are shown as they stream in (both default to nothing).
#[async_trait::async_trait]
pub trait TurnLog: Send {
    /// Keeps `message`.
    async fn append(&mut self, message: &Message) -> Result<(), quiver_store::StoreError>;

    /// A piece of the answer to model request `step` (1-based), as it
    /// arrives; only models that stream give any.
    fn delta(&mut self, step: u32, delta: StreamDelta<'_>) {
        let _ = (step, delta);
    }

    /// The whole answer to model request `step`, as it is kept (after
    /// [`TurnLog::append`]), with what it cost and why it stopped.
    fn message_done(&mut self, step: u32, message: &Message, usage: Usage, finish: &FinishReason) {
        let _ = (step, message, usage, finish);
    }
}

/// A log that keeps nothing (tests, one-off runs).
#[derive(Debug, Default)]
pub struct DiscardLog;

#[async_trait::async_trait]
impl TurnLog for DiscardLog {
    async fn append(&mut self, _: &Message) -> Result<(), quiver_store::StoreError> {
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

/// One model request of a turn: what it offers and which step it is.
struct Ask<'a> {
    tools: &'a [Value],
    allow_tools: bool,
    /// The request's number in the turn, 1-based.
    step: u32,
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
        log.append(&user).await?;
        // Where this turn starts: history is only ever cut before it.
        let turn_start = history.len();
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
        let mut last_assembly = None;
        while outcome.steps < self.config.max_steps {
            outcome.steps += 1;
            // Stateless: the tools are what the registry holds right now.
            let assembly =
                session.assemble(&self.assembler, &self.registry.snapshot(), context_tokens);
            let completion = self
                .ask(
                    model,
                    context_tokens,
                    history,
                    turn_start,
                    Ask {
                        tools: assembly.tools(),
                        allow_tools: true,
                        step: outcome.steps,
                    },
                    &mut *log,
                )
                .await?;
            outcome.usage.add(completion.usage);
            let Completion {
                message,
                finish,
                usage,
            } = completion;
            let calls = message.tool_calls.clone();
            log.append(&message).await?;
            log.message_done(outcome.steps, &message, usage, &finish);
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
                if let Some((_, note)) = &ending {
                    // The turn is ending: the rest of this batch is answered,
                    // not run (a `run_command` after the limit stays unrun).
                    let content = json!({
                        "error": "not_run",
                        "message": format!("Not run: {note}"),
                    });
                    outcome.tool_calls.push(TurnToolCall {
                        called: call.name.clone(),
                        tool: call.name.clone(),
                        ok: false,
                    });
                    let result = Message::tool_result(&call.id, &call.name, content.to_string());
                    log.append(&result).await?;
                    history.push(result);
                    continue;
                }
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
                log.append(&result).await?;
                history.push(result);
            }
            last_assembly = Some(assembly);
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
        log.append(&closing).await?;
        history.push(closing);
        outcome.steps += 1;
        // The tools go along, refused by `allow_tools: false`: a history
        // holding tool calls and results is only accepted (Anthropic) with
        // the tools it used defined.
        let tools = last_assembly.as_ref().map_or(&[][..], |a| a.tools());
        let completion = self
            .ask(
                model,
                context_tokens,
                history,
                turn_start,
                Ask {
                    tools,
                    allow_tools: false,
                    step: outcome.steps,
                },
                &mut *log,
            )
            .await?;
        outcome.usage.add(completion.usage);
        // A server may ignore "no tools"; its calls are not run.
        let answer = Message::assistant(completion.message.content, Vec::new());
        log.append(&answer).await?;
        log.message_done(outcome.steps, &answer, completion.usage, &completion.finish);
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
        turn_start: usize,
        ask: Ask<'_>,
        log: &mut dyn TurnLog,
    ) -> Result<Completion, ModelError> {
        let Ask {
            tools,
            allow_tools,
            step,
        } = ask;
        let tools_tokens = tokens::count(&Value::from(tools.to_vec()).to_string());
        let reserved =
            tools_tokens + tokens::count(&self.config.system_prompt) + context_tokens / 8; // room for the answer
        let window = fit_history(history, turn_start, context_tokens.saturating_sub(reserved));
        let window = answer_unanswered_calls(window);
        let mut on_delta = |delta: StreamDelta<'_>| log.delta(step, delta);
        model
            .complete_streaming(
                CompletionRequest {
                    system: &self.config.system_prompt,
                    messages: &window,
                    tools,
                    max_output_tokens: 0,
                    allow_tools,
                },
                &mut on_delta,
            )
            .await
    }

    /// Runs one tool call; returns the result text for the model, the real
    /// tool's name and whether it succeeded.
    async fn call_tool(
        &self,
        session: &Arc<Session>,
        assembly: &quiver_catalog::assembly::Assembly,
        name: &str,
        arguments: &str,
    ) -> (String, String, bool) {
        let arguments = match parse_arguments(arguments) {
            Ok(arguments) => arguments,
            Err(message) => {
                session
                    .record(Event::new(session, name, Status::Error).detail(Some(message.clone())));
                let error = json!({
                    "error": "invalid_arguments_json",
                    "message": format!("the arguments of `{name}` are not valid JSON: {message}"),
                });
                return (error.to_string(), name.to_owned(), false);
            }
        };
        let tool = quiver_dispatch::called_tool(assembly, name, &arguments).to_owned();
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

/// The most recent part of `history` that fits in `budget` tokens, cut
/// only where a user message at or before `turn_start` begins (so no tool
/// result loses its call, and the current turn, its closing note included,
/// is never cut). When the current turn alone is over the budget, the
/// contents of its older tool results are replaced by a short note, oldest
/// first, the last step's results kept, so a long turn still fits.
pub fn fit_history(history: &[Message], turn_start: usize, budget: u64) -> Cow<'_, [Message]> {
    let turn_start = turn_start.min(history.len());
    let turn = history.get(turn_start..).unwrap_or_default();
    let turn_tokens: u64 = turn.iter().map(message_tokens).sum();
    let mut used = turn_tokens;
    let mut cut = turn_start;
    for (index, message) in history.iter().enumerate().take(turn_start).rev() {
        used += message_tokens(message);
        if used > budget {
            break;
        }
        if message.role == Role::User {
            cut = index;
        }
    }
    let window = history.get(cut..).unwrap_or_default();
    if turn_tokens <= budget {
        return Cow::Borrowed(window);
    }
    // Only the turn is sent; its older results give way.
    let mut messages = turn.to_vec();
    let last_step = messages
        .iter()
        .rposition(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
        .unwrap_or(messages.len());
    let mut over = turn_tokens - budget;
    for message in messages.iter_mut().take(last_step) {
        if over == 0 {
            break;
        }
        if message.role != Role::Tool || message.content == DROPPED_RESULT {
            continue;
        }
        let before = message_tokens(message);
        message.content = DROPPED_RESULT.to_owned();
        over = over.saturating_sub(before.saturating_sub(message_tokens(message)));
    }
    Cow::Owned(messages)
}

/// What an older tool result of a turn too long for the context says
/// instead of its content.
pub const DROPPED_RESULT: &str =
    "[quiver: this result was dropped to fit the context; call the tool again if you need it]";

/// The messages with a result after every tool call that has none (a turn
/// interrupted between a call and its result: a crash, a stopped daemon,
/// an abandoned chat), since model APIs refuse a call left unanswered. The
/// stored history is left as it happened.
pub fn answer_unanswered_calls(messages: Cow<'_, [Message]>) -> Cow<'_, [Message]> {
    if (0..messages.len()).all(|at| unanswered(&messages, at).is_empty()) {
        return messages;
    }
    let mut repaired = Vec::with_capacity(messages.len() + 1);
    let mut at = 0;
    while let Some(message) = messages.get(at) {
        let answered = results_after(&messages, at);
        repaired.push(message.clone());
        repaired.extend_from_slice(answered);
        for call in unanswered(&messages, at) {
            let content = json!({
                "error": "interrupted",
                "message": format!("`{}` did not finish: the turn was interrupted before its result", call.name),
            });
            repaired.push(Message::tool_result(
                &call.id,
                &call.name,
                content.to_string(),
            ));
        }
        at += 1 + answered.len();
    }
    Cow::Owned(repaired)
}

/// The tool results right after the message at `at`.
fn results_after(messages: &[Message], at: usize) -> &[Message] {
    let rest = messages.get(at + 1..).unwrap_or_default();
    let count = rest.iter().take_while(|m| m.role == Role::Tool).count();
    rest.get(..count).unwrap_or_default()
}

/// The calls of the message at `at` that no result right after it answers.
fn unanswered(messages: &[Message], at: usize) -> Vec<&ToolCall> {
    let Some(message) = messages.get(at) else {
        return Vec::new();
    };
    let results = results_after(messages, at);
    message
        .tool_calls
        .iter()
        .filter(|call| {
            !results
                .iter()
                .any(|r| r.tool_call_id.as_deref() == Some(call.id.as_str()))
        })
        .collect()
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
    use quiver_model::ToolCall;

    fn call(id: &str) -> Message {
        Message::assistant(
            "",
            vec![ToolCall {
                id: id.into(),
                name: "tool_search".into(),
                arguments: "{}".into(),
            }],
        )
    }

    #[test]
    fn history_is_cut_at_user_messages_before_the_turn_only() {
        let long = "x".repeat(400); // 100 tokens
        let history = vec![
            Message::user(&long),
            call("1"),
            Message::tool_result("1", "tool_search", &long),
            Message::assistant(&long, Vec::new()),
            Message::user("second"),
            Message::assistant("answer", Vec::new()),
            Message::user("third"),
            Message::user("[quiver] Step limit reached"),
        ];
        assert_eq!(fit_history(&history, 6, 10_000).len(), 8);
        // Too small for the first exchange: it goes whole, never half.
        let fitted = fit_history(&history, 6, 50);
        assert_eq!(fitted.len(), 4);
        assert_eq!(fitted[0].content, "second");
        // The closing note is no cut point: the turn's question stays.
        let fitted = fit_history(&history, 6, 0);
        assert_eq!(fitted.len(), 2);
        assert_eq!(fitted[0].content, "third");
    }

    #[test]
    fn a_turn_over_the_budget_drops_its_older_results_first() {
        let long = "x".repeat(4000); // 1000 tokens
        let history = vec![
            Message::user("old question"),
            Message::assistant("old answer", Vec::new()),
            Message::user("question"),
            call("1"),
            Message::tool_result("1", "tool_search", &long),
            call("2"),
            Message::tool_result("2", "tool_search", &long),
        ];
        let fitted = fit_history(&history, 2, 1500);
        assert_eq!(fitted.len(), 5, "only the turn");
        assert_eq!(fitted[0].content, "question");
        assert_eq!(fitted[2].content, DROPPED_RESULT);
        // The last step's result is what the model must see.
        assert_eq!(fitted[4].content, long);
        assert_eq!(fitted[4].tool_call_id.as_deref(), Some("2"));
    }

    #[test]
    fn unanswered_calls_get_an_interrupted_result_in_place() {
        let two_calls = Message::assistant(
            "",
            vec![
                ToolCall {
                    id: "a".into(),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                },
                ToolCall {
                    id: "b".into(),
                    name: "run_command".into(),
                    arguments: "{}".into(),
                },
            ],
        );
        let history = vec![
            Message::user("q"),
            two_calls,
            Message::tool_result("a", "read_file", "text"),
            // The turn stopped here; a later turn's question follows.
            Message::user("again"),
        ];
        let repaired = answer_unanswered_calls(Cow::Borrowed(&history));
        let shape: Vec<(Role, Option<&str>)> = repaired
            .iter()
            .map(|m| (m.role, m.tool_call_id.as_deref()))
            .collect();
        assert_eq!(
            shape,
            [
                (Role::User, None),
                (Role::Assistant, None),
                (Role::Tool, Some("a")),
                (Role::Tool, Some("b")),
                (Role::User, None),
            ]
        );
        assert!(
            repaired[3].content.contains("interrupted"),
            "{}",
            repaired[3].content
        );
        // A whole history is passed through as it is.
        let whole = &history[..1];
        assert!(matches!(
            answer_unanswered_calls(Cow::Borrowed(whole)),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn arguments_text_must_be_json() {
        assert_eq!(parse_arguments("").unwrap(), json!({}));
        assert_eq!(parse_arguments("{\"a\": 1}").unwrap(), json!({"a": 1}));
        let error = parse_arguments("{\"a\": ").unwrap_err();
        assert!(error.contains("line 1"), "{error}");
    }
}
