//! OAuth sign-in for Streamable HTTP servers (`mcp_servers.NAME.oauth`)
//! through rmcp's `auth` support: each server's token file, the credential
//! store a connection reads and refreshes through, the discovery and
//! authorization-code flow `quiver mcp login` runs, and what status shows
//! of a login.
//!
//! Tokens live in `STATE_DIR/oauth/NAME.json` (rmcp's `StoredCredentials`:
//! client id, token response, granted scopes, when it was received), mode
//! 0600, replaced atomically (written beside it, then renamed). A
//! connection reads the file on every request, so a login or a logout made
//! by another process takes effect at once. Nothing here logs a token or
//! puts one in an error.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use base64::Engine as _;
use quiver_tool::status::OAuthLogin;
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde_json::Value;

use crate::McpError;
use crate::config::{McpServerConfig, McpTransportConfig};

/// The command that logs in to `server`.
pub fn login_command(server: &str) -> String {
    format!("quiver mcp login {server}")
}

/// The token file of an OAuth server (`None`: not an OAuth server, or no
/// state directory was given, see [`McpServerConfig::with_state_dir`]).
pub fn token_file(config: &McpServerConfig) -> Option<TokenFile> {
    let dir = config.oauth.as_ref()?.token_dir.as_ref()?;
    Some(TokenFile::new(dir.join(format!("{}.json", config.name))))
}

/// One server's stored tokens.
#[derive(Debug, Clone)]
pub struct TokenFile {
    path: PathBuf,
}

/// Distinguishes the temporary files of concurrent saves in one process.
static SAVES: AtomicU64 = AtomicU64::new(0);

impl TokenFile {
    /// The file at `path`.
    pub fn new(path: PathBuf) -> TokenFile {
        TokenFile { path }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored credentials (`None`: no file). The error names the file,
    /// never its content.
    pub fn load(&self) -> Result<Option<StoredCredentials>, String> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(format!("cannot read {}: {error}", self.path.display())),
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|error| {
            format!(
                "{} is not a token file (line {}, column {}); log in again",
                self.path.display(),
                error.line(),
                error.column()
            )
        })
    }

    /// Replaces the file with `credentials`: written to a new file of mode
    /// 0600 in the same directory (mode 0700), synced, then renamed over
    /// it, so a reader sees the old tokens or the new ones, never a part.
    pub fn save(&self, credentials: &StoredCredentials) -> Result<(), String> {
        let fail = |what: &str, error: std::io::Error| {
            format!("cannot {what} {}: {error}", self.path.display())
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| fail("create the directory of", e))?;
        let text = serde_json::to_vec_pretty(credentials)
            .map_err(|e| fail("encode", std::io::Error::other(e)))?;
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temporary = dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            SAVES.fetch_add(1, Ordering::Relaxed)
        ));
        let written =
            write_private(&temporary, &text).and_then(|()| std::fs::rename(&temporary, &self.path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(fail("write", error));
        }
        Ok(())
    }

    /// Removes the file; whether there was one.
    pub fn remove(&self) -> Result<bool, String> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(format!("cannot remove {}: {error}", self.path.display())),
        }
    }

    /// When the file last changed (`None`: no file).
    pub fn modified(&self) -> Option<SystemTime> {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
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

/// The login of `config` as its token file says now (`None`: not an
/// OAuth server).
pub fn current_login(config: &McpServerConfig) -> Option<LoginView> {
    config.oauth.as_ref()?;
    let stored = token_file(config).and_then(|f| f.load().ok().flatten());
    Some(Arc::new(Mutex::new(login_status(
        &config.name,
        stored.as_ref(),
    ))))
}

/// rmcp's credential store over a [`TokenFile`]: read on every request
/// (another process may have logged in or out), written on every refresh,
/// one refresh at a time.
pub struct FileStore {
    server: String,
    file: TokenFile,
    view: Option<LoginView>,
    refreshing: Arc<tokio::sync::Mutex<()>>,
}

impl FileStore {
    /// The store of `server` in `file`, keeping `view` current.
    pub fn new(server: &str, file: TokenFile, view: Option<LoginView>) -> FileStore {
        FileStore {
            server: server.to_owned(),
            file,
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
impl CredentialStore for FileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let stored = self.file.load().map_err(AuthError::CredentialStoreError)?;
        self.note(stored.as_ref());
        Ok(stored)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.file
            .save(&credentials)
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
        self.file
            .remove()
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
    let file = token_file(config)
        .ok_or_else(|| connect_error("no state directory to keep OAuth tokens in".into()))?;
    let store = FileStore::new(server, file.clone(), view);
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
    /// No token directory was given.
    #[error("server `{server}`: no state directory to keep OAuth tokens in")]
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
    file: TokenFile,
}

impl std::fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingLogin")
            .field("server", &self.server)
            .field("file", &self.file)
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
        let Some(file) = token_file(config) else {
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
        manager.set_credential_store(FileStore::new(&server, file.clone(), None));
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
            file,
        })
    }

    /// The URL the user opens.
    pub fn authorization_url(&self) -> &str {
        self.session.get_authorization_url()
    }

    /// Where the tokens will be stored.
    pub fn token_file(&self) -> &TokenFile {
        &self.file
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
        let stored = self.file.load().map_err(exchange)?;
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

    #[test]
    fn token_file_is_private_and_replaced_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = TokenFile::new(dir.path().join("oauth").join("gh.json"));
        assert!(file.load().expect("no file is fine").is_none());
        let first = stored(json!({"access_token": "one", "token_type": "Bearer"}));
        file.save(&first).expect("saved");
        let second = stored(json!({"access_token": "two", "token_type": "Bearer"}));
        file.save(&second).expect("saved again");
        let loaded = file.load().expect("readable").expect("present");
        let token = serde_json::to_value(loaded.token_response).expect("json");
        assert_eq!(token["access_token"], "two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode(file.path()), 0o600);
            assert_eq!(mode(&dir.path().join("oauth")), 0o700);
        }
        let left: Vec<_> = std::fs::read_dir(dir.path().join("oauth"))
            .expect("dir")
            .collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
        std::fs::write(file.path(), "{not json").expect("write");
        let error = file.load().expect_err("garbage is refused");
        assert!(
            error.contains("gh.json") && error.contains("line 1"),
            "{error}"
        );
        assert!(file.remove().expect("removed"));
        assert!(!file.remove().expect("already gone"));
    }
}
