//! Auto-approval rules: calls of tools matching `approval.auto_approve`
//! (globs over the exposed name, case-sensitive) are approved at once;
//! the others go to the next approver.

use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::{ApprovalRequest, Approver, Decision};
use crate::BoxFuture;

/// Approves by tool-name glob, otherwise asks `fallback`.
#[derive(Clone)]
pub struct AutoApprove {
    globs: GlobSet,
    fallback: Arc<dyn Approver>,
}

impl std::fmt::Debug for AutoApprove {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoApprove")
            .field("globs", &self.globs.len())
            .finish_non_exhaustive()
    }
}

impl AutoApprove {
    /// Approves tools matching any of `globs`; asks `fallback` for the rest.
    pub fn new<I, S>(globs: I, fallback: Arc<dyn Approver>) -> Result<AutoApprove, globset::Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut builder = GlobSetBuilder::new();
        for glob in globs {
            builder.add(Glob::new(glob.as_ref())?);
        }
        Ok(AutoApprove {
            globs: builder.build()?,
            fallback,
        })
    }
}

impl Approver for AutoApprove {
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        if self.globs.is_match(&request.tool) {
            Box::pin(std::future::ready(Decision::Approve))
        } else {
            self.fallback.decide(request)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::DenyAll;
    use serde_json::json;

    #[tokio::test]
    async fn matching_tools_are_approved_and_others_fall_through() {
        let rules = AutoApprove::new(["mcp_github_list_*"], Arc::new(DenyAll)).unwrap();
        let ask = |tool: &str| ApprovalRequest {
            call_id: 1,
            session: "s".into(),
            tool: tool.into(),
            via_bridge: false,
            arguments: json!({}),
            digest: String::new(),
        };
        assert_eq!(
            rules.decide(ask("mcp_github_list_issues")).await,
            Decision::Approve
        );
        assert!(matches!(
            rules.decide(ask("MCP_github_list_issues")).await,
            Decision::Deny { .. }
        ));
    }
}
