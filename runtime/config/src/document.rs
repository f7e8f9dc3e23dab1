//! Reading a YAML document into a raw shape with the failing key's path
//! kept beside the parser's line and column, so that a wrong type or an
//! unknown key is reported as `file:line:column: `key`: message; allowed: ...`.

use std::cell::RefCell;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use crate::ConfigError;

thread_local! {
    static FAILED_PATH: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The root, read through serde_path_to_error so that a failure knows its
/// key path; the path travels beside the parser's own error, which keeps
/// the line and column.
struct Tracked<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Tracked<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde_path_to_error::deserialize(deserializer)
            .map(Tracked)
            .map_err(|error| {
                FAILED_PATH.with(|p| *p.borrow_mut() = Some(error.path().to_string()));
                error.into_inner()
            })
    }
}

/// Reads `text` (named `file` in messages) into `T`; an empty document is
/// `T::default()`. `allowed` says what a dotted key accepts, for the
/// error's `allowed` part.
pub fn read_document<T: DeserializeOwned + Default>(
    text: &str,
    file: &str,
    allowed: impl Fn(&str) -> String,
) -> Result<T, ConfigError> {
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    // Plain YAML first: a syntax error reads as one, not as a wrong type
    // of the key being read, and a duplicate key is named with its path.
    if let Some(error) = crate::syntax_and_duplicates(text, file).into_iter().next() {
        return Err(error);
    }
    FAILED_PATH.with(|p| p.borrow_mut().take());
    match serde_saphyr::from_str::<Option<Tracked<T>>>(text) {
        Ok(raw) => Ok(raw.map(|r| r.0).unwrap_or_default()),
        Err(error) => Err(parse_error(&error, file, allowed)),
    }
}

fn parse_error(
    error: &serde_saphyr::Error,
    file: &str,
    allowed: impl Fn(&str) -> String,
) -> ConfigError {
    let key = FAILED_PATH
        .with(|p| p.borrow_mut().take())
        // `Spanned` fields add a `.value` segment of their own.
        .map(|p| p.strip_suffix(".value").map(str::to_owned).unwrap_or(p))
        .map(|p| p.replace(".value.", "."))
        .filter(|p| !p.is_empty() && p != ".")
        .unwrap_or_else(|| "<root>".to_owned());
    let (line, column) = error
        .location()
        .map(|l| (l.line() as u32, l.column() as u32))
        .unwrap_or((0, 0));
    // The parser's Display adds a source snippet; keep only its first line,
    // without the location prefix that we print ourselves.
    let message = match error.without_snippet() {
        serde_saphyr::Error::SerdeUnknownField {
            field, expected, ..
        } => {
            let mut message = format!("unknown key `{field}`");
            if let Some(close) = crate::did_you_mean(field, expected) {
                message.push_str(&format!("; did you mean `{close}`?"));
            }
            message
        }
        other => crate::check::first_line(&other.to_string()),
    };
    let message = message
        .replace("invalid i64", "expected an integer")
        .replace("invalid type: ", "wrong type: ")
        .replace(
            "expected string scalar",
            "expected a single value, not a list or map",
        );
    ConfigError::Invalid {
        file: file.to_owned(),
        line,
        column,
        allowed: allowed(&key),
        key,
        message,
    }
}
