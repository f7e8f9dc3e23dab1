//! Values every section reads the same way: `auto`/`on`/`off` switches,
//! numbers clamped into their range, and errors placed at a value.

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::{ConfigError, ConfigWarning};

/// `auto`, `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Switch {
    /// Decide from the situation (see each key).
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

/// A numeric key and its allowed range.
#[derive(Debug, Clone, Copy)]
pub struct IntKey {
    /// The dotted key.
    pub key: &'static str,
    /// The smallest value allowed.
    pub min: i64,
    /// The largest value allowed.
    pub max: i64,
}

/// A [`ConfigError::Invalid`] at the position of `at` in `file`; each
/// config section passes the allowed values of its own keys.
pub fn invalid_at<T>(
    file: &str,
    at: &Spanned<T>,
    key: String,
    message: String,
    allowed: String,
) -> ConfigError {
    ConfigError::Invalid {
        file: file.to_owned(),
        line: at.referenced.line() as u32,
        column: at.referenced.column() as u32,
        key,
        message,
        allowed,
    }
}

/// `value` (or `default` when absent) clamped to `min..=max`; a clamped
/// value adds a warning naming `key`, the value given and the value used.
/// Every config section reads its numbers through this.
pub fn clamp(
    value: &Option<Spanned<i64>>,
    key: &str,
    (min, max): (i64, i64),
    default: i64,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> i64 {
    let Some(spanned) = value else {
        return default;
    };
    let used = spanned.value.clamp(min, max);
    if used != spanned.value {
        warnings.push(ConfigWarning {
            file: file.to_owned(),
            line: spanned.referenced.line() as u32,
            column: spanned.referenced.column() as u32,
            key: key.to_owned(),
            given: spanned.value,
            used,
            range: format!("{min}..{max}"),
        });
    }
    used
}
