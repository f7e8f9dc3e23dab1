//! Session scope: which toolsets and tools a session, subagent or gateway
//! client was granted. Everything a session sees or calls goes through it.

use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::tool::Tool;

/// A grant pattern that is not a valid glob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("grant `{grant}` is not a valid glob: {reason}")]
pub struct ScopeError {
    /// The pattern as given.
    pub grant: String,
    /// What is wrong with it.
    pub reason: String,
}

/// The toolsets and tools a session may see and call.
///
/// Each grant is a glob matched against the tool's toolset (`core`,
/// `plugin-NAME`, `mcp-SERVER`) and against its exposed name, exactly and
/// case-sensitively.
///
/// ```
/// use quiver_tool::scope::Scope;
/// let scope = Scope::new(["core", "mcp-github", "plugin-text*"]).unwrap();
/// assert!(scope.allows_toolset("mcp-github"));
/// assert!(!scope.allows_toolset("mcp-gitlab"));
/// ```
#[derive(Debug, Clone)]
pub struct Scope {
    grants: Vec<String>,
    set: GlobSet,
    everything: bool,
    /// A subagent's scope also stays within its parent's.
    within: Option<Arc<Scope>>,
}

impl Scope {
    /// A scope granting every tool.
    pub fn all() -> Scope {
        Scope {
            grants: vec!["*".to_owned()],
            set: GlobSet::empty(),
            everything: true,
            within: None,
        }
    }

    /// A scope from grant patterns.
    pub fn new<I, S>(grants: I) -> Result<Scope, ScopeError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut grants: Vec<String> = grants.into_iter().map(Into::into).collect();
        grants.sort();
        grants.dedup();
        let everything = grants.iter().any(|g| g == "*");
        let mut builder = GlobSetBuilder::new();
        for grant in &grants {
            let glob = Glob::new(grant).map_err(|e| ScopeError {
                grant: grant.clone(),
                reason: e.kind().to_string(),
            })?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| ScopeError {
            grant: grants.join(","),
            reason: e.to_string(),
        })?;
        Ok(Scope {
            grants,
            set,
            everything,
            within: None,
        })
    }

    /// This scope, further limited to what `parent` allows: a tool is
    /// granted only when both grant it (a subagent's effective scope).
    pub fn narrowed_to(mut self, parent: &Scope) -> Scope {
        self.within = Some(Arc::new(parent.clone()));
        self
    }

    /// Whether a grant pattern, read as a literal toolset or tool name, is
    /// matched by one of this scope's own grants (parents not consulted).
    pub fn grants_text(&self, text: &str) -> bool {
        self.everything || self.set.is_match(text)
    }

    /// The grants, sorted and without duplicates.
    pub fn grants(&self) -> &[String] {
        &self.grants
    }

    /// A stable key for caches: equal grants give equal keys.
    pub fn cache_key(&self) -> String {
        match &self.within {
            None => self.grants.join("\u{1f}"),
            Some(parent) => format!("{}\u{1e}{}", self.grants.join("\u{1f}"), parent.cache_key()),
        }
    }

    /// Whether every tool of this toolset is granted.
    pub fn allows_toolset(&self, toolset: &str) -> bool {
        (self.everything || self.set.is_match(toolset))
            && self
                .within
                .as_ref()
                .is_none_or(|p| p.allows_toolset(toolset))
    }

    /// Whether this tool is granted, by its toolset or its own name.
    pub fn allows(&self, tool: &Tool) -> bool {
        (self.everything
            || self.set.is_match(tool.source().toolset())
            || self.set.is_match(tool.name()))
            && self.within.as_ref().is_none_or(|p| p.allows(tool))
    }

    /// Whether `self` grants nothing beyond what `parent` grants, as needed
    /// for a subagent's scope. Checked on the tools of a registry snapshot.
    pub fn is_within<'a>(&self, parent: &Scope, tools: impl IntoIterator<Item = &'a Tool>) -> bool {
        (parent.everything && parent.within.is_none())
            || tools
                .into_iter()
                .all(|t| !self.allows(t) || parent.allows(t))
    }
}

impl Default for Scope {
    fn default() -> Self {
        Scope::all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{ToolSource, ToolSpec};
    use serde_json::json;

    fn tool(name: &str, source: ToolSource) -> Tool {
        Tool::new(name.into(), source, &ToolSpec::new(name, "", json!({})))
    }

    #[test]
    fn grants_match_toolsets_and_names_exactly() {
        let scope = Scope::new(["core", "mcp-github", "echo"]).unwrap();
        assert!(scope.allows(&tool("read_file", ToolSource::Core)));
        assert!(scope.allows(&tool("mcp_github_x", ToolSource::Mcp("github".into()))));
        assert!(!scope.allows(&tool("mcp_gitlab_x", ToolSource::Mcp("gitlab".into()))));
        assert!(scope.allows(&tool("echo", ToolSource::Plugin("text".into()))));
        assert!(!scope.allows(&tool("Echo", ToolSource::Plugin("text".into()))));
        assert!(!scope.allows(&tool("echo ", ToolSource::Plugin("text".into()))));
    }

    #[test]
    fn cache_key_ignores_order_and_duplicates() {
        let a = Scope::new(["b", "a", "a"]).unwrap();
        let b = Scope::new(["a", "b"]).unwrap();
        assert_eq!(a.cache_key(), b.cache_key());
    }

    #[test]
    fn bad_glob_is_an_error() {
        let err = Scope::new(["mcp-[x"]).unwrap_err();
        assert_eq!(err.grant, "mcp-[x");
    }

    #[test]
    fn subset_check() {
        let parent = Scope::new(["mcp-github"]).unwrap();
        let child = Scope::new(["mcp-*"]).unwrap();
        let tools = [
            tool("mcp_github_x", ToolSource::Mcp("github".into())),
            tool("mcp_gitlab_x", ToolSource::Mcp("gitlab".into())),
        ];
        assert!(!child.is_within(&parent, tools.iter()));
        assert!(parent.is_within(&child, tools.iter()));
    }
}
