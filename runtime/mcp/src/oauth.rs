//! OAuth sign-in for Streamable HTTP servers (`mcp_servers.NAME.oauth`)
//! through rmcp's `auth` support: the credential store a connection reads
//! and refreshes through (over the server's [`TokenStore`]), the discovery
//! and authorization-code flow `quiver mcp login` runs, and what status
//! shows of a login.
//!
//! Credentials (rmcp's `StoredCredentials`: client id, token response,
//! granted scopes, when it was received) are kept by the daemon's state
//! store: `STATE_DIR/oauth/NAME.json` (mode 0600, replaced atomically) with
//! the embedded store, a table every instance shares with PostgreSQL. A
//! connection reads them on every request, so a login or a logout made by
//! another process takes effect at once. Nothing here logs a token or puts
//! one in an error.

use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use quiver_tool::status::OAuthLogin;
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde_json::Value;

use crate::McpError;
use crate::config::{McpServerConfig, McpTransportConfig};
use crate::tokens::Tokens;

/// The command that logs in to `server`.
pub fn login_command(server: &str) -> String {
    format!("quiver mcp login {server}")
}

/// The token store of an OAuth server (`None`: not an OAuth server, or
/// none was given, see [`McpServerConfig::with_tokens`]).
pub fn tokens(config: &McpServerConfig) -> Option<&Tokens> {
    config.oauth.as_ref()?.tokens.as_ref()
}

/// Reads `server`'s credentials from `tokens` (`None`: none stored); the
/// error names where they are, never their content.
pub async fn load_credentials(
    tokens: &Tokens,
    server: &str,
) -> Result<Option<StoredCredentials>, String> {
    let Some((value, _)) = tokens.0.load(server).await? else {
        return Ok(None);
    };
    serde_json::from_value(value).map(Some).map_err(|error| {
        format!(
            "{} holds no usable credentials ({error}); log in again",
            tokens.0.place(server)
        )
    })
}

/// What status shows of `server`'s stored credentials.
pub fn login_status(server: &str, stored: Option<&StoredCredentials>) -> OAuthLogin {
    let login_command = login_command(server);
    let Some((credentials, token)) = stored.and_then(|c| {
        let token = serde_json::to_value(c.token_response.as_ref()?).ok()?;
        Some((c, token))
    }) else {
        return OAuthLogin {
            login_command,
            ..OAuthLogin::default()
        };
    };
    let expires_at = token["expires_in"]
        .as_u64()
        .zip(credentials.token_received_at)
        .map(|(lifetime, received)| received.saturating_add(lifetime));
    OAuthLogin {
        logged_in: true,
        account: Some(account(&token).unwrap_or_else(|| credentials.client_id.clone())),
        expires_at,
        refreshable: token["refresh_token"].is_string(),
        login_command,
    }
}

/// Claims naming the user, most readable first.
const ACCOUNT_CLAIMS: [&str; 4] = ["preferred_username", "username", "email", "sub"];

/// Who a token response was issued to, when it says: its own fields, an
/// OpenID `id_token`, or a JWT access token's claims (read for display
/// only, not verified).
fn account(token: &Value) -> Option<String> {
    let named = |object: &Value| {
        ACCOUNT_CLAIMS
            .iter()
            .find_map(|claim| object[*claim].as_str().filter(|s| !s.trim().is_empty()))
            .map(str::to_owned)
    };
    named(token).or_else(|| {
        ["id_token", "access_token"]
            .iter()
            .filter_map(|field| token[*field].as_str().and_then(jwt_claims))
            .find_map(|claims| named(&claims))
    })
}

/// The claims of a JWT (`header.claims.signature`), unverified.
fn jwt_claims(token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let (_, claims, _) = (parts.next()?, parts.next()?, parts.next()?);
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice::<Value>(&bytes)
        .ok()
        .filter(Value::is_object)
}

pub use crate::connection::LoginView;

/// The login of `config` as status shows it before its credentials are
/// read (`None`: not an OAuth server); every read of them updates it.
pub fn current_login(config: &McpServerConfig) -> Option<LoginView> {
    config.oauth.as_ref()?;
    Some(Arc::new(Mutex::new(login_status(&config.name, None))))
}

/// rmcp's credential store over a server's [`Tokens`]: read on every
/// request (another process may have logged in or out), written on every
/// refresh, one refresh at a time.
pub struct StoredTokens {
    server: String,
    tokens: Tokens,
    view: Option<LoginView>,
    refreshing: Arc<tokio::sync::Mutex<()>>,
}

impl StoredTokens {
    /// The credentials of `server` in `tokens`, keeping `view` current.
    pub fn new(server: &str, tokens: Tokens, view: Option<LoginView>) -> StoredTokens {
        StoredTokens {
            server: server.to_owned(),
            tokens,
            view,
            refreshing: Arc::default(),
        }
    }

    fn note(&self, stored: Option<&StoredCredentials>) {
        if let Some(view) = &self.view {
            *view.lock().unwrap_or_else(PoisonError::into_inner) =
                login_status(&self.server, stored);
        }
    }
}

#[async_trait::async_trait]
impl CredentialStore for StoredTokens {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let stored = load_credentials(&self.tokens, &self.server)
            .await
            .map_err(AuthError::CredentialStoreError)?;
        self.note(stored.as_ref());
        Ok(stored)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let value = serde_json::to_value(&credentials)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        self.tokens
            .0
            .save(&self.server, &value)
            .await
            .map_err(AuthError::CredentialStoreError)?;
        let login = login_status(&self.server, Some(&credentials));
        tracing::info!(
            server = %self.server,
            account = login.account.as_deref().unwrap_or_default(),
            expires_at = login.expires_at,
            "OAuth tokens saved"
        );
        self.note(Some(&credentials));
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.tokens
            .0
            .remove(&self.server)
            .await
            .map_err(AuthError::CredentialStoreError)?;
        self.note(None);
        Ok(())
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let guard = self.refreshing.clone().lock_owned().await;
        Ok(Some(CredentialRefreshGuard::new(guard)))
    }
}

fn needs_login(server: &str) -> McpError {
    McpError::NeedsLogin {
        server: server.to_owned(),
        command: login_command(server),
    }
}

/// The HTTP client of an OAuth server's connection: sends the stored
/// access token, refreshes it before it expires (and once on a 401), and
/// writes the refreshed tokens back. [`McpError::NeedsLogin`] when no
/// usable token is stored.
pub(crate) async fn authorized_client(
    config: &McpServerConfig,
    url: &str,
    view: Option<LoginView>,
) -> Result<AuthClient<reqwest::Client>, McpError> {
    let server = config.name.as_str();
    let connect_error = |detail: String| McpError::Connect {
        server: server.to_owned(),
        detail,
    };
    let tokens = tokens(config)
        .ok_or_else(|| connect_error("no state store to keep OAuth tokens in".into()))?;
    let store = StoredTokens::new(server, tokens.clone(), view);
    match store.load().await {
        Ok(Some(stored)) if stored.token_response.is_some() => {}
        Ok(_) => return Err(needs_login(server)),
        Err(error) => return Err(connect_error(error.to_string())),
    }
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| connect_error(format!("OAuth: {e}")))?;
    manager.set_credential_store(store);
    // Discovers the authorization server again (it may have moved) and
    // drops tokens another issuer minted.
    match manager.initialize_from_store().await {
        Ok(true) => {}
        Ok(false) => return Err(needs_login(server)),
        Err(error) => return Err(connect_error(format!("OAuth discovery: {error}"))),
    }
    match manager.get_access_token().await {
        Ok(_) => {}
        Err(AuthError::AuthorizationRequired) => return Err(needs_login(server)),
        Err(error) => return Err(connect_error(format!("OAuth: {error}"))),
    }
    Ok(AuthClient::new(reqwest::Client::new(), manager))
}

/// Why a login failed.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// The server is a stdio server.
    #[error("server `{server}` is a stdio server; OAuth is for `url` (Streamable HTTP) servers")]
    NotHttp {
        /// The server.
        server: String,
    },
    /// The server has no `oauth` setting.
    #[error("server `{server}` does not use OAuth (set `mcp_servers.{server}.oauth: true`)")]
    NotOAuth {
        /// The server.
        server: String,
    },
    /// No token store was given.
    #[error("server `{server}`: no state store to keep OAuth tokens in")]
    NoStateDir {
        /// The server.
        server: String,
    },
    /// Discovery, registration or the authorization URL failed.
    #[error("server `{server}`: cannot start the OAuth login: {detail}")]
    Start {
        /// The server.
        server: String,
        /// What failed.
        detail: String,
    },
    /// The authorization server redirected with an error.
    #[error("server `{server}`: the authorization was denied ({error}{})", description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Denied {
        /// The server.
        server: String,
        /// The OAuth error code, e.g. `access_denied`.
        error: String,
        /// The authorization server's description.
        description: Option<String>,
    },
    /// The redirect's `state` is not the one this login sent.
    #[error(
        "server `{server}`: the redirect's `state` does not match this login's; nothing was stored (log in again)"
    )]
    StateMismatch {
        /// The server.
        server: String,
    },
    /// The redirect carried no code.
    #[error("server `{server}`: the redirect carries no authorization `code`")]
    NoCode {
        /// The server.
        server: String,
    },
    /// Exchanging the code for tokens (or storing them) failed.
    #[error("server `{server}`: cannot exchange the authorization code for tokens: {detail}")]
    Exchange {
        /// The server.
        server: String,
        /// What failed.
        detail: String,
    },
}

/// A login waiting for its redirect.
pub struct PendingLogin {
    server: String,
    session: AuthorizationSession,
    state: String,
    tokens: Tokens,
}

impl std::fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingLogin")
            .field("server", &self.server)
            .field("tokens", &self.tokens.0.place(&self.server))
            .finish_non_exhaustive()
    }
}

/// Asks the server without a token and returns its `WWW-Authenticate`
/// challenge when it answers 401 (the MCP authorization spec's start).
async fn challenge(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Option<String> {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(
            serde_json::json!({
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "quiver", "version": env!("CARGO_PKG_VERSION")}}
            })
            .to_string(),
        );
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request.send().await.ok()?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    response
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.trim_start().to_ascii_lowercase().starts_with("bearer"))
        .map(str::to_owned)
}

impl PendingLogin {
    /// Discovers the authorization server of `config` (from the server's
    /// 401 challenge, else its protected-resource metadata at the well-known
    /// path, then the authorization server's metadata or OpenID
    /// configuration), registers a client when none is configured and the
    /// server offers registration, and makes the authorization URL (PKCE
    /// S256, `state`, `resource`) that redirects to `redirect_uri`.
    pub async fn start(
        config: &McpServerConfig,
        redirect_uri: &str,
    ) -> Result<PendingLogin, LoginError> {
        let server = config.name.clone();
        let McpTransportConfig::Http { url, headers } = &config.transport else {
            return Err(LoginError::NotHttp { server });
        };
        let Some(oauth) = &config.oauth else {
            return Err(LoginError::NotOAuth { server });
        };
        let Some(tokens) = tokens(config).cloned() else {
            return Err(LoginError::NoStateDir { server });
        };
        let start = |detail: String| LoginError::Start {
            server: server.clone(),
            detail,
        };
        let mut manager = AuthorizationManager::new(url.as_str())
            .await
            .map_err(|e| start(e.to_string()))?;
        let challenge = challenge(url, headers).await;
        let resolution = manager
            .resolve_metadata_from_challenge(challenge.as_deref())
            .await
            .map_err(|e| start(format!("discovery: {e}")))?;
        tracing::debug!(server = %server, source = ?resolution.source, "OAuth metadata found");
        manager.set_metadata(resolution.metadata);
        manager.set_credential_store(StoredTokens::new(&server, tokens.clone(), None));
        let mut request = AuthorizationRequest::new(redirect_uri).with_client_name("Quiver");
        request = if oauth.scopes.is_empty() {
            request.with_initial_scope_selection()
        } else {
            request.with_scopes(oauth.scopes.iter().cloned())
        };
        if let Some(client_id) = &oauth.client_id {
            request = request.with_preregistered_client(client_id.clone());
        }
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, e)| start(e.to_string()))?;
        let state = query(session.get_authorization_url(), "state")
            .ok_or_else(|| start("the authorization URL has no `state`".into()))?;
        Ok(PendingLogin {
            server,
            session,
            state,
            tokens,
        })
    }

    /// The URL the user opens.
    pub fn authorization_url(&self) -> &str {
        self.session.get_authorization_url()
    }

    /// Where the tokens will be stored.
    pub fn stored_in(&self) -> String {
        self.tokens.0.place(&self.server)
    }

    /// Completes the login from the redirect's query parameters: refuses
    /// an error answer and a `state` that is not this login's, exchanges
    /// the code (with the PKCE verifier and `resource`) and stores the
    /// tokens; what status will show of the login.
    pub async fn finish(
        &self,
        params: &std::collections::HashMap<String, String>,
    ) -> Result<OAuthLogin, LoginError> {
        let server = self.server.clone();
        if params.get("state") != Some(&self.state) {
            return Err(LoginError::StateMismatch { server });
        }
        if let Some(error) = params.get("error") {
            return Err(LoginError::Denied {
                server,
                error: error.clone(),
                description: params.get("error_description").cloned(),
            });
        }
        let Some(code) = params.get("code") else {
            return Err(LoginError::NoCode { server });
        };
        let exchange = |detail: String| LoginError::Exchange {
            server: server.clone(),
            detail,
        };
        self.session
            .handle_callback_with_issuer(code, &self.state, params.get("iss").map(String::as_str))
            .await
            .map_err(|e| exchange(e.to_string()))?;
        let stored = load_credentials(&self.tokens, &self.server)
            .await
            .map_err(exchange)?;
        Ok(login_status(&self.server, stored.as_ref()))
    }
}

/// The first value of `name` in `url`'s query.
fn query(url: &str, name: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    url.query_pairs()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(token: Value) -> StoredCredentials {
        let response = serde_json::from_value(token).expect("a token response");
        StoredCredentials::new("client-7".into(), Some(response), vec![], Some(1_000))
    }

    #[test]
    fn status_names_the_account_and_expiry_never_the_token() {
        let with_name = stored(json!({
            "access_token": "tok-secret", "token_type": "Bearer",
            "expires_in": 60, "refresh_token": "ref-secret", "username": "ada"
        }));
        let login = login_status("gh", Some(&with_name));
        assert_eq!(login.account.as_deref(), Some("ada"));
        assert_eq!(login.expires_at, Some(1_060));
        assert!(login.logged_in && login.refreshable);
        let text = serde_json::to_string(&login).expect("json");
        assert!(!text.contains("secret"), "{text}");

        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"sub":"u-42","email":"grace@example.invalid"}"#);
        let jwt = stored(json!({
            "access_token": format!("e30.{claims}.sig"), "token_type": "Bearer"
        }));
        let login = login_status("gh", Some(&jwt));
        assert_eq!(login.account.as_deref(), Some("grace@example.invalid"));
        assert_eq!(login.expires_at, None);
        assert!(!login.refreshable);

        let plain = stored(json!({"access_token": "opaque", "token_type": "Bearer"}));
        assert_eq!(
            login_status("gh", Some(&plain)).account.as_deref(),
            Some("client-7")
        );
        let none = login_status("gh", None);
        assert!(!none.logged_in && none.account.is_none());
        assert_eq!(none.login_command, "quiver mcp login gh");
    }
}
