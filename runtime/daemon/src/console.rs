//! The web console: its page and assets (embedded in the binary, served at
//! `/` and `/console/*` without a token, since they hold no data), and its
//! sign-in. The operator signs in with the daemon's token once; the
//! browser then holds a session cookie (HttpOnly, SameSite=Strict, Path=/)
//! naming a server-side session: a random id of which only the sha256 is
//! kept, with an expiry, in memory (a restart signs everyone out). A
//! request carrying the cookie is the admin on the API (never on `/mcp`),
//! and one that changes state must also come with an `Origin` matching its
//! `Host`, so that another site cannot make the browser act for it.
//! `quiver serve` also prints a one-time sign-in link (`/#once=CODE`: the
//! code stays in the fragment, which the browser never sends; the page
//! posts it to sign-in), usable once. Both lifetimes are settings
//! (`serve.console_session_s`, `serve.console_link_s`).

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cookie::{Cookie, SameSite};
use dashmap::DashMap;

use super::api::ApiError;
use super::auth;

/// The session cookie's name.
pub const COOKIE: &str = "quiver_console";

/// Most console sessions kept at once; signing in past that ends the one
/// closest to its expiry, so sign-ins cannot grow the map without bound.
const MAX_SESSIONS: usize = 256;

/// The Content-Security-Policy of the console's page and assets: only its
/// own script and style files (no inline script or style), fetches and
/// event streams to this origin, no frames, no plugins, forms to itself.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../console/index.html");
const APP_JS: &str = include_str!("../console/app.js");
const APP_CSS: &str = include_str!("../console/app.css");

/// The console's signed-in sessions: the sha256 of each cookie's id and
/// when it expires.
#[derive(Debug)]
pub struct ConsoleSessions {
    sessions: DashMap<String, Instant>,
    /// The digest of the one-time sign-in code and its expiry, until used.
    once: std::sync::Mutex<Option<(String, Instant)>>,
    /// How long a session lasts after sign-in.
    session_lifetime: Duration,
    /// How long the one-time code stays usable.
    link_lifetime: Duration,
}

impl Default for ConsoleSessions {
    /// Sessions with the settings' default lifetimes.
    fn default() -> Self {
        ConsoleSessions::new(&crate::settings::ServeConfig::default())
    }
}

/// A request authenticated by a console cookie: the digest of its id (in
/// the request's extensions, so that sign-out ends that session).
#[derive(Debug, Clone)]
pub struct CookieSession(pub String);

impl ConsoleSessions {
    /// No sessions yet; lifetimes from `serve` (`console_session_s`,
    /// `console_link_s`).
    pub fn new(serve: &crate::settings::ServeConfig) -> ConsoleSessions {
        ConsoleSessions {
            sessions: DashMap::new(),
            once: std::sync::Mutex::new(None),
            session_lifetime: serve.console_session,
            link_lifetime: serve.console_link,
        }
    }

    /// How long a session lasts after sign-in.
    pub fn session_lifetime(&self) -> Duration {
        self.session_lifetime
    }

    /// How long the one-time sign-in code stays usable.
    pub fn link_lifetime(&self) -> Duration {
        self.link_lifetime
    }

    /// Starts a session: returns the id for the cookie (the map keeps its
    /// digest only).
    pub fn start(&self) -> String {
        let now = Instant::now();
        self.sessions.retain(|_, expiry| *expiry > now);
        while self.sessions.len() >= MAX_SESSIONS {
            let oldest = self
                .sessions
                .iter()
                .min_by_key(|entry| *entry.value())
                .map(|entry| entry.key().clone());
            match oldest {
                Some(key) => self.sessions.remove(&key),
                None => break,
            };
        }
        let id = auth::random_hex(32);
        self.sessions
            .insert(auth::digest(&id), now + self.session_lifetime);
        id
    }

    /// The digest of `id` when it names a live session.
    pub fn check(&self, id: &str) -> Option<String> {
        let digest = auth::digest(id);
        let live = self
            .sessions
            .get(&digest)
            .is_some_and(|expiry| *expiry > Instant::now());
        if live {
            Some(digest)
        } else {
            self.sessions.remove(&digest);
            None
        }
    }

    /// Makes the one-time sign-in code (replacing any earlier one).
    pub fn one_time_code(&self) -> String {
        let code = auth::random_hex(32);
        *self.lock_once() = Some((auth::digest(&code), Instant::now() + self.link_lifetime));
        code
    }

    /// Uses up the one-time code: whether `code` was it, unexpired.
    pub fn redeem(&self, code: &str) -> bool {
        let mut once = self.lock_once();
        let valid = once.as_ref().is_some_and(|(digest, expiry)| {
            *digest == auth::digest(code) && *expiry > Instant::now()
        });
        if valid {
            *once = None;
        }
        valid
    }

    fn lock_once(&self) -> std::sync::MutexGuard<'_, Option<(String, Instant)>> {
        self.once
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Ends the session of `digest`.
    pub fn end(&self, digest: &str) {
        self.sessions.remove(digest);
    }
}

/// The console cookie's value among a request's `Cookie` headers.
pub fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == COOKIE)
        .map(|c| c.value().to_owned())
}

/// Whether `method` can change state (everything but GET, HEAD, OPTIONS).
pub fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Refuses a request whose `Origin` is missing or is not this daemon's
/// (its scheme-less part must equal the `Host` header): browsers send
/// `Origin` on every request that is not a GET or HEAD, so a missing one
/// is not a same-origin page of the console.
pub fn check_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let same = match (origin, host) {
        (Some(origin), Some(host)) => origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|rest| rest.eq_ignore_ascii_case(host)),
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "bad_origin",
            format!(
                "a request signed in by the console cookie that changes state must come from the console's own origin (Origin {}, Host {})",
                origin.unwrap_or("missing"),
                host.unwrap_or("missing"),
            ),
        ))
    }
}

/// The `Set-Cookie` value that gives the browser session `id` for
/// `lifetime`.
pub fn session_cookie(id: &str, lifetime: Duration) -> HeaderValue {
    let cookie = Cookie::build((COOKIE, id.to_owned()))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/")
        .max_age(cookie::time::Duration::seconds(
            i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX),
        ))
        .build();
    header_value(&cookie)
}

/// The `Set-Cookie` value that makes the browser forget its session.
pub fn removal_cookie() -> HeaderValue {
    let cookie = Cookie::build((COOKIE, ""))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/")
        .max_age(cookie::time::Duration::ZERO)
        .build();
    header_value(&cookie)
}

fn header_value(cookie: &Cookie<'_>) -> HeaderValue {
    // The name is ours and the value hex, so the header is always valid.
    HeaderValue::from_str(&cookie.to_string()).unwrap_or(HeaderValue::from_static(""))
}

/// One of the console's embedded files, by its path (`/` is the page).
pub fn asset(path: &str) -> Option<Response> {
    let (body, kind) = match path {
        "/" | "/index.html" => (INDEX_HTML, "text/html; charset=utf-8"),
        "/console/app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "/console/app.css" => (APP_CSS, "text/css; charset=utf-8"),
        _ => return None,
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // The files change with the binary; a browser must not keep an old one.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_kept_by_digest_and_end() {
        let sessions = ConsoleSessions::default();
        let id = sessions.start();
        assert!(
            !sessions.sessions.contains_key(&id),
            "the id itself is kept"
        );
        let digest = sessions.check(&id).unwrap();
        assert!(sessions.check("nope").is_none());
        sessions.end(&digest);
        assert!(sessions.check(&id).is_none());
    }

    #[test]
    fn lifetimes_come_from_the_settings() {
        let serve = crate::settings::ServeConfig {
            console_session: Duration::from_secs(0),
            console_link: Duration::from_secs(0),
            ..Default::default()
        };
        let sessions = ConsoleSessions::new(&serve);
        let id = sessions.start();
        assert!(
            sessions.check(&id).is_none(),
            "a session outlived its lifetime"
        );
        let code = sessions.one_time_code();
        assert!(!sessions.redeem(&code), "a link outlived its lifetime");
        assert_eq!(
            ConsoleSessions::default().session_lifetime(),
            Duration::from_secs(43200)
        );
    }

    #[test]
    fn the_one_time_code_works_once() {
        let sessions = ConsoleSessions::default();
        assert!(!sessions.redeem("anything"));
        let code = sessions.one_time_code();
        assert!(!sessions.redeem("wrong"));
        assert!(sessions.redeem(&code));
        assert!(!sessions.redeem(&code));
    }

    #[test]
    fn sign_ins_past_the_cap_end_the_oldest() {
        let sessions = ConsoleSessions::default();
        let first = sessions.start();
        for _ in 0..MAX_SESSIONS {
            sessions.start();
        }
        assert_eq!(sessions.sessions.len(), MAX_SESSIONS);
        assert!(sessions.check(&first).is_none());
    }

    #[test]
    fn origin_must_match_host() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:7000"));
        assert!(check_origin(&headers).is_err());
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(check_origin(&headers).is_err());
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:7000"),
        );
        assert!(check_origin(&headers).is_ok());
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_site_wide() {
        let text = session_cookie("abc", Duration::from_secs(600))
            .to_str()
            .unwrap()
            .to_owned();
        for part in [
            "quiver_console=abc",
            "Max-Age=600",
            "HttpOnly",
            "SameSite=Strict",
            "Path=/",
        ] {
            assert!(text.contains(part), "{text}");
        }
    }
}
