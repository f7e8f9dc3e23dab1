//! Sessions: a session holds its [`Scope`], its approvals "for this
//! session" and its event stream. A subagent session gets a subset of its
//! parent's grant; asking for more is an error, and at run time its scope
//! is also narrowed to the parent's, so a tool that appears later in a
//! toolset the parent lacks stays out of reach.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::broadcast;

use super::feed::{ActivityFeed, Event};
use quiver_catalog::assembly::{Assembler, Assembly};
use quiver_tool::registry::RegistrySnapshot;
use quiver_tool::scope::Scope;
use quiver_tool::tool::ToolSource;

/// A session that cannot be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// A subagent asked for more than its parent has.
    #[error("subagent `{child}` asks for `{grant}`, which session `{parent}` was not granted")]
    BeyondParent {
        /// The subagent's id.
        child: String,
        /// The parent's id.
        parent: String,
        /// The grant asked for.
        grant: String,
    },
}

/// One conversation (or subagent) and what it may see and call.
#[derive(Debug)]
pub struct Session {
    id: String,
    parent: Option<String>,
    scope: Scope,
    feed: Arc<ActivityFeed>,
    /// Made when someone subscribes and dropped when the last receiver is
    /// gone: an unwatched session holds no event buffer.
    events: Mutex<Option<broadcast::Sender<Arc<Event>>>>,
    approved_tools: Mutex<HashSet<String>>,
    /// Whether `tool_search` or `tool_describe` ran in this session (in
    /// this process): a deferred tool called before is a guess, which the
    /// metrics count.
    searched: std::sync::atomic::AtomicBool,
    /// The servers and plugins whose deferred tools this session has
    /// called (in this process): the listing describes them first.
    used: Mutex<BTreeSet<ToolSource>>,
    /// Sees every event as it is recorded (see [`Session::set_observer`]).
    observer: Mutex<Option<EventObserver>>,
}

/// A function called with each event of a session as it is recorded, in
/// the task that records it.
#[derive(Clone)]
pub struct EventObserver(pub Arc<ObserveFn>);

/// What an [`EventObserver`] calls.
pub type ObserveFn = dyn Fn(&Arc<Event>) + Send + Sync;

impl std::fmt::Debug for EventObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventObserver")
    }
}

impl Session {
    /// A top-level session with `scope`, publishing into `feed`.
    pub fn new(id: impl Into<String>, scope: Scope, feed: Arc<ActivityFeed>) -> Arc<Session> {
        Arc::new(Session {
            id: id.into(),
            parent: None,
            scope,
            feed,
            events: Mutex::new(None),
            approved_tools: Mutex::new(HashSet::new()),
            searched: std::sync::atomic::AtomicBool::new(false),
            used: Mutex::new(BTreeSet::new()),
            observer: Mutex::new(None),
        })
    }

    /// A subagent session granted `scope`, which must be within this
    /// session's grant: each grant must be matched by one of the parent's
    /// grants, or name a tool of `snapshot` that the parent may call; and
    /// no tool of `snapshot` may be granted to the child but not the parent.
    pub fn subagent(
        self: &Arc<Session>,
        id: impl Into<String>,
        scope: Scope,
        snapshot: &RegistrySnapshot,
    ) -> Result<Arc<Session>, SessionError> {
        let id = id.into();
        let beyond = |grant: &str| SessionError::BeyondParent {
            child: id.clone(),
            parent: self.id.clone(),
            grant: grant.to_owned(),
        };
        for grant in scope.grants() {
            let literal = self.scope.grants_text(grant);
            let named_tool = snapshot.get(grant).is_some_and(|t| self.scope.allows(t));
            if !literal && !named_tool {
                return Err(beyond(grant));
            }
        }
        if let Some(tool) = snapshot
            .tools()
            .find(|t| scope.allows(t) && !self.scope.allows(t))
        {
            return Err(beyond(tool.name()));
        }
        Ok(self.restored_subagent(id, scope))
    }

    /// A subagent session granted `scope` that was checked by
    /// [`Session::subagent`] when it was made (rebuilt from storage, say).
    /// It is not checked again: the registry may differ now (an MCP server
    /// still connecting), and a check against it would refuse a grant that
    /// was valid. Its scope is still narrowed to this session's, so it
    /// never reaches beyond it.
    pub fn restored_subagent(
        self: &Arc<Session>,
        id: impl Into<String>,
        scope: Scope,
    ) -> Arc<Session> {
        Arc::new(Session {
            id: id.into(),
            parent: Some(self.id.clone()),
            scope: scope.narrowed_to(&self.scope),
            feed: self.feed.clone(),
            events: Mutex::new(None),
            approved_tools: Mutex::new(HashSet::new()),
            searched: std::sync::atomic::AtomicBool::new(false),
            used: Mutex::new(BTreeSet::new()),
            observer: Mutex::new(None),
        })
    }

    /// Notes that the session searched or described the deferred tools.
    pub fn note_search(&self) {
        self.searched
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the session ever searched or described the deferred tools.
    pub fn has_searched(&self) -> bool {
        self.searched.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Notes that the session called a deferred tool of `source`.
    pub fn note_used(&self, source: &ToolSource) {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        if !used.contains(source) {
            used.insert(source.clone());
        }
    }

    /// The servers and plugins whose deferred tools the session has
    /// called, sorted.
    pub fn used_sources(&self) -> Vec<ToolSource> {
        let used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        used.iter().cloned().collect()
    }

    /// The id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The parent session's id, for a subagent.
    pub fn parent(&self) -> Option<&str> {
        self.parent.as_deref()
    }

    /// What this session may see and call.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The process-wide feed this session publishes into.
    pub fn feed(&self) -> &ActivityFeed {
        &self.feed
    }

    /// Whether nothing of this session lives only in memory: no one is
    /// watching its events and no tool was approved for the session, so it
    /// can be dropped and rebuilt from the store without losing anything.
    pub fn is_idle(&self) -> bool {
        let watched = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|tx| tx.receiver_count() > 0);
        let approved = !self
            .approved_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty();
        !watched && !approved
    }

    /// This session's events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        events
            .get_or_insert_with(|| broadcast::channel(self.feed.capacity()).0)
            .subscribe()
    }

    /// Has `observer` called with each event of this session from now on,
    /// synchronously as it is recorded (`None`: no observer). Whoever
    /// streams a turn (the daemon) mixes the events with the turn's other
    /// output this way in the order they happened, which two channels read
    /// side by side could not promise.
    pub fn set_observer(&self, observer: Option<EventObserver>) {
        *self.observer.lock().unwrap_or_else(PoisonError::into_inner) = observer;
    }

    /// Publishes an event to this session's stream and the process feed.
    pub fn record(&self, event: Event) {
        let event = Arc::new(event);
        let observer = self
            .observer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(EventObserver(observe)) = observer {
            observe(&event);
        }
        // No receiver is not an error: nobody is watching.
        {
            let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
            if events.as_ref().is_some_and(|tx| tx.receiver_count() == 0) {
                *events = None;
            }
            if let Some(tx) = events.as_ref() {
                // A receiver may go between the check and the send: not an error.
                let _ = tx.send(event.clone());
            }
        }
        self.feed.publish(event);
    }

    /// This turn's view for this session: assembled under its scope, the
    /// listing describing the servers it has called first.
    pub fn assemble(
        &self,
        assembler: &Assembler,
        snapshot: &Arc<RegistrySnapshot>,
        context_tokens: u64,
    ) -> Assembly {
        let used = self.used_sources();
        assembler.assemble_preferring(snapshot, &self.scope, context_tokens, &used)
    }

    /// Approves `tool` for the rest of this session (any arguments).
    pub fn approve_for_session(&self, tool: &str) {
        self.approved_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tool.to_owned());
    }

    /// Whether `tool` was approved for this session.
    pub fn is_approved_for_session(&self, tool: &str) -> bool {
        self.approved_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_tool::registry::ToolRegistry;
    use quiver_tool::tool::{ToolSource, ToolSpec};
    use serde_json::json;

    #[test]
    fn subagents_get_at_most_their_parents_grant() {
        let registry = ToolRegistry::new();
        let spec = |n: &str| ToolSpec::new(n, "", json!({"type": "object"}));
        registry.set_source_tools(ToolSource::Mcp("github".into()), vec![spec("a")]);
        registry.set_source_tools(ToolSource::Mcp("gitlab".into()), vec![spec("b")]);
        let snapshot = registry.snapshot();
        let feed = Arc::new(ActivityFeed::default());
        let parent = Session::new("p", Scope::new(["mcp-github"]).unwrap(), feed);
        let child = parent
            .subagent("c", Scope::new(["mcp_github_a"]).unwrap(), &snapshot)
            .unwrap();
        assert_eq!(child.parent(), Some("p"));
        for grant in ["mcp-*", "mcp-gitlab", "*", "mcp_gitlab_b", "mcp-other"] {
            assert!(
                parent
                    .subagent("c", Scope::new([grant]).unwrap(), &snapshot)
                    .is_err(),
                "{grant}"
            );
        }
    }
}
