//! Why a store call failed, the same for every backend: each error names
//! the store (its file, or its server and database without a password)
//! and what was being done, and has a stable code for the API.

/// A backend's own error, kept as the source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be opened or set up.
    #[error("cannot open the state store {location}: {source}")]
    Open {
        /// The store (a file, or a server and database).
        location: String,
        /// The backend's error.
        source: BoxError,
    },
    /// The store's server cannot be reached now (refused, timed out, gone
    /// away); calls succeed again once it is back.
    #[error("the state store {location} is unavailable: {detail}")]
    Unavailable {
        /// The server and database, without a password.
        location: String,
        /// What failed.
        detail: String,
    },
    /// The database file's permissions could not be made owner-only.
    #[error("cannot make {path} readable by its owner only: {source}")]
    Permissions {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The store was written by a newer Quiver.
    #[error(
        "the state store {location} has schema version {found}; this Quiver knows versions up to {known}: upgrade Quiver, or point it at another store"
    )]
    NewerSchema {
        /// The store.
        location: String,
        /// Its version.
        found: i64,
        /// The newest this build knows.
        known: i64,
    },
    /// A query failed.
    #[error("state store {location}: error while {what}: {source}")]
    Query {
        /// The store.
        location: String,
        /// What was being done.
        what: &'static str,
        /// The backend's error.
        source: BoxError,
    },
    /// A stored value could not be read back.
    #[error("state store holds an unreadable {what}: {detail}")]
    Corrupt {
        /// Which value.
        what: &'static str,
        /// Why.
        detail: String,
    },
    /// The store settings cannot be used.
    #[error("{key}: {detail}")]
    Settings {
        /// The key (`store.url`).
        key: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A session with this id exists already.
    #[error("a session with id `{0}` exists already")]
    SessionExists(String),
    /// A gateway client with this name exists already.
    #[error("a gateway client named `{0}` exists already")]
    ClientExists(String),
    /// This build has no such backend.
    #[error(
        "store backend `{0}` is not in this build of Quiver (built without its feature); allowed: {allowed}",
        allowed = crate::settings::BACKENDS.join(", ")
    )]
    BackendMissing(&'static str),
}

impl StoreError {
    /// A short stable code: `store_unavailable` when the store's server
    /// cannot be reached (a retry may succeed), `store_error` for other
    /// failures of the store, and one of its own for a conflict.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Unavailable { .. } => "store_unavailable",
            StoreError::NewerSchema { .. } => "store_schema_newer",
            StoreError::SessionExists(_) => "session_exists",
            StoreError::ClientExists(_) => "client_exists",
            StoreError::Settings { .. } | StoreError::BackendMissing(_) => "store_settings",
            StoreError::Open { .. }
            | StoreError::Permissions { .. }
            | StoreError::Query { .. }
            | StoreError::Corrupt { .. } => "store_error",
        }
    }

    /// Whether the store's server could not be reached (the call may
    /// succeed later, unchanged).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }
}
