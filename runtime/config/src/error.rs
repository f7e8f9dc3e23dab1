//! The two things a config section can report: an error that stops the
//! load ([`ConfigError`]) and a value that was clamped ([`ConfigWarning`]).

use std::fmt;

/// A value that was out of range and was clamped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The file (or `<embedded default>`).
    pub file: String,
    /// 1-based line of the value.
    pub line: u32,
    /// 1-based column of the value.
    pub column: u32,
    /// Dotted key, e.g. `tools.tool_search.threshold_pct`.
    pub key: String,
    /// The value as written.
    pub given: i64,
    /// The value used instead.
    pub used: i64,
    /// The allowed range, e.g. `0..100`.
    pub range: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: `{}` = {} is outside {}; using {}",
            self.file, self.line, self.column, self.key, self.given, self.range, self.used
        )
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid YAML.
    #[error("{file}:{line}:{column}: YAML syntax error: {message}")]
    Syntax {
        /// The file (or `<embedded default>`).
        file: String,
        /// 1-based line (0 when the parser could not tell).
        line: u32,
        /// 1-based column (0 when the parser could not tell).
        column: u32,
        /// What the parser found wrong.
        message: String,
    },
    /// The file was read but a key or value is wrong.
    #[error("{file}:{line}:{column}: `{key}`: {message}; allowed: {allowed}")]
    Invalid {
        /// The file (or `<embedded default>`).
        file: String,
        /// 1-based line (0 when the parser could not tell).
        line: u32,
        /// 1-based column (0 when the parser could not tell).
        column: u32,
        /// Dotted key path (`<root>` for the document itself).
        key: String,
        /// What is wrong.
        message: String,
        /// What would be accepted there.
        allowed: String,
    },
}

impl ConfigError {
    /// The same error with `allowed` replaced by `text`: for a section
    /// whose raw parse cannot know what the key allows.
    pub fn with_allowed(self, text: &str) -> ConfigError {
        match self {
            ConfigError::Invalid {
                file,
                line,
                column,
                key,
                message,
                ..
            } => ConfigError::Invalid {
                file,
                line,
                column,
                key,
                message,
                allowed: text.to_owned(),
            },
            other => other,
        }
    }
}
