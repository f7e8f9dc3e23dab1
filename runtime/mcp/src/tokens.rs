//! Where an OAuth server's credentials are kept: the contract the OAuth
//! support reads and writes through ([`TokenStore`]), which the daemon
//! gives every server from its state store (a file per server in the
//! state directory for SQLite, a table shared by every instance for
//! PostgreSQL). Credentials travel as JSON (rmcp's `StoredCredentials`);
//! no error carries a token.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

/// What a token store answers, later.
pub type TokenFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Keeps each OAuth server's credentials.
pub trait TokenStore: Send + Sync {
    /// `server`'s credentials and when they were stored (milliseconds
    /// since the Unix epoch; it changes with every save); `None` when
    /// none are.
    fn load<'a>(&'a self, server: &'a str) -> TokenFuture<'a, Option<(Value, i64)>>;

    /// Replaces `server`'s credentials.
    fn save<'a>(&'a self, server: &'a str, credentials: &'a Value) -> TokenFuture<'a, ()>;

    /// Removes `server`'s credentials; whether there were any.
    fn remove<'a>(&'a self, server: &'a str) -> TokenFuture<'a, bool>;

    /// Where `server`'s credentials are, for messages (a file, or a
    /// table of a database).
    fn place(&self, server: &str) -> String;
}

/// A server's token store, as its config holds it. It is not a setting:
/// two configs differing only in it are equal (a reload keeps the
/// connection).
#[derive(Clone)]
pub struct Tokens(pub Arc<dyn TokenStore>);

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens(..)")
    }
}

impl PartialEq for Tokens {
    fn eq(&self, _: &Tokens) -> bool {
        true
    }
}

impl Eq for Tokens {}
