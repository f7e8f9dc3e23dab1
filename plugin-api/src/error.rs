//! [`ToolError`]: a failed tool call with a stable code, a message and
//! optional data; it crosses the boundary as structured data and the model
//! receives it as `{"error": code, "message", "data"}`.

use std::fmt;

use serde_json::{Value, json};

use crate::ffi::FfiError;

/// A tool call that failed. The code is stable (the model and scripts can
/// branch on it); the message says what happened, for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    code: String,
    message: String,
    data: Option<Value>,
}

impl ToolError {
    /// The code of [`ToolError::invalid_argument`].
    pub const INVALID_ARGUMENT: &'static str = "invalid_argument";
    /// The code of [`ToolError::not_found`].
    pub const NOT_FOUND: &'static str = "not_found";
    /// The code of [`ToolError::failed`] (the host's default code for a
    /// failed tool).
    pub const FAILED: &'static str = "tool_failed";

    /// An error with its own `code` (short, `snake_case`).
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ToolError {
            code: code.into(),
            message: message.into(),
            data: None,
        }
    }

    /// The argument `field` is wrong: `why` says how (`data.field` names it).
    pub fn invalid_argument(field: impl Into<String>, why: impl Into<String>) -> Self {
        let field = field.into();
        let why = why.into();
        ToolError::new(
            ToolError::INVALID_ARGUMENT,
            format!("argument `{field}`: {why}"),
        )
        .with_data(json!({"field": field}))
    }

    /// What the call names does not exist (a file, a record, a zone).
    pub fn not_found(message: impl Into<String>) -> Self {
        ToolError::new(ToolError::NOT_FOUND, message)
    }

    /// The tool ran and failed.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::new(ToolError::FAILED, message)
    }

    /// The host asked for a tool this plugin does not have.
    pub fn unknown_tool(tool: &str) -> Self {
        ToolError::new("unknown_tool", format!("this plugin has no tool `{tool}`"))
    }

    /// The same error with `data` (merged into an object `data` already
    /// holds, else replacing it).
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = match (self.data.take(), data) {
            (Some(Value::Object(mut old)), Value::Object(new)) => {
                old.extend(new);
                Some(Value::Object(old))
            }
            (_, data) => Some(data),
        };
        self
    }

    /// The code.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The data, if any.
    pub fn data(&self) -> Option<&Value> {
        self.data.as_ref()
    }

    /// The error as it crosses the boundary.
    pub fn to_ffi(&self) -> FfiError {
        FfiError {
            panicked: false,
            code: self.code.as_str().into(),
            message: self.message.as_str().into(),
            data_json: self.data.as_ref().map(|d| d.to_string().into()).into(),
        }
    }

    /// The error as it came across the boundary (data that is not JSON is
    /// kept as a string).
    pub fn from_ffi(error: &FfiError) -> Self {
        ToolError {
            code: error.code.to_string(),
            message: error.message.to_string(),
            data: error.data_json.as_ref().into_option().map(|text| {
                serde_json::from_str(text.as_str()).unwrap_or_else(|_| json!(text.as_str()))
            }),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Any error converts into a [`ToolError::failed`] with its message, so
/// that `?` works on I/O, parse and library errors.
impl<E: std::error::Error> From<E> for ToolError {
    fn from(error: E) -> Self {
        ToolError::failed(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn errors_cross_the_boundary_with_code_and_data() {
        let error = ToolError::invalid_argument("pattern", "unclosed group");
        assert_eq!(error.message(), "argument `pattern`: unclosed group");
        let back = ToolError::from_ffi(&error.to_ffi());
        assert_eq!(back, error);
        assert_eq!(back.data().unwrap()["field"], "pattern");
        let merged = error.with_data(json!({"offset": 3}));
        assert_eq!(
            merged.data().unwrap(),
            &json!({"field": "pattern", "offset": 3})
        );
        assert_eq!(ToolError::not_found("x").code(), "not_found");
    }
}
