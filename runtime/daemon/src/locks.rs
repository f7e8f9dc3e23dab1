//! The lock `quiver serve` holds on its state directory ([`SERVE_LOCK`]),
//! so that two daemons never share one (and its `daemon.json`): a file held
//! with an exclusive advisory lock, released when dropped or when the
//! process ends, even by a crash. (Turns of a session are claimed through
//! the store: `Store::claim_turn`.)

pub use quiver_store::lock_file::{FileLock, try_lock_path};

/// The lock file `quiver serve` holds, inside the state directory.
pub const SERVE_LOCK: &str = "serve.lock";
