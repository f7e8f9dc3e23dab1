//! The `--oauth` mode of `quiver-test-mcp-server`: `/mcp` needs a bearer
//! token this same process issued, as an OAuth 2.1 authorization server
//! beside it (all in memory, on the same 127.0.0.1 address):
//!
//! - `/.well-known/oauth-protected-resource[/mcp]`: the protected-resource
//!   metadata (RFC 9728), also named by the 401's `WWW-Authenticate`;
//! - `/.well-known/oauth-authorization-server`: the server metadata (RFC 8414);
//! - `POST /register`: dynamic client registration (RFC 7591);
//! - `GET /authorize`: approves at once and redirects with a code, after
//!   checking the client, the redirect URI, the S256 challenge and the
//!   `resource`;
//! - `POST /token`: the `authorization_code` grant (checking the PKCE
//!   verifier and `resource`) and the `refresh_token` grant (rotating the
//!   refresh token); tokens live `--oauth-token-lifetime-s` seconds and
//!   the answer names the user (`username: ada`);
//! - `GET /oauth/stats`: `{"registered", "codes", "refreshes", "refused"}`;
//! - `POST /oauth/expire`: every access token issued so far stops working
//!   (as a server-side expiry or revocation would; refresh tokens stay).
//!
//! The client id `preregistered` is known without registration.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Form, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::Digest as _;

/// A code waiting for its exchange.
struct Grant {
    client_id: String,
    redirect_uri: String,
    challenge: String,
}

#[derive(Default)]
struct Issued {
    clients: Vec<String>,
    codes: HashMap<String, Grant>,
    access: HashMap<String, Instant>,
    refresh: HashMap<String, String>,
    next: u64,
    exchanged: u64,
    refreshes: u64,
    refused: u64,
}

/// The authorization server's state and where it is.
#[derive(Clone)]
pub(crate) struct Authority {
    base: String,
    lifetime: Duration,
    issued: Arc<Mutex<Issued>>,
}

impl Authority {
    pub(crate) fn new(base: String, lifetime_s: u64) -> Authority {
        let issued = Issued {
            clients: vec!["preregistered".to_owned()],
            ..Issued::default()
        };
        Authority {
            base,
            lifetime: Duration::from_secs(lifetime_s),
            issued: Arc::new(Mutex::new(issued)),
        }
    }

    fn issued(&self) -> std::sync::MutexGuard<'_, Issued> {
        self.issued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn resource(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// A fresh token pair for `client_id`.
    fn tokens(&self, client_id: &str) -> Value {
        let mut issued = self.issued();
        issued.next += 1;
        let n = issued.next;
        let access = format!("access-{n}-{}", std::process::id());
        let refresh = format!("refresh-{n}-{}", std::process::id());
        issued
            .access
            .insert(access.clone(), Instant::now() + self.lifetime);
        issued.refresh.insert(refresh.clone(), client_id.to_owned());
        json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.lifetime.as_secs(),
            "refresh_token": refresh,
            "scope": "tools",
            "username": "ada",
        })
    }

    /// The routes of the authorization server and protected-resource
    /// metadata, and the bearer check around `mcp` (the MCP service).
    pub(crate) fn router(self, mcp: Router) -> Router {
        let guarded = mcp.layer(axum::middleware::from_fn_with_state(self.clone(), guard));
        Router::new()
            .route(
                "/.well-known/oauth-protected-resource",
                get(resource_metadata),
            )
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(resource_metadata),
            )
            .route(
                "/.well-known/oauth-authorization-server",
                get(server_metadata),
            )
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/oauth/stats", get(stats))
            .route("/oauth/expire", post(expire))
            .with_state(self)
            .merge(guarded)
    }
}

fn refuse(error: &str, description: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

async fn guard(State(authority): State<Authority>, request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let live = token.as_ref().is_some_and(|token| {
        authority
            .issued()
            .access
            .get(token)
            .is_some_and(|until| Instant::now() < *until)
    });
    if live {
        return next.run(request).await;
    }
    authority.issued().refused += 1;
    let mut challenge = format!(
        "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"tools\"",
        authority.base
    );
    if token.is_some() {
        challenge.push_str(", error=\"invalid_token\"");
    }
    let mut response = StatusCode::UNAUTHORIZED.into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

async fn resource_metadata(State(authority): State<Authority>) -> Json<Value> {
    Json(json!({
        "resource": authority.resource(),
        "authorization_servers": [authority.base],
        "scopes_supported": ["tools"],
        "bearer_methods_supported": ["header"],
    }))
}

async fn server_metadata(State(authority): State<Authority>) -> Json<Value> {
    let base = &authority.base;
    Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": ["tools"],
    }))
}

async fn register(State(authority): State<Authority>, Json(body): Json<Value>) -> Response {
    let mut issued = authority.issued();
    issued.next += 1;
    let client_id = format!("client-{}", issued.next);
    issued.clients.push(client_id.clone());
    (
        StatusCode::CREATED,
        Json(json!({
            "client_id": client_id,
            "client_name": body["client_name"],
            "redirect_uris": body["redirect_uris"],
            "token_endpoint_auth_method": "none",
        })),
    )
        .into_response()
}

async fn authorize(
    State(authority): State<Authority>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    let client_id = field("client_id");
    if !authority.issued().clients.contains(&client_id) {
        return refuse("unauthorized_client", "unknown client_id");
    }
    if field("response_type") != "code" || field("code_challenge_method") != "S256" {
        return refuse("invalid_request", "needs response_type=code and S256");
    }
    if field("resource") != authority.resource() {
        return refuse("invalid_target", "resource is not this server's");
    }
    let redirect_uri = field("redirect_uri");
    if !redirect_uri.starts_with("http://127.0.0.1:") {
        return refuse("invalid_request", "redirect_uri must be a loopback URI");
    }
    let code = {
        let mut issued = authority.issued();
        issued.next += 1;
        let code = format!("code-{}", issued.next);
        issued.codes.insert(
            code.clone(),
            Grant {
                client_id,
                redirect_uri: redirect_uri.clone(),
                challenge: field("code_challenge"),
            },
        );
        code
    };
    let state = field("state");
    let mut target = format!("{redirect_uri}?code={code}");
    if !state.is_empty() {
        target.push_str("&state=");
        target.push_str(&form_encode(&state));
    }
    Redirect::to(&target).into_response()
}

/// `value` percent-encoded for a query.
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

async fn token(
    State(authority): State<Authority>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    if field("resource") != authority.resource() {
        return refuse("invalid_target", "resource is not this server's");
    }
    match field("grant_type").as_str() {
        "authorization_code" => {
            let Some(grant) = authority.issued().codes.remove(&field("code")) else {
                return refuse("invalid_grant", "unknown or used code");
            };
            let digest = sha2::Sha256::digest(field("code_verifier").as_bytes());
            let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
            if challenge != grant.challenge {
                return refuse("invalid_grant", "PKCE verifier does not match");
            }
            if field("redirect_uri") != grant.redirect_uri || field("client_id") != grant.client_id
            {
                return refuse("invalid_grant", "client or redirect_uri differ");
            }
            authority.issued().exchanged += 1;
            Json(authority.tokens(&grant.client_id)).into_response()
        }
        "refresh_token" => {
            let Some(client_id) = authority.issued().refresh.remove(&field("refresh_token")) else {
                return refuse("invalid_grant", "unknown or used refresh token");
            };
            authority.issued().refreshes += 1;
            Json(authority.tokens(&client_id)).into_response()
        }
        _ => refuse(
            "unsupported_grant_type",
            "authorization_code or refresh_token",
        ),
    }
}

async fn expire(State(authority): State<Authority>) -> StatusCode {
    authority.issued().access.clear();
    StatusCode::NO_CONTENT
}

async fn stats(State(authority): State<Authority>) -> Json<Value> {
    let issued = authority.issued();
    Json(json!({
        "registered": issued.clients.len() - 1,
        "codes": issued.exchanged,
        "refreshes": issued.refreshes,
        "refused": issued.refused,
    }))
}
