//! Dispatch: every tool call, direct or through `tool_call`, runs one chain
//! of small composable layers, keyed on the real tool.
//!
//! ```text
//! model call ──► Dispatcher::dispatch ──► unwrap tool_call (bridge::resolve)
//!                      │                     │ scope check (session)
//!                      │ tool_search /        ▼
//!                      │ tool_describe   pre-call hooks ─► guardrails ─► approval
//!                      │ (no tool hooks)      ─► argument validation ─► post-call hooks
//!                      ▼                      ─► result cap ─► execute (timeout)
//!                 activity feed ◄──────────── status, duration, redacted arguments
//! ```
//!
//! Each layer is its own module with the same shape: a `tower::Layer` that
//! wraps an inner service, the `tower::Service` it produces, and the error
//! it adds. The standard chain is composed with `tower::ServiceBuilder` in
//! [`standard_chain`]; any other composition of the same layers (or of new
//! ones) works the same way through [`Chain::new`].
//!
//! `tool_call` is unwrapped before the chain, so every layer sees the real
//! tool name (exactly as registered) and its arguments, and `via_bridge`.
//! Before the chain, [`Dispatcher::run`] coerces the arguments to the
//! tool's declared types where the schema leaves one reading ([`coerce`];
//! off with `guardrails.coerce_arguments: false`), so every layer also
//! sees the arguments the tool will get.

pub mod approval;
pub mod coerce;
pub mod execute;
pub mod feed;
pub mod guardrail;
pub mod hooks;
pub mod session;
pub mod settings;
pub mod transform;
pub mod validate;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tower::{Service, ServiceBuilder};

use quiver_catalog::assembly::Assembly;
use quiver_catalog::bridge::{self, BridgeError, TOOL_CALL, TOOL_DESCRIBE, TOOL_SEARCH};
use quiver_tool::tool::Tool;

pub use approval::{ApprovalError, ApprovalLayer, ApprovalPolicy, Approver, Decision};
pub use execute::{ExecuteError, ExecuteService};
pub use feed::{ActivityFeed, Event, Status};
pub use guardrail::{GuardrailDenied, GuardrailLayer, Guardrails};
pub use hooks::{HookRefused, Hooks, PostHooksLayer, PreHooksLayer};
pub use quiver_tool::executor::{
    BoxFuture, CoreTools, Executors, ResolvedCall, ToolError, ToolExecutor,
};
pub use session::{EventObserver, Session, SessionError};
pub use transform::{ResultCapLayer, cut_result};
pub use validate::{InvalidArguments, OutputValidationLayer, ValidationLayer};

/// One call of a real tool, as every layer of the chain sees it.
#[derive(Debug, Clone)]
pub struct DispatchCall {
    /// Unique within the process; ties the feed's events of one call together.
    pub id: u64,
    /// The calling session.
    pub session: Arc<Session>,
    /// The real tool, as registered.
    pub tool: Arc<Tool>,
    /// Its arguments: always a JSON object.
    pub arguments: Value,
    /// Whether the model reached the tool through `tool_call`.
    pub via_bridge: bool,
    /// When the call entered the dispatcher.
    pub started: Instant,
}

impl DispatchCall {
    /// A call of a resolved tool in `session`.
    pub fn new(session: Arc<Session>, resolved: ResolvedCall) -> DispatchCall {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        DispatchCall {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            session,
            tool: resolved.tool,
            arguments: Value::Object(resolved.arguments),
            via_bridge: resolved.via_bridge,
            started: Instant::now(),
        }
    }

    /// The real tool's exposed name.
    pub fn tool_name(&self) -> &str {
        self.tool.name()
    }

    /// Records an event of this call (arguments redacted) in its session's feed.
    pub fn record(&self, status: Status, detail: Option<String>) {
        self.session.record(self.event(status, detail));
    }

    /// Records the call's success with what the tool answered (redacted
    /// and cut like the feed's arguments).
    pub fn record_result(&self, detail: Option<String>, result: &Value) {
        let event = self.event(Status::Ok, detail).result(&self.session, result);
        self.session.record(event);
    }

    fn event(&self, status: Status, detail: Option<String>) -> Event {
        Event::new(&self.session, self.tool.name(), status)
            .call(self.id, self.via_bridge)
            .arguments(&self.session, &self.arguments)
            .duration(self.started.elapsed())
            .detail(detail)
    }
}

/// What a tool produced, after the chain's transforms.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The result for the model.
    pub content: Value,
    /// Whether the result cap cut it.
    pub truncated: bool,
}

impl ToolOutput {
    /// An uncut result.
    pub fn new(content: Value) -> ToolOutput {
        ToolOutput {
            content,
            truncated: false,
        }
    }
}

/// Why a call produced no result. Each layer adds its own variant.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DispatchError {
    /// The call could not be resolved to a tool of this session (unknown,
    /// not granted, bad arguments JSON, a bridge tool named, ...).
    #[error(transparent)]
    Resolve(#[from] BridgeError),
    /// A pre-call hook refused the call.
    #[error(transparent)]
    Hook(#[from] HookRefused),
    /// A guardrail rule denied the call.
    #[error(transparent)]
    Guardrail(#[from] GuardrailDenied),
    /// Approval was denied or timed out.
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    /// The arguments do not match the tool's schema.
    #[error(transparent)]
    InvalidArguments(#[from] InvalidArguments),
    /// The tool ran and failed, or timed out.
    #[error(transparent)]
    Execute(#[from] ExecuteError),
}

impl DispatchError {
    /// A short stable code for the error kind (a tool's own code for a
    /// failed execution).
    pub fn code(&self) -> &str {
        match self {
            DispatchError::Resolve(e) => e.code(),
            DispatchError::Hook(_) => "refused_by_hook",
            DispatchError::Guardrail(_) => "denied_by_guardrail",
            DispatchError::Approval(e) => e.code(),
            DispatchError::InvalidArguments(_) => "invalid_arguments",
            DispatchError::Execute(e) => e.code(),
        }
    }

    /// The feed status this error gives.
    pub fn status(&self) -> Status {
        match self {
            DispatchError::Hook(_) | DispatchError::Guardrail(_) | DispatchError::Approval(_) => {
                Status::Denied
            }
            DispatchError::Execute(e) if e.is_timeout() => Status::TimedOut,
            DispatchError::Resolve(_)
            | DispatchError::InvalidArguments(_)
            | DispatchError::Execute(_) => Status::Error,
        }
    }

    /// The error as the JSON tool result the model receives.
    pub fn to_json(&self) -> Value {
        match self {
            DispatchError::Resolve(e) => e.to_json(),
            DispatchError::InvalidArguments(e) => e.to_json(),
            DispatchError::Execute(e) => e.to_json(),
            other => json!({"error": other.code(), "message": other.to_string()}),
        }
    }
}

/// What the chain's services are: a [`DispatchCall`] in, a [`ToolOutput`]
/// or a [`DispatchError`] out, always ready, cloneable, `Send`.
pub trait ChainService:
    Service<
        DispatchCall,
        Response = ToolOutput,
        Error = DispatchError,
        Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> ChainService for S where
    S: Service<
            DispatchCall,
            Response = ToolOutput,
            Error = DispatchError,
            Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// Waits until `service` is ready, then calls it (tower's contract).
pub async fn ready_call<S: ChainService>(
    mut service: S,
    call: DispatchCall,
) -> Result<ToolOutput, DispatchError> {
    std::future::poll_fn(|cx| Service::poll_ready(&mut service, cx)).await?;
    // Fully qualified: `ErasedChain::call` (on `&self`) would win otherwise.
    Service::call(&mut service, call).await
}

trait ErasedChain: Send + Sync {
    fn call(&self, call: DispatchCall) -> BoxFuture<'static, Result<ToolOutput, DispatchError>>;
}

impl<S: ChainService> ErasedChain for S {
    fn call(&self, call: DispatchCall) -> BoxFuture<'static, Result<ToolOutput, DispatchError>> {
        Box::pin(ready_call(self.clone(), call))
    }
}

/// A composed chain, type-erased so that a [`Dispatcher`] can hold any
/// composition. Cheap to clone; shared by every session.
#[derive(Clone)]
pub struct Chain {
    inner: Arc<dyn ErasedChain>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain").finish_non_exhaustive()
    }
}

impl Chain {
    /// Wraps any composed service (e.g. from a `tower::ServiceBuilder`).
    pub fn new<S: ChainService>(service: S) -> Chain {
        Chain {
            inner: Arc::new(service),
        }
    }

    /// Runs one call through the chain.
    pub fn call(
        &self,
        call: DispatchCall,
    ) -> BoxFuture<'static, Result<ToolOutput, DispatchError>> {
        self.inner.call(call)
    }
}

impl Service<DispatchCall> for Chain {
    type Response = ToolOutput;
    type Error = DispatchError;
    type Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), DispatchError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: DispatchCall) -> Self::Future {
        self.inner.call(call)
    }
}

/// The parts of the standard chain.
#[derive(Clone)]
pub struct ChainParts {
    /// Pre- and post-call hooks, by tool-name glob.
    pub hooks: Arc<Hooks>,
    /// Guardrail rules.
    pub guardrails: Arc<Guardrails>,
    /// Which tools need approval, and for how long to wait.
    pub approval: Arc<ApprovalPolicy>,
    /// Who approves.
    pub approver: Arc<dyn Approver>,
    /// Results longer than this (characters of JSON text) are cut.
    pub max_result_chars: usize,
    /// Longest a tool may run.
    pub call_timeout: Duration,
    /// Runs the real tool.
    pub executor: Arc<dyn ToolExecutor>,
}

impl ChainParts {
    /// The parts as the `guardrails` and `approval` settings set them: the
    /// guardrail rules, result cap and call timeout, the approval policy
    /// (with `also_require`, the globs other sections add, such as
    /// `run_command` when `core_tools.run_command.require_approval` is set),
    /// and `approver` behind the `approval.auto_approve` globs. No hooks
    /// (they are registered in code).
    pub fn from_settings(
        guardrails: &settings::GuardrailsConfig,
        approval: &settings::ApprovalConfig,
        also_require: Vec<String>,
        approver: Arc<dyn Approver>,
        executor: Arc<dyn ToolExecutor>,
    ) -> Result<ChainParts, globset::Error> {
        let approver: Arc<dyn Approver> = if approval.auto_approve.is_empty() {
            approver
        } else {
            Arc::new(approval::rules::AutoApprove::new(
                &approval.auto_approve,
                approver,
            )?)
        };
        let mut approval = approval.clone();
        approval.require.extend(also_require);
        Ok(ChainParts {
            hooks: Arc::new(Hooks::new()),
            guardrails: Arc::new(guardrails.guardrails()),
            approval: Arc::new(approval.policy()?),
            approver,
            max_result_chars: guardrails.max_result_chars,
            call_timeout: Duration::from_millis(guardrails.call_timeout_ms),
            executor,
        })
    }
}

/// The standard chain, outermost first: pre-call hooks, guardrails,
/// approval, argument validation, post-call hooks, result cap, output
/// schema check, execution with timeout.
pub fn standard_chain(parts: ChainParts) -> Chain {
    let service = ServiceBuilder::new()
        .layer(PreHooksLayer::new(parts.hooks.clone()))
        .layer(GuardrailLayer::new(parts.guardrails))
        .layer(ApprovalLayer::new(parts.approval, parts.approver))
        .layer(ValidationLayer::new())
        .layer(PostHooksLayer::new(parts.hooks))
        .layer(ResultCapLayer::new(parts.max_result_chars))
        .layer(OutputValidationLayer::new())
        .service(ExecuteService::new(parts.executor, parts.call_timeout));
    Chain::new(service)
}

/// The tool a call of `name` with `arguments` is for, as the feed and the
/// turn's log name it: the real tool `tool_call` asks for (its `name`
/// argument, when there is a bridge), else `name` itself. This is the
/// dispatcher's own unwrapping; callers that report on calls use it rather
/// than unwrapping `tool_call` again.
pub fn called_tool<'a>(assembly: &Assembly, name: &'a str, arguments: &'a Value) -> &'a str {
    if name == TOOL_CALL && assembly.has_bridge() {
        arguments
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(TOOL_CALL)
    } else {
        name
    }
}

/// A call's final status as a metric label: `ok`, `error`, `denied`,
/// `timed_out`.
fn status_label(status: Status) -> &'static str {
    match status {
        Status::TimedOut => "timed_out",
        Status::AwaitingApproval => "awaiting_approval",
        other => other.label(),
    }
}

/// Counts a `tool_search` answer's queries and those that found nothing.
fn record_search(answer: Option<&Value>) {
    let Some(answer) = answer else {
        metrics::counter!("quiver_tool_search_queries_total").increment(1);
        return;
    };
    let results = answer
        .get("results")
        .and_then(Value::as_array)
        .map_or(std::slice::from_ref(answer), Vec::as_slice);
    for result in results {
        metrics::counter!("quiver_tool_search_queries_total").increment(1);
        let empty = result
            .get("matches")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if empty {
            metrics::counter!("quiver_tool_search_empty_results_total").increment(1);
        }
    }
}

/// The entry point for a session's tool calls: unwraps `tool_call`,
/// answers `tool_search` and `tool_describe`, checks the session's scope,
/// runs the chain and records everything in the session's feed.
#[derive(Clone)]
pub struct Dispatcher {
    chain: Chain,
    status: Option<Arc<dyn quiver_tool::status::McpStatusView>>,
    coerce: bool,
    max_bridge_chars: usize,
}

/// The bridge answers' size cap when none is set: the default
/// `guardrails.max_result_chars`.
pub const DEFAULT_BRIDGE_RESULT_CHARS: usize = 100_000;

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("chain", &self.chain)
            .field("status", &self.status.is_some())
            .field("coerce", &self.coerce)
            .field("max_bridge_chars", &self.max_bridge_chars)
            .finish()
    }
}

impl Dispatcher {
    /// A dispatcher running `chain`.
    pub fn new(chain: Chain) -> Dispatcher {
        Dispatcher {
            chain,
            status: None,
            coerce: true,
            max_bridge_chars: DEFAULT_BRIDGE_RESULT_CHARS,
        }
    }

    /// Whether arguments are coerced to their declared types before the
    /// chain (see [`coerce`]); on unless `guardrails.coerce_arguments` is
    /// off.
    pub fn with_coercion(mut self, enabled: bool) -> Dispatcher {
        self.coerce = enabled;
        self
    }

    /// The size cap of `tool_search` and `tool_describe` answers, in
    /// characters of compact JSON (`guardrails.max_result_chars`): they
    /// are bounded by leaving whole matches or tools out, never cut.
    pub fn with_max_bridge_result_chars(mut self, max_chars: usize) -> Dispatcher {
        self.max_bridge_chars = max_chars;
        self
    }

    /// Lets an empty `tool_search` result name the session's MCP servers
    /// that are still connecting, failing or disabled.
    pub fn with_mcp_status(
        mut self,
        status: Arc<dyn quiver_tool::status::McpStatusView>,
    ) -> Dispatcher {
        self.status = Some(status);
        self
    }

    /// What the model's `tool_search` (`name` [`TOOL_SEARCH`]) or
    /// `tool_describe` (any other name) answers with `arguments` in a
    /// session of `scope` against `assembly`, without recording the call:
    /// [`Dispatcher::dispatch`] answers through this, and the console's
    /// search box does too, so that it shows what the model would get.
    pub fn bridge_answer(
        &self,
        scope: &quiver_tool::scope::Scope,
        assembly: &Assembly,
        name: &str,
        arguments: &Value,
    ) -> Result<Value, BridgeError> {
        match name {
            TOOL_SEARCH => match &self.status {
                Some(status) => {
                    let scoped = quiver_tool::status::ScopedStatus::new(status.as_ref(), scope);
                    bridge::search_with_status(assembly, arguments, Some(&scoped))
                }
                None => bridge::search(assembly, arguments),
            }
            .map(|mut out| {
                bridge::fit_search(&mut out, self.max_bridge_chars);
                out
            }),
            _ => bridge::describe_within(assembly, arguments, self.max_bridge_chars),
        }
    }

    /// Handles the model's call of `name` with `arguments` in `session`,
    /// against `assembly` (this turn's view, built with
    /// [`Session::assemble`]). Returns the JSON result for the model: the
    /// tool's result, or `{"error", "message", ...}`.
    pub async fn dispatch(
        &self,
        session: &Arc<Session>,
        assembly: &Assembly,
        name: &str,
        arguments: &Value,
    ) -> Result<Value, DispatchError> {
        if assembly.has_bridge() && (name == TOOL_SEARCH || name == TOOL_DESCRIBE) {
            let started = Instant::now();
            let answer = self.bridge_answer(session.scope(), assembly, name, arguments);
            session.note_search();
            if name == TOOL_SEARCH {
                record_search(answer.as_ref().ok());
            }
            let (status, detail) = match &answer {
                Ok(_) => (Status::Ok, None),
                Err(e) => (Status::Error, Some(e.to_string())),
            };
            let event = Event::new(session, name, status)
                .arguments(session, arguments)
                .duration(started.elapsed())
                .detail(detail);
            session.record(match &answer {
                Ok(answer) => event.result(session, answer),
                Err(_) => event,
            });
            return answer.map_err(DispatchError::from);
        }
        let via_bridge = name == TOOL_CALL && assembly.has_bridge();
        let resolved = if via_bridge {
            bridge::call(assembly, arguments)
        } else {
            bridge::resolve(assembly, name, Some(arguments), false)
        };
        let resolved = resolved.map_err(|error| self.not_ready_yet(session, error));
        let resolved = resolved.and_then(|r| {
            if session.scope().allows(&r.tool) {
                Ok(r)
            } else {
                Err(BridgeError::NotAvailable {
                    name: r.tool.name().to_owned(),
                })
            }
        });
        match resolved {
            Ok(resolved) => {
                let deferred =
                    !assembly.catalog().is_eager(resolved.tool.name()) && assembly.has_bridge();
                if deferred && !session.has_searched() {
                    metrics::counter!(
                        "quiver_deferred_calls_without_search_total",
                        "source" => resolved.tool.source().kind()
                    )
                    .increment(1);
                }
                if deferred {
                    session.note_used(resolved.tool.source());
                }
                self.run(DispatchCall::new(session.clone(), resolved))
                    .await
                    .map(|output| output.content)
            }
            Err(error) => {
                metrics::counter!("quiver_tool_call_refusals_total", "code" => error.code())
                    .increment(1);
                session.record(
                    Event::new(
                        session,
                        called_tool(assembly, name, arguments),
                        Status::Error,
                    )
                    .call(0, via_bridge)
                    .detail(Some(error.to_string())),
                );
                Err(error.into())
            }
        }
    }

    /// An unknown name that belongs to a granted MCP server not connected
    /// yet (`mcp_SERVER_...`) is [`BridgeError::ServerConnecting`] naming
    /// it, not an unknown tool with suggestions from other servers.
    fn not_ready_yet(&self, session: &Session, error: BridgeError) -> BridgeError {
        let (BridgeError::UnknownTool { name, .. }, Some(status)) = (&error, &self.status) else {
            return error;
        };
        let scoped = quiver_tool::status::ScopedStatus::new(status.as_ref(), session.scope());
        let owner = quiver_tool::status::McpStatusView::servers(&scoped)
            .into_iter()
            .filter(|s| !s.state.is_ready())
            .filter(|s| name.starts_with(&format!("mcp_{}_", s.name)))
            .max_by_key(|s| s.name.len());
        match owner {
            Some(server) => BridgeError::ServerConnecting {
                name: name.clone(),
                server: server.name,
                state: server.state.describe(),
            },
            None => error,
        }
    }

    /// Runs an already resolved call through the chain and records its
    /// outcome in the session's feed.
    ///
    /// Unless coercion is off, the arguments are first coerced to the
    /// tool's declared types ([`coerce`]); what was coerced is added to
    /// the result for the model and to the feed event's detail.
    pub async fn run(&self, mut call: DispatchCall) -> Result<ToolOutput, DispatchError> {
        let coerced = if self.coerce {
            coerce::coerce(call.tool.input_schema().value(), &mut call.arguments)
        } else {
            Vec::new()
        };
        let note = (!coerced.is_empty()).then(|| coerce::describe(&coerced));
        let record = call.clone();
        let mut result = self.chain.call(call).await;
        let status = match &result {
            Ok(_) => Status::Ok,
            Err(error) => error.status(),
        };
        let tool = record.tool.name().to_owned();
        let source = record.tool.source().kind();
        metrics::counter!("quiver_tool_calls_total", "tool" => tool.clone(), "source" => source, "status" => status_label(status))
            .increment(1);
        metrics::histogram!("quiver_tool_call_duration_seconds", "tool" => tool, "source" => source)
            .record(record.started.elapsed().as_secs_f64());
        let detail = |base: Option<String>| match (base, &note) {
            (Some(base), Some(note)) => Some(format!("{base}; {note}")),
            (base, note) => base.or_else(|| note.clone()),
        };
        match &mut result {
            Ok(output) => {
                record.record_result(
                    detail(output.truncated.then(|| "result cut".to_owned())),
                    &output.content,
                );
                if let Some(note) = &note {
                    output.content = coerce::annotate(std::mem::take(&mut output.content), note);
                }
            }
            Err(error) => record.record(error.status(), detail(Some(error.to_string()))),
        }
        result
    }
}
