//! What each MCP server is doing, as `quiver status` prints it and as
//! `tool_search` names it when nothing matched ("server X is still
//! connecting"). The bridge reads it through [`McpStatusView`], so it does
//! not depend on how servers are run.

use serde::{Deserialize, Serialize};

use crate::scope::Scope;
use crate::tool::ToolSource;

/// One server's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ServerState {
    /// `enabled: false`: never started.
    Disabled,
    /// A connection attempt is running (attempt 1 is the first).
    Connecting {
        /// Attempts since the last successful connection, this one included.
        attempt: u32,
    },
    /// Connected; its tools are in the registry.
    Ready {
        /// Tools registered.
        tools: usize,
    },
    /// The last attempt failed or the connection dropped; waiting to retry.
    Failed {
        /// Why.
        error: String,
        /// Attempts since the last successful connection.
        attempt: u32,
        /// Pause before the next attempt, in milliseconds.
        retry_in_ms: u64,
    },
    /// An OAuth server without a usable token: not retried until a login
    /// (`quiver mcp login NAME`) writes one.
    NeedsLogin {
        /// The command that logs in, e.g. `quiver mcp login github`.
        command: String,
    },
    /// Shut down.
    Stopped,
}

impl ServerState {
    /// Whether the server is connected.
    pub fn is_ready(&self) -> bool {
        matches!(self, ServerState::Ready { .. })
    }

    /// `connecting`, `ready`, `failed`, `needs_login`, `disabled` or `stopped`.
    pub fn name(&self) -> &'static str {
        match self {
            ServerState::Disabled => "disabled",
            ServerState::Connecting { .. } => "connecting",
            ServerState::Ready { .. } => "ready",
            ServerState::Failed { .. } => "failed",
            ServerState::NeedsLogin { .. } => "needs_login",
            ServerState::Stopped => "stopped",
        }
    }

    /// The state as words, e.g. `still connecting` or `disabled`.
    pub fn describe(&self) -> String {
        match self {
            ServerState::Disabled => "disabled".into(),
            ServerState::Connecting { attempt } if *attempt <= 1 => "still connecting".into(),
            ServerState::Connecting { .. } => "reconnecting".into(),
            ServerState::Ready { tools } => format!("ready ({tools} tools)"),
            ServerState::Failed { error, .. } => {
                format!("failing to connect ({error}); retrying")
            }
            ServerState::NeedsLogin { command } => {
                format!("waiting for an OAuth login (run `{command}`)")
            }
            ServerState::Stopped => "stopped".into(),
        }
    }
}

/// A server and its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerStatus {
    /// The configured name.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// The state.
    #[serde(flatten)]
    pub state: ServerState,
    /// Times the connection dropped and was re-established or retried.
    pub reconnects: u32,
    /// Tools of its last listing held out of the catalog until an
    /// operator accepts them (see [`crate::integrity`]).
    pub quarantined: usize,
    /// For a server that signs in with OAuth: who is logged in and until
    /// when (never the tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthLogin>,
}

/// The OAuth login of a server, as status shows it: never a token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthLogin {
    /// Whether tokens are stored for the server.
    pub logged_in: bool,
    /// Who: the token's subject or username when the authorization server
    /// gives one, else the client id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// When the access token expires, in seconds since the Unix epoch
    /// (absent when the server did not say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Whether a refresh token is stored (the access token is renewed
    /// before it expires).
    pub refreshable: bool,
    /// The command that logs in again.
    pub login_command: String,
}

/// Anything that knows the servers' states.
pub trait McpStatusView: Send + Sync {
    /// Every configured server, sorted by name.
    fn servers(&self) -> Vec<ServerStatus>;
}

/// A view limited to the servers a session's scope grants (`mcp-NAME`), so
/// that no note names a server the session cannot use.
pub struct ScopedStatus<'a> {
    view: &'a dyn McpStatusView,
    scope: &'a Scope,
}

impl<'a> ScopedStatus<'a> {
    /// `view` limited to `scope`.
    pub fn new(view: &'a dyn McpStatusView, scope: &'a Scope) -> Self {
        ScopedStatus { view, scope }
    }
}

impl McpStatusView for ScopedStatus<'_> {
    fn servers(&self) -> Vec<ServerStatus> {
        self.view
            .servers()
            .into_iter()
            .filter(|s| {
                self.scope
                    .allows_toolset(&ToolSource::Mcp(s.name.clone()).toolset())
            })
            .collect()
    }
}

/// A sentence counting the tools each server has in quarantine, e.g.
/// `2 tools of server github are quarantined (new or changed definitions
/// not yet accepted by an operator) and cannot be found or called.`;
/// never their names or text. `None` when none are.
pub fn quarantine_note(view: &dyn McpStatusView) -> Option<String> {
    let parts: Vec<String> = view
        .servers()
        .into_iter()
        .filter(|s| s.quarantined > 0)
        .map(|s| match s.quarantined {
            1 => format!("1 tool of server {} is quarantined", s.name),
            n => format!("{n} tools of server {} are quarantined", s.name),
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "{} (new or changed definitions not yet accepted by an operator) and cannot be found or called.",
        parts.join("; ")
    ))
}

/// A sentence naming every server that is not ready, e.g. `Server github is
/// still connecting; server time is disabled.`; `None` when all are ready.
pub fn unavailable_note(view: &dyn McpStatusView) -> Option<String> {
    let parts: Vec<String> = view
        .servers()
        .into_iter()
        .filter(|s| !s.state.is_ready())
        .map(|s| format!("server {} is {}", s.name, s.state.describe()))
        .collect();
    if parts.is_empty() {
        return None;
    }
    let mut text = parts.join("; ");
    if let Some(first) = text.get(..1) {
        text = format!("{}{}", first.to_uppercase(), &text[1..]);
    }
    text.push('.');
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Vec<ServerStatus>);
    impl McpStatusView for Fixed {
        fn servers(&self) -> Vec<ServerStatus> {
            self.0.clone()
        }
    }

    fn status(name: &str, state: ServerState) -> ServerStatus {
        ServerStatus {
            name: name.into(),
            transport: "stdio",
            state,
            reconnects: 0,
            quarantined: 0,
            oauth: None,
        }
    }

    #[test]
    fn note_names_servers_that_are_not_ready() {
        let view = Fixed(vec![
            status("a", ServerState::Connecting { attempt: 1 }),
            status("b", ServerState::Ready { tools: 3 }),
            status("c", ServerState::Disabled),
        ]);
        assert_eq!(
            unavailable_note(&view).unwrap(),
            "Server a is still connecting; server c is disabled."
        );
        let scope = Scope::new(["mcp-c"]).unwrap();
        let scoped = ScopedStatus::new(&view, &scope);
        assert_eq!(unavailable_note(&scoped).unwrap(), "Server c is disabled.");
        assert!(
            unavailable_note(&Fixed(vec![status("b", ServerState::Ready { tools: 1 })])).is_none()
        );
    }

    #[test]
    fn quarantine_note_counts_and_never_names_tools() {
        let mut held = status("github", ServerState::Ready { tools: 3 });
        held.quarantined = 2;
        let mut one = status("time", ServerState::Ready { tools: 1 });
        one.quarantined = 1;
        let view = Fixed(vec![held, one, status("c", ServerState::Disabled)]);
        assert_eq!(
            quarantine_note(&view).unwrap(),
            "2 tools of server github are quarantined; 1 tool of server time is quarantined (new or changed definitions not yet accepted by an operator) and cannot be found or called."
        );
        let scope = Scope::new(["mcp-c"]).unwrap();
        assert!(quarantine_note(&ScopedStatus::new(&view, &scope)).is_none());
    }
}
