//! How MCP tools are named for the model: `mcp_<server>_<tool>`, limited to
//! `[A-Za-z0-9_-]` and 64 characters, with deterministic collision handling.

use sha2::{Digest, Sha256};

/// Longest exposed tool name, the limit most model APIs enforce.
pub const MAX_TOOL_NAME_CHARS: usize = 64;

/// The names of the three bridge tools; no plugin or MCP tool may use them.
pub const BRIDGE_TOOL_NAMES: [&str; 3] = ["tool_search", "tool_describe", "tool_call"];

/// Whether `name` is one of the bridge tools' reserved names.
pub fn is_bridge_name(name: &str) -> bool {
    BRIDGE_TOOL_NAMES.contains(&name)
}

/// Whether `name` is a valid core or plugin tool (or plugin) name: 1 to
/// [`MAX_TOOL_NAME_CHARS`] characters from `[A-Za-z0-9_-]`.
pub fn is_valid_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Replaces every character outside `[A-Za-z0-9_-]` with `_`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A stable 8-hex-digit hash of a server and tool name (sha256, first 4 bytes).
pub fn name_hash(server: &str, tool: &str, attempt: u32) -> String {
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update([0u8]);
    hasher.update(tool.as_bytes());
    if attempt > 0 {
        hasher.update(attempt.to_le_bytes());
    }
    let digest = hasher.finalize();
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// The exposed name of MCP tool `tool` on `server`: `mcp_<server>_<tool>`,
/// sanitised, and cut to 55 characters plus `_` and a hash when longer than
/// [`MAX_TOOL_NAME_CHARS`].
///
/// ```
/// use quiver_tool::naming::mcp_tool_name;
/// assert_eq!(mcp_tool_name("github", "create_issue"), "mcp_github_create_issue");
/// assert_eq!(mcp_tool_name("my server", "get.thing"), "mcp_my_server_get_thing");
/// assert_eq!(mcp_tool_name("s", &"x".repeat(80)).len(), 64);
/// ```
pub fn mcp_tool_name(server: &str, tool: &str) -> String {
    let full = sanitize(&format!("mcp_{server}_{tool}"));
    if full.len() <= MAX_TOOL_NAME_CHARS {
        full
    } else {
        hashed_name(&full, server, tool, 0)
    }
}

/// `base` cut so that `_` and the 8-hex hash fit in [`MAX_TOOL_NAME_CHARS`].
/// `base` must be ASCII (it is always a sanitised name).
pub fn hashed_name(base: &str, server: &str, tool: &str, attempt: u32) -> String {
    let keep = MAX_TOOL_NAME_CHARS - 9;
    let stem = &base[..base.len().min(keep)];
    format!("{stem}_{}", name_hash(server, tool, attempt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitises_to_allowed_characters() {
        assert_eq!(sanitize("a.b:c d/é-_9"), "a_b_c_d__-_9");
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let a = mcp_tool_name("cloudflare", &"very_long_operation_name_".repeat(4));
        let b = mcp_tool_name("cloudflare", &"very_long_operation_name_".repeat(4));
        assert_eq!(a, b);
        assert_eq!(a.len(), MAX_TOOL_NAME_CHARS);
        assert!(a.starts_with("mcp_cloudflare_very_long"));
        let hash = &a[a.len() - 8..];
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(&a[a.len() - 9..a.len() - 8], "_");
        let other = mcp_tool_name("cloudflare", &"very_long_operation_name_".repeat(5));
        assert_ne!(
            a, other,
            "different tools sharing a 55-char stem differ by hash"
        );
    }

    #[test]
    fn exactly_64_is_kept() {
        let tool = "t".repeat(64 - "mcp_s_".len());
        assert_eq!(mcp_tool_name("s", &tool).len(), 64);
        assert_eq!(mcp_tool_name("s", &tool), format!("mcp_s_{tool}"));
    }

    #[test]
    fn bridge_names_are_reserved() {
        assert!(is_bridge_name("tool_call"));
        assert!(!is_bridge_name("Tool_call"));
    }
}
