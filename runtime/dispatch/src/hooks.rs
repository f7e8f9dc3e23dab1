//! Pre-call and post-call hooks, registered by tool-name glob and matched
//! against the real tool's name exactly as registered (case-sensitive).
//!
//! A pre-call hook may rewrite the arguments or refuse the call (the later
//! layers then never see it). A post-call hook sees the outcome and may
//! change it (a result transform).

use std::sync::Arc;
use std::task::{Context, Poll};

use globset::{Glob, GlobMatcher};
use tower::{Layer, Service};

use super::{BoxFuture, ChainService, DispatchCall, DispatchError, ToolOutput, ready_call};

/// A pre-call hook refused the call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{tool}` was not called: hook `{hook}` refused: {reason}")]
pub struct HookRefused {
    /// The tool.
    pub tool: String,
    /// The hook's name.
    pub hook: String,
    /// Why.
    pub reason: String,
}

/// Runs before the tool; `Err(reason)` refuses the call.
pub trait PreHook: Send + Sync {
    /// A name for errors and logs.
    fn name(&self) -> &str;
    /// Inspects (and may rewrite) the call.
    fn before(&self, call: &mut DispatchCall) -> Result<(), String>;
}

/// Runs after the tool, on its outcome.
pub trait PostHook: Send + Sync {
    /// A name for logs.
    fn name(&self) -> &str;
    /// Inspects (and may change) the outcome.
    fn after(&self, call: &DispatchCall, outcome: &mut Result<ToolOutput, DispatchError>);
}

/// A glob that must match the whole exposed tool name, case-sensitively.
fn matcher(glob: &str) -> Result<GlobMatcher, globset::Error> {
    Ok(Glob::new(glob)?.compile_matcher())
}

/// The hooks of a chain, each for the tools whose name matches its glob.
#[derive(Default)]
pub struct Hooks {
    pre: Vec<(GlobMatcher, Arc<dyn PreHook>)>,
    post: Vec<(GlobMatcher, Arc<dyn PostHook>)>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("pre", &self.pre.len())
            .field("post", &self.post.len())
            .finish()
    }
}

impl Hooks {
    /// No hooks.
    pub fn new() -> Hooks {
        Hooks::default()
    }

    /// Adds a pre-call hook for tools matching `glob` (run in order added).
    pub fn pre(mut self, glob: &str, hook: Arc<dyn PreHook>) -> Result<Hooks, globset::Error> {
        self.pre.push((matcher(glob)?, hook));
        Ok(self)
    }

    /// Adds a post-call hook for tools matching `glob` (run in order added).
    pub fn post(mut self, glob: &str, hook: Arc<dyn PostHook>) -> Result<Hooks, globset::Error> {
        self.post.push((matcher(glob)?, hook));
        Ok(self)
    }

    /// Runs the matching pre-call hooks.
    pub fn run_pre(&self, call: &mut DispatchCall) -> Result<(), HookRefused> {
        for (glob, hook) in &self.pre {
            if glob.is_match(call.tool.name()) {
                hook.before(call).map_err(|reason| HookRefused {
                    tool: call.tool.name().to_owned(),
                    hook: hook.name().to_owned(),
                    reason,
                })?;
            }
        }
        Ok(())
    }

    /// Runs the matching post-call hooks.
    pub fn run_post(&self, call: &DispatchCall, outcome: &mut Result<ToolOutput, DispatchError>) {
        for (glob, hook) in &self.post {
            if glob.is_match(call.tool.name()) {
                hook.after(call, outcome);
            }
        }
    }

    fn has_post(&self) -> bool {
        !self.post.is_empty()
    }
}

/// Adds [`PreHooks`] around a service.
#[derive(Debug, Clone)]
pub struct PreHooksLayer {
    hooks: Arc<Hooks>,
}

impl PreHooksLayer {
    /// Runs `hooks`' pre-call hooks.
    pub fn new(hooks: Arc<Hooks>) -> PreHooksLayer {
        PreHooksLayer { hooks }
    }
}

impl<S> Layer<S> for PreHooksLayer {
    type Service = PreHooks<S>;
    fn layer(&self, inner: S) -> PreHooks<S> {
        PreHooks {
            hooks: self.hooks.clone(),
            inner,
        }
    }
}

/// Runs the pre-call hooks, then the inner service unless one refused.
#[derive(Debug, Clone)]
pub struct PreHooks<S> {
    hooks: Arc<Hooks>,
    inner: S,
}

impl<S: ChainService> Service<DispatchCall> for PreHooks<S> {
    type Response = ToolOutput;
    type Error = DispatchError;
    type Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), DispatchError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut call: DispatchCall) -> Self::Future {
        if let Err(refused) = self.hooks.run_pre(&mut call) {
            return Box::pin(std::future::ready(Err(refused.into())));
        }
        self.inner.call(call)
    }
}

/// Adds [`PostHooks`] around a service.
#[derive(Debug, Clone)]
pub struct PostHooksLayer {
    hooks: Arc<Hooks>,
}

impl PostHooksLayer {
    /// Runs `hooks`' post-call hooks.
    pub fn new(hooks: Arc<Hooks>) -> PostHooksLayer {
        PostHooksLayer { hooks }
    }
}

impl<S> Layer<S> for PostHooksLayer {
    type Service = PostHooks<S>;
    fn layer(&self, inner: S) -> PostHooks<S> {
        PostHooks {
            hooks: self.hooks.clone(),
            inner,
        }
    }
}

/// Runs the inner service, then the post-call hooks on its outcome.
#[derive(Debug, Clone)]
pub struct PostHooks<S> {
    hooks: Arc<Hooks>,
    inner: S,
}

impl<S: ChainService> Service<DispatchCall> for PostHooks<S> {
    type Response = ToolOutput;
    type Error = DispatchError;
    type Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), DispatchError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: DispatchCall) -> Self::Future {
        if !self.hooks.has_post() {
            return self.inner.call(call);
        }
        let hooks = self.hooks.clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            let kept = call.clone();
            let mut outcome = ready_call(inner, call).await;
            hooks.run_post(&kept, &mut outcome);
            outcome
        })
    }
}
