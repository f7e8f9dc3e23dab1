//! An upstream server's resources and prompts, read on behalf of a gateway
//! client: listing (every page), reading, templates, prompt rendering and
//! argument completion.
//!
//! Outside a server, its resources are named `quiver://mcp/SERVER/URI`
//! ([`resource_uri`]): a client or model reading several servers' resources
//! cannot mix them up, and a resource link in a tool result names the
//! resource as the gateway serves it.
//!
//! These requests carry no tool, so their errors name the request instead
//! (`resources/read URI`, `prompts/get NAME`) in [`McpCallError`]'s tool
//! field. A server that did not offer the capability lists nothing.

use std::future::Future;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResult, JsonObject,
    Prompt, ReadResourceRequestParams, ReadResourceResult, Resource, ResourceTemplate,
    ServerCapabilities,
};
use rmcp::{Peer, RoleClient, ServiceError};

use super::McpCallError;
use super::host::{McpHost, service_error};

/// Where Quiver's names for servers' resources start.
pub const RESOURCE_URI_PREFIX: &str = "quiver://mcp/";

/// Quiver's name for `server`'s resource `uri`.
pub fn resource_uri(server: &str, uri: &str) -> String {
    format!("{RESOURCE_URI_PREFIX}{server}/{uri}")
}

/// The server and its own URI of one of Quiver's resource names.
pub fn split_resource_uri(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix(RESOURCE_URI_PREFIX)?
        .split_once('/')
        .filter(|(server, uri)| !server.is_empty() && !uri.is_empty())
}

impl McpHost {
    /// The server's resources (`[]` when it offers none).
    pub async fn resources(&self, server: &str) -> Result<Vec<Resource>, McpCallError> {
        self.upstream(
            server,
            "resources/list",
            offers_resources,
            |peer| async move { peer.list_all_resources().await },
        )
        .await
        .map(Option::unwrap_or_default)
    }

    /// The server's resource templates (`[]` when it offers none).
    pub async fn resource_templates(
        &self,
        server: &str,
    ) -> Result<Vec<ResourceTemplate>, McpCallError> {
        self.upstream(
            server,
            "resources/templates/list",
            offers_resources,
            |peer| async move { peer.list_all_resource_templates().await },
        )
        .await
        .map(Option::unwrap_or_default)
    }

    /// Reads one of the server's resources by its own URI.
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
    ) -> Result<ReadResourceResult, McpCallError> {
        let what = format!("resources/read {uri}");
        let params = ReadResourceRequestParams::new(uri);
        self.upstream(server, &what.clone(), offers_resources, |peer| async move {
            peer.read_resource(params).await
        })
        .await?
        .ok_or_else(|| not_offered(server, what, "resources"))
    }

    /// The server's prompts (`[]` when it offers none).
    pub async fn prompts(&self, server: &str) -> Result<Vec<Prompt>, McpCallError> {
        self.upstream(server, "prompts/list", offers_prompts, |peer| async move {
            peer.list_all_prompts().await
        })
        .await
        .map(Option::unwrap_or_default)
    }

    /// Renders one of the server's prompts with `arguments`.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<GetPromptResult, McpCallError> {
        let what = format!("prompts/get {name}");
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = arguments;
        self.upstream(server, &what.clone(), offers_prompts, |peer| async move {
            peer.get_prompt(params).await
        })
        .await?
        .ok_or_else(|| not_offered(server, what, "prompts"))
    }

    /// Completion values for an argument of one of the server's prompts or
    /// resource templates (`request` names them as the server does); none
    /// when the server offers no completions.
    pub async fn complete(
        &self,
        server: &str,
        request: CompleteRequestParams,
    ) -> Result<CompleteResult, McpCallError> {
        let what = format!("completion/complete {}", request.argument.name);
        self.upstream(server, &what, offers_completions, |peer| async move {
            peer.complete(request).await
        })
        .await
        .map(Option::unwrap_or_default)
    }

    /// Runs `request` on the connected `server` within its call timeout;
    /// `None` when the server does not `offer` what is asked.
    async fn upstream<T, F>(
        &self,
        server: &str,
        what: &str,
        offer: impl FnOnce(&ServerCapabilities) -> bool,
        request: impl FnOnce(Peer<RoleClient>) -> F,
    ) -> Result<Option<T>, McpCallError>
    where
        F: Future<Output = Result<T, ServiceError>>,
    {
        let (slot, peer) = self.connected(server, what)?;
        let offered = peer
            .peer_info()
            .is_some_and(|info| offer(&info.capabilities));
        if !offered {
            return Ok(None);
        }
        let timeout = slot.config.call_timeout;
        match tokio::time::timeout(timeout, request(peer)).await {
            Err(_) => Err(McpCallError::Timeout {
                server: server.to_owned(),
                tool: what.to_owned(),
                timeout_ms: timeout.as_millis() as u64,
            }),
            Ok(outcome) => outcome
                .map(Some)
                .map_err(|error| service_error(server, what, error)),
        }
    }
}

/// The answer to a request for a capability the server did not offer, as
/// the server itself would give it.
fn not_offered(server: &str, what: String, capability: &str) -> McpCallError {
    McpCallError::Protocol {
        server: server.to_owned(),
        tool: what,
        code: -32601,
        message: format!("the server offers no {capability}"),
    }
}

fn offers_resources(capabilities: &ServerCapabilities) -> bool {
    capabilities.resources.is_some()
}

fn offers_prompts(capabilities: &ServerCapabilities) -> bool {
    capabilities.prompts.is_some()
}

fn offers_completions(capabilities: &ServerCapabilities) -> bool {
    capabilities.completions.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_round_trip() {
        let named = resource_uri("notes", "test://notes/first");
        assert_eq!(named, "quiver://mcp/notes/test://notes/first");
        assert_eq!(
            split_resource_uri(&named),
            Some(("notes", "test://notes/first"))
        );
        assert_eq!(split_resource_uri("test://notes/first"), None);
        assert_eq!(split_resource_uri("quiver://mcp/notes/"), None);
        assert_eq!(split_resource_uri("quiver://mcp//x"), None);
    }
}
