//! MCP servers' OAuth credentials kept by the state store: the token
//! store every OAuth server of the daemon (and `quiver mcp login`) reads
//! and writes through, so that a login made on one instance serves every
//! instance sharing the store.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use quiver_mcp::tokens::{TokenFuture, TokenStore, Tokens};
use quiver_store::{Backend, Store};

/// The credentials of `store`, as MCP servers' configs hold them.
pub fn tokens_of(store: &Arc<dyn Store>) -> Tokens {
    Tokens(Arc::new(StoreTokens(store.clone())))
}

/// A [`TokenStore`] over the state store.
struct StoreTokens(Arc<dyn Store>);

impl TokenStore for StoreTokens {
    fn load<'a>(&'a self, server: &'a str) -> TokenFuture<'a, Option<(Value, i64)>> {
        Box::pin(async move { self.0.credentials(server).await.map_err(|e| e.to_string()) })
    }

    fn save<'a>(&'a self, server: &'a str, credentials: &'a Value) -> TokenFuture<'a, ()> {
        Box::pin(async move {
            self.0
                .save_credentials(server, credentials)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn remove<'a>(&'a self, server: &'a str) -> TokenFuture<'a, bool> {
        Box::pin(async move {
            self.0
                .clear_credentials(server)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn place(&self, server: &str) -> String {
        match self.0.backend() {
            Backend::Sqlite => {
                let location = self.0.location();
                Path::new(&location)
                    .parent()
                    .unwrap_or(Path::new("."))
                    .join(quiver_store::sqlite::OAUTH_DIR)
                    .join(format!("{server}.json"))
                    .display()
                    .to_string()
            }
            Backend::Postgres => format!(
                "the credentials table of {} (server `{server}`)",
                self.0.location()
            ),
        }
    }
}
