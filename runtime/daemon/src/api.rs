//! The HTTP API (axum), the Streamable HTTP MCP gateway and the web
//! console on one listener. Every request needs `Authorization: Bearer
//! TOKEN` or the console's session cookie: the daemon's token opens
//! everything; a gateway client's token opens `/mcp` only, with its own
//! grant; the cookie opens all but `/mcp`, and a request it authenticates
//! that changes state needs an `Origin` matching its `Host`
//! ([`crate::console`]). Errors are `{"error": code, "message"}`.
//!
//! | method and path | what |
//! |---|---|
//! | `GET /`, `GET /console/app.js`, `GET /console/app.css` | the web console, no token needed (the page signs in) |
//! | `POST /v1/console/sign-in`, `POST /v1/console/sign-out` | `{token}` (the daemon's, not a gateway client's) or `{once}` (the startup link's code) for a session cookie; sign-out ends the cookie's session |
//! | `GET /healthz` | liveness, no token needed, no data |
//! | `GET /readyz` | readiness, no token needed: `503 store_unavailable` while the state store cannot be reached, `503 not_ready` while an MCP server is on its first connection attempt, or (with `tools.tool_search.embeddings.readiness_waits`) while tools are being embedded; once none is, answered when searches see the latest change |
//! | `GET /metrics` | Prometheus text (the token, unless `serve.metrics_without_token` and the connection is from loopback) |
//! | `GET /v1/health` | liveness, version, uptime |
//! | `GET /v1/status` | plugins, MCP servers, models, sessions, config generation and last reload |
//! | `POST /v1/reload` | reads the config file again and applies it (as SIGHUP does); a config with errors is refused (`422 config_refused`, every error in `data.errors`) and the old one keeps serving |
//! | `GET /v1/sessions`, `POST /v1/sessions` | list, create (`{grants?, model?, context_tokens?, parent?, id?}`) |
//! | `GET /v1/sessions/{id}` | a session and its messages |
//! | `PATCH /v1/sessions/{id}` | `{model?, grants?, context_tokens?}`: switches the model or the grant (a subagent's within its parent's) |
//! | `DELETE /v1/sessions/{id}` | deletes the session, its messages and its subagents |
//! | `POST /v1/sessions/{id}/messages` | `{content}`: runs a turn, answers with its outcome; `?stream=true`: as server-sent events while it runs (`message.delta`, `message.done`, `activity`, then `turn.done` or `error`) |
//! | `GET /v1/sessions/{id}/events`, `GET /v1/events` | the activity feed as server-sent events (`?after=ID` or `Last-Event-ID` replays the log first); a session's also carries its live `message.delta` and `message.done` |
//! | `GET /v1/sessions/{id}/catalog`, `GET /v1/catalog` | the assembled tools, tier and listing (`?context_tokens=`, `?grant=a,b`) |
//! | `GET /v1/sessions/{id}/catalog/search`, `GET /v1/catalog/search` | `?query=&limit=`: what the model's `tool_search` answers there, unrecorded |
//! | `GET /v1/sessions/{id}/catalog/describe`, `GET /v1/catalog/describe` | `?name=`: what the model's `tool_describe` answers there, unrecorded |
//! | `GET /v1/approvals`, `POST /v1/approvals/{id}` | pending approvals; `{decision: approve \| approve_for_session \| deny, reason?, digest?}` |
//! | `GET/POST /v1/gateway/clients`, `DELETE /v1/gateway/clients/{name}` | MCP gateway clients with their own token and grant |
//! | `/mcp` | the MCP gateway (Streamable HTTP) |

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::{Stream, StreamExt};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::attachments::AttachmentError;
use super::auth::{self, CLIENT_TOKEN_PREFIX, Caller};
use super::console::{self, ConsoleSessions, CookieSession};
use super::gateway::{GatewayHandler, GatewayIdentity};
use super::turn_stream::{self, OrderedMessages, TurnItem};
use super::{Daemon, DaemonError, NewSession, SessionChange, jsonrpc};
use crate::approvals::AnswerError;
use quiver_dispatch::Decision;
use quiver_store::{EventRecord, Store, StoreError};
use quiver_tool::scope::Scope;

/// The name the daemon's own token has on the gateway.
pub const ADMIN_CLIENT: &str = "daemon";

/// The name `quiver serve --stdio`'s client has on the gateway.
pub const STDIO_CLIENT: &str = "stdio";

/// Client names the gateway uses itself; a gateway client may not take one
/// (it would share that session).
pub const RESERVED_CLIENTS: [&str; 2] = [ADMIN_CLIENT, STDIO_CLIENT];

/// Stored events read from the log at a time by an event stream.
const REPLAY_PAGE: usize = 1_000;

#[derive(Clone)]
struct ApiState {
    daemon: Arc<Daemon>,
    admin_digest: Arc<str>,
    /// The web console's signed-in sessions.
    console: Arc<ConsoleSessions>,
    /// Fires when the server stops: open event streams end with it, so a
    /// graceful shutdown does not wait on them forever.
    shutdown: CancellationToken,
}

/// An API error: an HTTP status and `{"error": code, "message"}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// More about it, when there is more (`data` of the JSON body).
    data: Option<Value>,
}

impl ApiError {
    pub(crate) fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            data: None,
        }
    }
}

impl From<DaemonError> for ApiError {
    fn from(error: DaemonError) -> ApiError {
        let status = match &error {
            DaemonError::UnknownSession(_) => StatusCode::NOT_FOUND,
            DaemonError::Attachment(AttachmentError::Upstream(
                quiver_mcp::McpCallError::Protocol { .. },
            )) => StatusCode::BAD_REQUEST,
            DaemonError::Attachment(AttachmentError::Upstream(_)) => StatusCode::BAD_GATEWAY,
            DaemonError::Attachment(_)
            | DaemonError::UnknownModel { .. }
            | DaemonError::BadRequest(_)
            | DaemonError::UnknownGrant { .. }
            | DaemonError::Scope(_)
            | DaemonError::Glob(_) => StatusCode::BAD_REQUEST,
            DaemonError::Subagent(_) => StatusCode::FORBIDDEN,
            DaemonError::ConfigRefused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            DaemonError::TurnBusy(_)
            | DaemonError::NoModel(_)
            | DaemonError::SessionModelGone { .. }
            | DaemonError::NotAChat(_)
            | DaemonError::GatewaySessionTaken { .. } => StatusCode::CONFLICT,
            DaemonError::Model(_) | DaemonError::Turn(quiver_agent::TurnError::Model(_)) => {
                StatusCode::BAD_GATEWAY
            }
            DaemonError::Accept(quiver_mcp::AcceptError::UnknownServer { .. }) => {
                StatusCode::NOT_FOUND
            }
            DaemonError::Accept(quiver_mcp::AcceptError::NotQuarantined { .. }) => {
                StatusCode::CONFLICT
            }
            DaemonError::Store(StoreError::SessionExists(_))
            | DaemonError::Store(StoreError::ClientExists(_)) => StatusCode::CONFLICT,
            DaemonError::Store(e) | DaemonError::Turn(quiver_agent::TurnError::Store(e))
                if e.is_unavailable() =>
            {
                StatusCode::SERVICE_UNAVAILABLE
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let data = match &error {
            DaemonError::ConfigRefused { file, errors } => {
                Some(json!({"file": file, "errors": errors}))
            }
            DaemonError::Store(e) | DaemonError::Turn(quiver_agent::TurnError::Store(e))
                if e.is_unavailable() =>
            {
                Some(json!({"store": state_store_location(e)}))
            }
            _ => None,
        };
        ApiError {
            data,
            ..ApiError::new(status, error.code(), error.to_string())
        }
    }
}

/// The store an unavailable-store error names.
fn state_store_location(error: &StoreError) -> Option<String> {
    match error {
        StoreError::Unavailable { location, .. } => Some(location.clone()),
        _ => None,
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        DaemonError::from(error).into()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        let code = match &rejection {
            JsonRejection::MissingJsonContentType(_) => "unsupported_media_type",
            _ => "bad_request",
        };
        let message = match &rejection {
            JsonRejection::MissingJsonContentType(_) => {
                "the request body must be JSON sent with `Content-Type: application/json`"
                    .to_owned()
            }
            _ => rejection.body_text(),
        };
        ApiError::new(rejection.status(), code, message)
    }
}

/// A JSON body that must be an object of `T`'s shape: `Json<T>` alone would
/// also take an array for a struct (serde reads a struct from a sequence),
/// so `[]` would create a session.
fn object_body<T: serde::de::DeserializeOwned>(
    body: Result<Json<Value>, JsonRejection>,
) -> Result<T, ApiError> {
    let Json(value) = body?;
    if !value.is_object() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!(
                "the request body must be a JSON object, not {}",
                quiver_catalog::bridge::json_type(&value)
            ),
        ));
    }
    serde_json::from_value(value).map_err(|error| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("the request body does not fit: {error}"),
        )
    })
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_query", rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_path", rejection.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": self.code, "message": self.message});
        if let Some(data) = self.data {
            body["data"] = data;
        }
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"quiver\""),
            );
        }
        response
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The router: API under `/v1`, the MCP gateway at `/mcp`, all behind the
/// bearer check. `any_host`: accept any `Host` header on `/mcp` (only when
/// listening beyond loopback on purpose; the token still guards it).
pub fn router(
    daemon: Arc<Daemon>,
    admin_token: &str,
    any_host: bool,
    shutdown: CancellationToken,
) -> Router {
    let console = Arc::new(ConsoleSessions::new(&daemon.config().serve));
    router_with_console(daemon, admin_token, any_host, shutdown, console)
}

/// As [`router`], with the console's sessions made by the caller (which
/// keeps them to make the one-time sign-in link).
pub fn router_with_console(
    daemon: Arc<Daemon>,
    admin_token: &str,
    any_host: bool,
    shutdown: CancellationToken,
    console: Arc<ConsoleSessions>,
) -> Router {
    let state = ApiState {
        daemon: daemon.clone(),
        admin_digest: auth::digest(admin_token).into(),
        console,
        shutdown: shutdown.clone(),
    };
    let mut mcp_config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(shutdown);
    if any_host {
        mcp_config = mcp_config.disable_allowed_hosts();
    }
    let mcp: StreamableHttpService<GatewayHandler, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(GatewayHandler::http(daemon.clone())),
            Default::default(),
            mcp_config,
        );
    Router::new()
        .route("/", get(console_asset))
        .route("/console/{file}", get(console_asset))
        .route("/v1/console/sign-in", post(sign_in))
        .route("/v1/console/sign-out", post(sign_out))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/v1/health", get(health))
        .route("/v1/status", get(status))
        .route("/v1/status/events", get(status_events))
        .route("/v1/savings", get(savings))
        .route("/v1/reload", post(reload))
        .route("/v1/sessions", get(list_sessions).post(create_session))
        .route(
            "/v1/sessions/{id}",
            get(get_session)
                .patch(update_session)
                .delete(delete_session),
        )
        .route(
            "/v1/sessions/{id}/messages",
            post(post_message).get(get_messages),
        )
        .route("/v1/sessions/{id}/events", get(session_events))
        .route("/v1/sessions/{id}/catalog", get(session_catalog))
        .route("/v1/sessions/{id}/catalog/search", get(session_search))
        .route("/v1/sessions/{id}/catalog/describe", get(session_describe))
        .route("/v1/events", get(all_events))
        .route("/v1/catalog", get(catalog))
        .route("/v1/catalog/search", get(catalog_search))
        .route("/v1/catalog/describe", get(catalog_describe))
        .route("/v1/mcp/servers/{name}/accept", post(accept_tools))
        .route("/v1/approvals", get(list_approvals))
        .route("/v1/approvals/{id}", post(answer_approval))
        .route("/v1/gateway/clients", get(list_clients).post(create_client))
        .route(
            "/v1/gateway/clients/{name}",
            axum::routing::delete(delete_client),
        )
        .nest_service(
            "/mcp",
            Router::new()
                .fallback_service(mcp)
                .layer(axum::middleware::from_fn_with_state(
                    state.daemon.config().serve.max_body_bytes,
                    mcp_messages,
                )),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
        .layer(axum::middleware::from_fn(json_errors))
        .with_state(state)
}

/// The JSON-RPC answers of `/mcp` that rmcp's transport gives in other
/// shapes: a body that is not JSON is `400` with a `-32700` parse error,
/// JSON that is not a JSON-RPC message `400` with `-32600` (rmcp answers
/// both `415` in plain text); a session's DELETE is `204` (rmcp answers
/// `202`, which SDKs warn about).
async fn mcp_messages(
    State(max_body_bytes): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    if method == axum::http::Method::DELETE {
        let mut response = next.run(request).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
            *response.body_mut() = axum::body::Body::empty();
        }
        return response;
    }
    let is_json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
        });
    if method != axum::http::Method::POST || !is_json {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, max_body_bytes).await else {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is over serve.max_body_bytes ({max_body_bytes} bytes)"),
        )
        .into_response();
    };
    if jsonrpc::is_not_json(&bytes) {
        return jsonrpc_error(&bytes);
    }
    let request = Request::from_parts(parts, axum::body::Body::from(bytes.clone()));
    let response = next.run(request).await;
    // rmcp's answer to a body that does not read as a message.
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return jsonrpc_error(&bytes);
    }
    response
}

/// `400` with the JSON-RPC error for a body that is not a message.
fn jsonrpc_error(body: &[u8]) -> Response {
    let (id, error) = jsonrpc::unreadable_message(body).unwrap_or_else(|| {
        (
            None,
            rmcp::ErrorData::invalid_request("invalid request: the message was refused", None),
        )
    });
    tracing::debug!(code = error.code.0, message = %error.message, "an MCP request body was refused");
    (
        StatusCode::BAD_REQUEST,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        jsonrpc::error_response(id, &error),
    )
        .into_response()
}

/// Largest error body reshaped by [`json_errors`]; a longer one is cut.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Every error answer is in the API's JSON shape, whoever made it (the MCP
/// transport answers some in plain text, axum's body limit too): a `4xx` or
/// `5xx` that is not JSON becomes `{"error": CODE, "message": TEXT}`, its
/// status and headers kept.
async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, ERROR_BODY_LIMIT).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let code = match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::NOT_ACCEPTABLE => "not_acceptable",
        StatusCode::CONFLICT => "conflict",
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "bad_request",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        _ if status.is_client_error() => "bad_request",
        _ => "internal_error",
    };
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("request failed")
            .to_owned()
    } else {
        text
    };
    let body = json!({"error": code, "message": message}).to_string();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

async fn method_not_allowed(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} is not allowed on {}",
            request.method(),
            request.uri().path()
        ),
    )
}

async fn not_found(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route {} {}", request.method(), request.uri().path()),
    )
}

/// The bearer check: the daemon's token everywhere, a gateway client's
/// token on `/mcp` only. Puts the caller (and on `/mcp` its
/// [`GatewayIdentity`]) in the request's extensions.
async fn authenticate(State(state): State<ApiState>, mut request: Request, next: Next) -> Response {
    // Probes of load balancers, watchdogs and containers carry no token.
    if matches!(request.uri().path(), "/healthz" | "/readyz") {
        return next.run(request).await;
    }
    // The console's files hold no data, and sign-in checks its own token.
    let path = request.uri().path();
    if path == "/" || path.starts_with("/console/") || path == "/v1/console/sign-in" {
        return next.run(request).await;
    }
    if request.uri().path() == "/metrics"
        && state.daemon.config().serve.metrics_without_token
        && request
            .extensions()
            .get::<crate::http::PeerAddr>()
            .is_some_and(|peer| peer.0.ip().is_loopback())
    {
        return next.run(request).await;
    }
    let token = auth::bearer(
        request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
    );
    let on_gateway = request.uri().path() == "/mcp" || request.uri().path().starts_with("/mcp/");
    if token.is_none()
        && !on_gateway
        && let Some(digest) =
            console::cookie_value(request.headers()).and_then(|id| state.console.check(&id))
    {
        if console::changes_state(request.method())
            && let Err(error) = console::check_origin(request.headers())
        {
            return error.into_response();
        }
        request.extensions_mut().insert(CookieSession(digest));
        request.extensions_mut().insert(Caller::Admin);
        request.extensions_mut().insert(GatewayIdentity {
            client: ADMIN_CLIENT.to_owned(),
            grants: state.daemon.config().gateway.grants.clone(),
        });
        return next.run(request).await;
    }
    let Some(token) = token else {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send Authorization: Bearer TOKEN (the token is in the state directory's `token` file)",
        )
        .into_response();
    };
    let digest = auth::digest(token);
    let caller = if digest == *state.admin_digest {
        Caller::Admin
    } else if token.starts_with(CLIENT_TOKEN_PREFIX) {
        match state.daemon.store().gateway_client_by_token(&digest).await {
            Ok(Some(client)) => Caller::GatewayClient {
                name: client.name,
                grants: client.grants,
            },
            Ok(None) => return unauthorized(),
            Err(error) => return ApiError::from(error).into_response(),
        }
    } else {
        return unauthorized();
    };
    let identity = match (&caller, on_gateway) {
        (Caller::Admin, _) => GatewayIdentity {
            client: ADMIN_CLIENT.to_owned(),
            grants: state.daemon.config().gateway.grants.clone(),
        },
        (Caller::GatewayClient { name, grants }, true) => GatewayIdentity {
            client: name.clone(),
            grants: grants.clone(),
        },
        (Caller::GatewayClient { name, .. }, false) => {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("gateway client `{name}`'s token opens /mcp only"),
            )
            .into_response();
        }
    };
    request.extensions_mut().insert(caller);
    request.extensions_mut().insert(identity);
    next.run(request).await
}

fn unauthorized() -> Response {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "unknown token").into_response()
}

async fn console_asset(request: Request) -> Response {
    console::asset(request.uri().path()).unwrap_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no console file {}", request.uri().path()),
        )
        .into_response()
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    /// The daemon's token.
    token: Option<String>,
    /// Or the one-time code of the link `quiver serve` printed.
    once: Option<String>,
}

/// Trades the daemon's token for a console session cookie. Sign-in comes
/// from the console's page, so it needs the same-origin `Origin` too (a
/// foreign page cannot sign the browser in to its own daemon).
async fn sign_in(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult<Response> {
    console::check_origin(&headers)?;
    let body: SignIn = object_body(body)?;
    let token = match (&body.token, &body.once) {
        (None, Some(code)) if state.console.redeem(code.trim()) => None,
        (None, Some(_)) => {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "the sign-in link was used already or has expired; sign in with the daemon's token",
            ));
        }
        (Some(token), None) => Some(token.trim()),
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "send {\"token\": TOKEN} (or the one-time link's {\"once\": CODE})",
            ));
        }
    };
    if let Some(token) = token {
        check_sign_in_token(&state, token)?;
    }
    let id = state.console.start();
    let mut response = Json(json!({
        "signed_in": true,
        "expires_in_s": state.console.session_lifetime().as_secs(),
    }))
    .into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        console::session_cookie(&id, state.console.session_lifetime()),
    );
    Ok(response)
}

/// Only the daemon's own token signs in; a gateway client's is refused by
/// name, so the operator knows which token to paste instead.
fn check_sign_in_token(state: &ApiState, token: &str) -> ApiResult<()> {
    if token.starts_with(CLIENT_TOKEN_PREFIX) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "client_token",
            "a gateway client's token opens /mcp only; sign in with the daemon's token (the state directory's `token` file)",
        ));
    }
    if auth::digest(token) != *state.admin_digest {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unknown token",
        ));
    }
    Ok(())
}

/// Ends the cookie's session on the server and clears the cookie.
async fn sign_out(
    State(state): State<ApiState>,
    session: Option<axum::Extension<CookieSession>>,
) -> Response {
    if let Some(axum::Extension(CookieSession(digest))) = session {
        state.console.end(&digest);
    }
    let mut response = Json(json!({"signed_in": false})).into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, console::removal_cookie());
    response
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(state): State<ApiState>) -> Response {
    // Nothing can be served without the store: sessions, the log and
    // approvals all live there.
    if let Err(error) = state.daemon.store().ping().await {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "error": error.code(),
                "message": error.to_string(),
                "data": {"store": state.daemon.store().location()},
            })),
        )
            .into_response();
    }
    let waiting = state.daemon.waiting_for();
    if waiting.is_empty() {
        // Ready means searches find every registered tool: the answer
        // waits (briefly) for the background indexing of the last change.
        let generation = state.daemon.registry().snapshot().generation();
        state.daemon.search_ready(generation).await;
        if let Some((ready, total)) = state.daemon.waiting_for_embeddings() {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({
                    "error": "not_ready",
                    "message": format!(
                        "{ready} of {total} tools embedded; tools.tool_search.embeddings.readiness_waits holds readiness until every vector is ready"
                    ),
                    "data": {"embedded": {"ready": ready, "total": total}},
                })),
            )
                .into_response();
        }
        return Json(json!({"status": "ready"})).into_response();
    }
    let servers = state.daemon.mcp().status().len();
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({
            "error": "not_ready",
            "message": format!(
                "{} of {servers} MCP servers are still on their first connection attempt (GET /v1/status names them)",
                waiting.len()
            ),
            "data": {"waiting": waiting.len(), "servers": servers},
        })),
    )
        .into_response()
}

async fn metrics_text() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        crate::telemetry::render(),
    )
        .into_response()
}

async fn health(State(state): State<ApiState>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "tools": state.daemon.registry().snapshot().len(),
    }))
}

async fn status(State(state): State<ApiState>) -> ApiResult<Json<Value>> {
    Ok(Json(state.daemon.status().await?))
}

/// How often a status stream compares the plugins' and servers' state.
const STATUS_CHECK_EVERY: Duration = Duration::from_secs(1);

/// The plugins (generation, tools, health, last error), MCP servers
/// (state, reconnects, error) and, with a shared store, every instance
/// (running or why it stopped, approvals waiting on it) as `event:
/// status`, at once and then each time they change (checked every [`STATUS_CHECK_EVERY`]), until the
/// server stops: the console's Health page shows hot-reloads as they
/// happen.
async fn status_events(
    State(state): State<ApiState>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let daemon = state.daemon.clone();
    let mut ticks = tokio::time::interval(STATUS_CHECK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stream = futures_util::stream::unfold(
        (daemon, ticks, String::new()),
        |(daemon, mut ticks, mut last)| async move {
            loop {
                ticks.tick().await;
                let mut now = json!({
                    "generation": daemon.registry().snapshot().generation(),
                    "plugins": daemon.plugins().list_json(),
                    "mcp_servers": daemon.mcp_status(),
                });
                // A shared store: the other instances, and what waits on each.
                if daemon.store().is_shared() {
                    now["instances"] = daemon.instances_json().await;
                }
                let now = now.to_string();
                if now != last {
                    last.clone_from(&now);
                    let event = SseEvent::default().event("status").data(now);
                    return Some((Ok(event), (daemon, ticks, last)));
                }
            }
        },
    )
    .take_until(state.shutdown.cancelled_owned());
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// The savings and activity totals over the daemon's life (see
/// [`crate::savings`]), and the totals now.
async fn savings(State(state): State<ApiState>) -> ApiResult<Json<Value>> {
    // Every instance's latest stored totals (one with the embedded store).
    let instances = state.daemon.store().latest_savings().await?;
    Ok(Json(json!({
        "sample_every_s": crate::savings::SAMPLE_EVERY.as_secs(),
        "instance": state.daemon.instance().id,
        "points": state.daemon.savings().points(),
        "now": crate::savings::Point::now(),
        "instances": instances,
    })))
}

async fn reload(State(state): State<ApiState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(state.daemon.reload().await?)))
}

async fn list_sessions(State(state): State<ApiState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!({"sessions": state.daemon.sessions().await?})))
}

async fn create_session(
    State(state): State<ApiState>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let request: NewSession = object_body(body)?;
    let record = state.daemon.create_session(request).await?;
    Ok((StatusCode::CREATED, Json(json!(record))))
}

async fn update_session(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult<Json<Value>> {
    let Path(id) = path?;
    let change: SessionChange = object_body(body)?;
    Ok(Json(json!(state.daemon.update_session(&id, change).await?)))
}

async fn delete_session(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let Path(id) = path?;
    Ok(Json(
        json!({"deleted": state.daemon.delete_session(&id).await?}),
    ))
}

async fn get_session(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let Path(id) = path?;
    let messages = state.daemon.messages(&id).await?;
    let record = state.daemon.store().session(&id).await?;
    Ok(Json(json!({"session": record, "messages": messages})))
}

async fn get_messages(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let Path(id) = path?;
    Ok(Json(json!({"messages": state.daemon.messages(&id).await?})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostMessage {
    #[serde(default)]
    content: String,
    /// MCP resources to read into the message (gateway names).
    #[serde(default)]
    resources: Vec<String>,
    /// An MCP prompt to render at its start.
    #[serde(default)]
    prompt: Option<super::attachments::PromptRequest>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PostMessageQuery {
    /// Answer as server-sent events while the turn runs.
    #[serde(default)]
    stream: bool,
}

async fn post_message(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<PostMessageQuery>, QueryRejection>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult<Response> {
    let Path(id) = path?;
    let Query(query) = query?;
    let message: PostMessage = object_body(body)?;
    let attachments = super::attachments::Attachments {
        resources: message.resources,
        prompt: message.prompt,
    };
    if message.content.trim().is_empty() && attachments.prompt.is_none() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "`content` is empty (and no `prompt` is attached)",
        ));
    }
    let content = state
        .daemon
        .compose_message(&id, message.content, &attachments)
        .await?;
    if !query.stream {
        let outcome = state.daemon.run_turn(&id, content).await?;
        return Ok(Json(json!(outcome)).into_response());
    }
    // Subscribed before the turn starts, so that none of it is missed.
    let items = state.daemon.subscribe_turns();
    let task = state.daemon.start_turn(&id, content).await?;
    let events = TurnEvents {
        session: id,
        items: Some(items),
        task: Some(task),
        tail: std::collections::VecDeque::new(),
    };
    let stream = futures_util::stream::unfold(events, |mut events| async move {
        let event = events.next().await?;
        Some((Ok::<_, Infallible>(event), events))
    })
    .take_until(state.shutdown.cancelled_owned());
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// One streamed turn as server-sent events: its items as they happen,
/// then `turn.done` (or `error`), then the end. A client that goes away
/// drops only this; the turn runs on and is stored.
struct TurnEvents {
    session: String,
    /// `None` once the channel closed (the daemon is going away).
    items: Option<tokio::sync::broadcast::Receiver<Arc<TurnItem>>>,
    task: Option<tokio::task::JoinHandle<Result<quiver_agent::TurnOutcome, DaemonError>>>,
    /// What is left to send once the turn ended.
    tail: std::collections::VecDeque<SseEvent>,
}

impl TurnEvents {
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            let Some(task) = self.task.as_mut() else {
                return self.tail.pop_front();
            };
            let received = match self.items.as_mut() {
                Some(items) => tokio::select! {
                    // Items first: everything the turn produced goes out
                    // before its end.
                    biased;
                    item = items.recv() => Some(item),
                    ended = task => { self.finish(ended); None }
                },
                None => {
                    let ended = task.await;
                    self.finish(ended);
                    None
                }
            };
            match received {
                Some(Ok(item)) if item.session == self.session => {
                    return Some(turn_item_event(&item));
                }
                Some(Ok(_)) | None => {}
                Some(Err(tokio::sync::broadcast::error::RecvError::Lagged(lost))) => {
                    return Some(
                        SseEvent::default()
                            .event("lagged")
                            .data(json!({"lost": lost}).to_string()),
                    );
                }
                Some(Err(tokio::sync::broadcast::error::RecvError::Closed)) => self.items = None,
            }
        }
    }

    /// The turn ended: what it produced and nobody read yet, then its
    /// outcome.
    fn finish(
        &mut self,
        ended: Result<Result<quiver_agent::TurnOutcome, DaemonError>, tokio::task::JoinError>,
    ) {
        self.task = None;
        if let Some(items) = self.items.as_mut() {
            // The turn's task sent everything before it ended.
            while let Ok(item) = items.try_recv() {
                if item.session == self.session {
                    self.tail.push_back(turn_item_event(&item));
                }
            }
        }
        let last = match ended {
            Ok(Ok(outcome)) => SseEvent::default()
                .event(turn_stream::TURN_DONE)
                .data(json!(outcome).to_string()),
            Ok(Err(error)) => turn_error_event(ApiError::from(error)),
            Err(error) => turn_error_event(ApiError::from(DaemonError::TurnAborted {
                session: self.session.clone(),
                detail: error.to_string(),
            })),
        };
        self.tail.push_back(last);
    }
}

fn turn_item_event(item: &TurnItem) -> SseEvent {
    SseEvent::default()
        .event(item.event)
        .data(item.data.to_string())
}

/// `event: error` with the JSON a plain POST would have answered, and its
/// HTTP status.
fn turn_error_event(error: ApiError) -> SseEvent {
    SseEvent::default().event(turn_stream::TURN_ERROR).data(
        json!({"error": error.code, "message": error.message, "status": error.status.as_u16()})
            .to_string(),
    )
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    after: Option<i64>,
}

fn replay_from(query: &EventsQuery, headers: &HeaderMap) -> Option<i64> {
    query.after.or_else(|| {
        headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok())
    })
}

async fn session_events(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<EventsQuery>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    let Path(id) = path?;
    let Query(query) = query?;
    state.daemon.session(&id).await?;
    let after = replay_from(&query, &headers);
    events_stream(&state.daemon, Some(id), after, state.shutdown.clone()).await
}

async fn all_events(
    State(state): State<ApiState>,
    query: Result<Query<EventsQuery>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    let Query(query) = query?;
    let after = replay_from(&query, &headers);
    events_stream(&state.daemon, None, after, state.shutdown.clone()).await
}

/// Where an event stream stands: the log to replay, then the live feed.
/// Where a feed reads stored records: the store, in production.
#[async_trait::async_trait]
trait StoredRecords: Send + Sync + 'static {
    /// Up to `limit` records after id `after`, oldest first.
    async fn after(
        &self,
        session: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError>;
}

#[async_trait::async_trait]
impl StoredRecords for Arc<dyn Store> {
    async fn after(
        &self,
        session: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.events(session, after, limit).await
    }
}

/// One client's activity feed: stored records after its starting point,
/// page by page, then live ones. When a page comes back full, or the live
/// channel drops records because the client fell behind, it reads the
/// store again from the last record sent (the persister stores a record
/// before it is broadcast), so the stream has no gaps and no repeats.
struct EventFeed<S> {
    stored: S,
    page_size: usize,
    replay: std::vec::IntoIter<EventRecord>,
    /// The store may hold records after `last` not yet sent.
    more_stored: bool,
    live: tokio::sync::broadcast::Receiver<Arc<EventRecord>>,
    session: Option<String>,
    /// The id of the last record sent (or where the feed started).
    last: i64,
}

impl<S: StoredRecords> EventFeed<S> {
    /// A feed from id `after`, or from the newest stored record `now` when
    /// `after` is `None`; `live` must be subscribed before `now` is read.
    fn new(
        stored: S,
        page_size: usize,
        live: tokio::sync::broadcast::Receiver<Arc<EventRecord>>,
        session: Option<String>,
        after: Option<i64>,
        now: i64,
    ) -> Self {
        EventFeed {
            stored,
            page_size,
            replay: Vec::new().into_iter(),
            more_stored: after.is_some(),
            live,
            session,
            last: after.unwrap_or(now),
        }
    }

    async fn next(&mut self) -> Option<Arc<EventRecord>> {
        loop {
            if let Some(record) = self.replay.next() {
                self.last = self.last.max(record.id);
                return Some(Arc::new(record));
            }
            if self.more_stored {
                match self
                    .stored
                    .after(self.session.as_deref(), self.last, self.page_size)
                    .await
                {
                    Ok(page) => {
                        self.more_stored = page.len() >= self.page_size;
                        self.replay = page.into_iter();
                    }
                    Err(error) => {
                        tracing::warn!(%error, "an event stream could not read the log; going on live");
                        self.more_stored = false;
                    }
                }
                continue;
            }
            match self.live.recv().await {
                Ok(record) => {
                    let wanted = self.session.as_deref().is_none_or(|s| s == record.session);
                    // Ids at or below `last` were sent from the store.
                    if wanted && (record.id == 0 || record.id > self.last) {
                        self.last = self.last.max(record.id);
                        return Some(record);
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(lost)) => {
                    tracing::debug!(lost, "an event stream fell behind; reading the log");
                    self.more_stored = true;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

fn sse_event(record: &EventRecord) -> SseEvent {
    let event = SseEvent::default()
        .event("activity")
        .data(json!(record).to_string());
    if record.id > 0 {
        event.id(record.id.to_string())
    } else {
        event
    }
}

/// Stored events after `after` (when given), then live ones, each once,
/// as `event: activity` with the log id as the SSE id, until `shutdown`
/// fires.
async fn events_stream(
    daemon: &Daemon,
    session: Option<String>,
    after: Option<i64>,
    shutdown: CancellationToken,
) -> ApiResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>> + use<>>> {
    // Subscribed before reading the log, so nothing falls between the two.
    let live = daemon.subscribe_records();
    let now = match after {
        Some(_) => 0,
        None => daemon.store().last_event_id().await?,
    };
    let feed = EventFeed::new(
        daemon.store().clone(),
        REPLAY_PAGE,
        live,
        session,
        after,
        now,
    );
    // A session's feed carries its turns' messages too, where they happened
    // among its activity.
    let messages = feed
        .session
        .clone()
        .map(|session| (daemon.subscribe_turns(), OrderedMessages::new(session)));
    let stream = SessionStream {
        feed,
        messages,
        pending: None,
    };
    let stream = futures_util::stream::unfold(stream, |mut stream| async move {
        let event = stream.next().await?;
        Some((Ok(event), stream))
    })
    .take_until(shutdown.cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// An event stream: the activity records of [`EventFeed`], and for a
/// session's feed its turns' `message.delta` and `message.done` items put
/// in their place among them.
struct SessionStream<S> {
    feed: EventFeed<S>,
    messages: Option<(
        tokio::sync::broadcast::Receiver<Arc<TurnItem>>,
        OrderedMessages,
    )>,
    /// A record read from the feed and not sent yet: the items already
    /// in the channel go first.
    pending: Option<Arc<EventRecord>>,
}

impl<S: StoredRecords> SessionStream<S> {
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            let Some((items, order)) = self.messages.as_mut() else {
                if let Some(record) = self.pending.take() {
                    return Some(sse_event(&record));
                }
                return self.feed.next().await.map(|record| sse_event(&record));
            };
            // A turn sends its items before the activity that follows them
            // reaches the log, so every item that came before a record is
            // in the channel by the time the record is read.
            let mut closed = false;
            loop {
                match items.try_recv() {
                    Ok(item) => order.item(item),
                    Err(tokio::sync::broadcast::error::TryRecvError::Lagged(lost)) => {
                        tracing::debug!(lost, "a session feed fell behind on turn messages");
                    }
                    Err(tokio::sync::broadcast::error::TryRecvError::Closed) => {
                        closed = true;
                        break;
                    }
                    Err(tokio::sync::broadcast::error::TryRecvError::Empty) => break,
                }
            }
            if let Some(item) = order.ready() {
                return Some(turn_item_event(&item));
            }
            if let Some(record) = self.pending.take() {
                order.record_sent(&record);
                return Some(sse_event(&record));
            }
            if closed {
                self.messages = None;
                continue;
            }
            let deadline = order.deadline();
            tokio::select! {
                record = self.feed.next() => self.pending = Some(record?),
                item = items.recv() => match item {
                    Ok(item) => order.item(item),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(lost)) => {
                        tracing::debug!(lost, "a session feed fell behind on turn messages");
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => self.messages = None,
                },
                () = wait_until(deadline) => {}
            }
        }
    }
}

/// Sleeps until `deadline`; for ever without one.
async fn wait_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CatalogQuery {
    context_tokens: Option<u64>,
    grant: Option<String>,
}

async fn session_catalog(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<CatalogQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Path(id) = path?;
    let Query(query) = query?;
    let live = state.daemon.session(&id).await?;
    let context = query.context_tokens.unwrap_or(live.record.context_tokens);
    let assembly = state.daemon.assemble(&live.session, context);
    let mut out = assembly.to_json();
    out["session"] = json!(id);
    out["listing"] = json!(assembly.listing().text);
    Ok(Json(out))
}

async fn catalog(
    State(state): State<ApiState>,
    query: Result<Query<CatalogQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(query) = query?;
    let scope = grant_scope(query.grant.as_deref())?;
    let context = query
        .context_tokens
        .unwrap_or(state.daemon.config().gateway.context_tokens);
    let assembly = state.daemon.assemble_scope(&scope, context);
    let mut out = assembly.to_json();
    out["listing"] = json!(assembly.listing().text);
    Ok(Json(out))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchQuery {
    query: String,
    limit: Option<i64>,
    context_tokens: Option<u64>,
    grant: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescribeQuery {
    name: String,
    context_tokens: Option<u64>,
    grant: Option<String>,
}

/// The bridge answer of `tool` with `arguments` in `session`'s view, as
/// the model gets it (through the dispatcher's own search and describe),
/// without recording a call.
async fn session_bridge(
    state: &ApiState,
    session: &str,
    context_tokens: Option<u64>,
    tool: &str,
    arguments: &Value,
) -> ApiResult<Json<Value>> {
    let live = state.daemon.session(session).await?;
    let context = context_tokens.unwrap_or(live.record.context_tokens);
    let assembly = state.daemon.assemble(&live.session, context);
    state
        .daemon
        .dispatcher()
        .bridge_answer(live.session.scope(), &assembly, tool, arguments)
        .map(Json)
        .map_err(bridge_error)
}

/// As [`session_bridge`], in the view of a grant (`*` without one).
fn scope_bridge(
    state: &ApiState,
    grant: Option<&str>,
    context_tokens: Option<u64>,
    tool: &str,
    arguments: &Value,
) -> ApiResult<Json<Value>> {
    let scope = grant_scope(grant)?;
    let context = context_tokens.unwrap_or(state.daemon.config().gateway.context_tokens);
    let assembly = state.daemon.assemble_scope(&scope, context);
    state
        .daemon
        .dispatcher()
        .bridge_answer(&scope, &assembly, tool, arguments)
        .map(Json)
        .map_err(bridge_error)
}

fn bridge_error(error: quiver_catalog::bridge::BridgeError) -> ApiError {
    let mut api = ApiError::new(StatusCode::BAD_REQUEST, "bad_request", error.to_string());
    api.data = Some(error.to_json());
    api
}

fn search_arguments(query: &str, limit: Option<i64>) -> Value {
    match limit {
        Some(limit) => json!({"query": query, "limit": limit}),
        None => json!({"query": query}),
    }
}

async fn session_search(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<SearchQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Path(id) = path?;
    let Query(query) = query?;
    session_bridge(
        &state,
        &id,
        query.context_tokens,
        quiver_catalog::bridge::TOOL_SEARCH,
        &search_arguments(&query.query, query.limit),
    )
    .await
}

async fn catalog_search(
    State(state): State<ApiState>,
    query: Result<Query<SearchQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(query) = query?;
    scope_bridge(
        &state,
        query.grant.as_deref(),
        query.context_tokens,
        quiver_catalog::bridge::TOOL_SEARCH,
        &search_arguments(&query.query, query.limit),
    )
}

async fn session_describe(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<DescribeQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Path(id) = path?;
    let Query(query) = query?;
    session_bridge(
        &state,
        &id,
        query.context_tokens,
        quiver_catalog::bridge::TOOL_DESCRIBE,
        &json!({"name": query.name}),
    )
    .await
}

async fn catalog_describe(
    State(state): State<ApiState>,
    query: Result<Query<DescribeQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(query) = query?;
    scope_bridge(
        &state,
        query.grant.as_deref(),
        query.context_tokens,
        quiver_catalog::bridge::TOOL_DESCRIBE,
        &json!({"name": query.name}),
    )
}

/// The scope of a `?grant=a,b` (everything without one).
fn grant_scope(grant: Option<&str>) -> ApiResult<Scope> {
    let grants: Vec<String> = match grant {
        Some(text) => text
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_owned)
            .collect(),
        None => vec!["*".to_owned()],
    };
    Ok(Scope::new(grants).map_err(DaemonError::from)?)
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ApprovalsQuery {
    session: Option<String>,
}

async fn list_approvals(
    State(state): State<ApiState>,
    query: Result<Query<ApprovalsQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(query) = query?;
    let session = query.session.as_deref();
    let approvals = state.daemon.approvals();
    let pending: Vec<Value> = approvals
        .pending(session)
        .await?
        .iter()
        .map(crate::approvals::pending_json)
        .collect();
    // Who answered the latest requests, newest first: a client that shows
    // a request answered elsewhere says by whom.
    let answered: Vec<Value> = approvals
        .closed(session, ANSWERED_SHOWN)
        .await?
        .iter()
        .map(crate::approvals::answered_json)
        .collect();
    Ok(Json(json!({"approvals": pending, "answered": answered})))
}

/// Answered approvals `GET /v1/approvals` lists.
const ANSWERED_SHOWN: usize = 50;

/// Longest name an answering program may give itself (`client`).
const MAX_CLIENT_NAME: usize = 64;

/// Who answers through the API: the console (its cookie), the program
/// that named itself with `client` (such as `quiver chat`), else `api`
/// (the daemon's token); a gateway client by its name.
fn answerer(caller: Option<&Caller>, cookie: bool, client: Option<&str>) -> ApiResult<String> {
    if let Some(Caller::GatewayClient { name, .. }) = caller {
        return Ok(format!("gateway client {name}"));
    }
    if cookie {
        return Ok("console".to_owned());
    }
    match client.map(str::trim) {
        None => Ok("api".to_owned()),
        Some(name)
            if !name.is_empty()
                && name.chars().count() <= MAX_CLIENT_NAME
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || " -_.".contains(c)) =>
        {
            Ok(name.to_owned())
        }
        Some(name) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!(
                "`client` names the answering program: 1 to {MAX_CLIENT_NAME} letters, digits, spaces, `-`, `_` or `.`, not `{name}`"
            ),
        )),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum DecisionWord {
    Approve,
    ApproveForSession,
    Deny,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    decision: DecisionWord,
    reason: Option<String>,
    digest: Option<String>,
    /// The answering program's name for itself (`quiver chat`).
    client: Option<String>,
}

async fn answer_approval(
    State(state): State<ApiState>,
    caller: Option<axum::Extension<Caller>>,
    cookie: Option<axum::Extension<CookieSession>>,
    path: Result<Path<i64>, PathRejection>,
    body: Result<Json<Answer>, JsonRejection>,
) -> ApiResult<Json<Value>> {
    let Path(id) = path?;
    let Json(answer) = body?;
    let by = answerer(
        caller.as_ref().map(|c| &c.0),
        cookie.is_some(),
        answer.client.as_deref(),
    )?;
    let decision = match answer.decision {
        DecisionWord::Approve => Decision::Approve,
        DecisionWord::ApproveForSession => Decision::ApproveForSession,
        DecisionWord::Deny => Decision::Deny {
            reason: answer
                .reason
                .unwrap_or_else(|| "denied through the API".to_owned()),
        },
    };
    let answered = state
        .daemon
        .approvals()
        .answer(id, answer.digest.as_deref(), &decision, &by)
        .await
        .map_err(|error| match error {
            AnswerError::Unknown(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "not_pending", error.to_string())
            }
            // Still `not_pending` (the request is gone), with who answered
            // or why it ended.
            AnswerError::Closed(ref first) => {
                let mut api_error =
                    ApiError::new(StatusCode::NOT_FOUND, "not_pending", error.to_string());
                api_error.data = Some(crate::approvals::answered_json(first));
                api_error
            }
            AnswerError::DigestMismatch { .. } => {
                ApiError::new(StatusCode::CONFLICT, "digest_mismatch", error.to_string())
            }
            AnswerError::Store(error) => ApiError::from(error),
        })?;
    let answered_ms = answered.closed_ms;
    Ok(Json(
        json!({"id": id, "answered": true, "answered_by": by, "answered_ms": answered_ms}),
    ))
}

/// What `POST /v1/mcp/servers/{name}/accept` takes: the quarantined
/// tools to accept (the server's own names); absent or empty: all of them.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AcceptBody {
    #[serde(default)]
    tools: Vec<String>,
}

async fn accept_tools(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult<Json<Value>> {
    let Path(server) = path?;
    let body: AcceptBody = object_body(body)?;
    Ok(Json(state.daemon.accept_tools(&server, &body.tools).await?))
}

async fn list_clients(State(state): State<ApiState>) -> ApiResult<Json<Value>> {
    Ok(Json(
        json!({"clients": state.daemon.store().gateway_clients().await?}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewClient {
    name: String,
    #[serde(alias = "toolsets")]
    grants: Vec<String>,
}

async fn create_client(
    State(state): State<ApiState>,
    body: Result<Json<NewClient>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let Json(client) = body?;
    if !quiver_tool::naming::is_valid_plain_name(&client.name)
        || RESERVED_CLIENTS.contains(&client.name.as_str())
    {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!(
                "client name `{}` is not valid: use 1 to 64 characters from [A-Za-z0-9_-], not {}",
                client.name,
                RESERVED_CLIENTS.map(|n| format!("`{n}`")).join(" or ")
            ),
        ));
    }
    Scope::new(client.grants.iter().cloned()).map_err(DaemonError::from)?;
    state.daemon.check_grants(&client.grants)?;
    let token = format!("{CLIENT_TOKEN_PREFIX}{}", auth::random_hex(32));
    let stored = state
        .daemon
        .store()
        .add_gateway_client(&client.name, &auth::digest(&token), &client.grants)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "name": stored.name,
            "grants": stored.grants,
            "created_ms": stored.created_ms,
            "token": token,
        })),
    ))
}

async fn delete_client(
    State(state): State<ApiState>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    let Path(name) = path?;
    if state.daemon.store().remove_gateway_client(&name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_client",
            format!("no gateway client `{name}`"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use quiver_dispatch::Status;

    /// A log in memory, as the store keeps it.
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<EventRecord>>>);

    #[async_trait::async_trait]
    impl StoredRecords for Log {
        async fn after(
            &self,
            session: Option<&str>,
            after: i64,
            limit: usize,
        ) -> Result<Vec<EventRecord>, StoreError> {
            let log = self.0.lock().unwrap();
            Ok(log
                .iter()
                .filter(|r| r.id > after && session.is_none_or(|s| s == r.session))
                .take(limit)
                .cloned()
                .collect())
        }
    }

    fn record(id: i64, session: &str) -> EventRecord {
        EventRecord {
            id,
            time_ms: 0,
            instance: None,
            session: session.into(),
            call_id: id as u64,
            tool: "echo".into(),
            via_bridge: false,
            arguments: json!({}),
            status: Status::Ok,
            duration_ms: 0,
            detail: None,
            result: None,
            answered_by: None,
            line: String::new(),
        }
    }

    /// Stores and broadcasts `record`, as the persister does.
    fn persist(
        log: &Log,
        live: &tokio::sync::broadcast::Sender<Arc<EventRecord>>,
        record: EventRecord,
    ) {
        log.0.lock().unwrap().push(record.clone());
        let _ = live.send(Arc::new(record));
    }

    async fn ids<S: StoredRecords>(feed: &mut EventFeed<S>, count: usize) -> Vec<i64> {
        let mut ids = Vec::new();
        for _ in 0..count {
            // A record the feed lost would leave it waiting: fail instead.
            let next = tokio::time::timeout(std::time::Duration::from_secs(10), feed.next());
            let record = next.await.expect("the feed lost records").unwrap();
            ids.push(record.id);
        }
        ids
    }

    #[tokio::test]
    async fn a_replay_longer_than_a_page_goes_on_page_by_page_then_live() {
        let log = Log::default();
        let (live, receiver) = tokio::sync::broadcast::channel(16);
        for id in 1..=7 {
            log.0
                .lock()
                .unwrap()
                .push(record(id, if id % 2 == 0 { "a" } else { "b" }));
        }
        let mut feed = EventFeed::new(log.clone(), 3, receiver, None, Some(1), 0);
        assert_eq!(ids(&mut feed, 6).await, [2, 3, 4, 5, 6, 7]);
        persist(&log, &live, record(8, "a"));
        assert_eq!(ids(&mut feed, 1).await, [8]);
    }

    #[tokio::test]
    async fn a_feed_that_falls_behind_reads_the_log_and_repeats_nothing() {
        let log = Log::default();
        // Room for two records: a slow reader loses the rest from the channel.
        let (live, receiver) = tokio::sync::broadcast::channel(2);
        persist(&log, &live, record(1, "a"));
        // Live only: it starts at the newest stored record.
        let mut feed = EventFeed::new(log.clone(), 100, receiver, Some("a".into()), None, 1);
        for id in 2..=9 {
            persist(&log, &live, record(id, if id == 5 { "b" } else { "a" }));
        }
        assert_eq!(ids(&mut feed, 7).await, [2, 3, 4, 6, 7, 8, 9]);
        persist(&log, &live, record(10, "a"));
        assert_eq!(ids(&mut feed, 1).await, [10]);
    }
}
