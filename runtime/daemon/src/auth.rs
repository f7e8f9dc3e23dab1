//! Bearer tokens: the daemon's own token (made on first start, kept in the
//! state directory with mode 0600), gateway clients' tokens (only their
//! sha256 is stored), and checking a request's `Authorization` header.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::DaemonError;

/// The token file in the state directory.
pub const TOKEN_FILE: &str = "token";

/// Prefix of gateway client tokens (tells them apart from the daemon's).
pub const CLIENT_TOKEN_PREFIX: &str = "qvc_";

/// `bytes` random bytes from the operating system, as lowercase hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    // The OS generator failing is not something to limp on with a weak token.
    if let Err(error) = getrandom::fill(&mut buffer) {
        panic!("the operating system's random number generator failed: {error}");
    }
    hex(&buffer)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of `token`, lowercase hex: what is stored and compared.
pub fn digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// The token file's path in `state_dir`.
pub fn token_path(state_dir: &Path) -> PathBuf {
    state_dir.join(TOKEN_FILE)
}

/// Reads the daemon's token, or makes one (32 random bytes, hex) in a new
/// file readable by its owner only. An existing file that others can read
/// is refused, as is an empty one.
pub fn load_or_create_token(state_dir: &Path) -> Result<String, DaemonError> {
    let path = token_path(state_dir);
    let error = |detail: String| DaemonError::Token {
        path: path.clone(),
        detail,
    };
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(mut file) => {
            let token = random_hex(32);
            file.write_all(format!("{token}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|e| error(e.to_string()))?;
            Ok(token)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let mode = std::fs::metadata(&path)
                .map_err(|e| error(e.to_string()))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(error(format!(
                    "readable or writable by others (mode {:o}); run chmod 600 on it",
                    mode & 0o777
                )));
            }
            let token = std::fs::read_to_string(&path)
                .map_err(|e| error(e.to_string()))?
                .trim()
                .to_owned();
            if token.is_empty() {
                return Err(error("empty; delete it to have a new one made".into()));
            }
            Ok(token)
        }
        Err(e) => Err(error(e.to_string())),
    }
}

/// The token of an `Authorization: Bearer TOKEN` header value.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let value = header?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Who a request authenticated as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The daemon's own token: the whole API, and `gateway.grants` on `/mcp`.
    Admin,
    /// A gateway client's token: only `/mcp`, with its own grant.
    GatewayClient {
        /// Its name.
        name: String,
        /// Its grant.
        grants: Vec<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_made_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create_token(dir.path()).unwrap();
        assert_eq!(first.len(), 64);
        let mode = std::fs::metadata(token_path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(load_or_create_token(dir.path()).unwrap(), first);
        std::fs::set_permissions(
            token_path(dir.path()),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let error = load_or_create_token(dir.path()).unwrap_err().to_string();
        assert!(error.contains("chmod 600"), "{error}");
    }

    #[test]
    fn bearer_header_is_parsed() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(None), None);
    }
}
