//! Result transforms: a result longer than `guardrails.max_result_chars`
//! (characters of its compact JSON text; a string result counts its own
//! characters) is cut there and ends with a marker saying how much was cut.

use std::task::{Context, Poll};

use serde_json::Value;
use tower::{Layer, Service};

use super::{BoxFuture, ChainService, DispatchCall, DispatchError, ToolOutput, ready_call};

/// Cuts `content` to at most `max_chars` characters plus a marker; `None`
/// when it already fits. Non-string results become the string of their
/// (cut) JSON text.
pub fn cut_result(content: &Value, max_chars: usize) -> Option<Value> {
    let owned;
    let text: &str = match content {
        Value::String(text) => text,
        other => {
            if quiver_tool::tokens::json_chars(other) <= max_chars {
                return None;
            }
            owned = other.to_string();
            &owned
        }
    };
    let total = text.chars().count();
    if total <= max_chars {
        return None;
    }
    let end = text
        .char_indices()
        .nth(max_chars)
        .map_or(text.len(), |(i, _)| i);
    Some(Value::String(format!(
        "{}\n[quiver: result cut: showed {max_chars} of {total} characters]",
        &text[..end]
    )))
}

/// Adds [`ResultCap`] around a service.
#[derive(Debug, Clone)]
pub struct ResultCapLayer {
    max_chars: usize,
}

impl ResultCapLayer {
    /// Cuts results longer than `max_chars`.
    pub fn new(max_chars: usize) -> ResultCapLayer {
        ResultCapLayer { max_chars }
    }
}

impl<S> Layer<S> for ResultCapLayer {
    type Service = ResultCap<S>;
    fn layer(&self, inner: S) -> ResultCap<S> {
        ResultCap {
            max_chars: self.max_chars,
            inner,
        }
    }
}

/// Cuts what the inner service returns.
#[derive(Debug, Clone)]
pub struct ResultCap<S> {
    max_chars: usize,
    inner: S,
}

impl<S: ChainService> Service<DispatchCall> for ResultCap<S> {
    type Response = ToolOutput;
    type Error = DispatchError;
    type Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), DispatchError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: DispatchCall) -> Self::Future {
        let inner = self.inner.clone();
        let max_chars = self.max_chars;
        Box::pin(async move {
            let mut output = ready_call(inner, call).await?;
            if let Some(cut) = cut_result(&output.content, max_chars) {
                output.content = cut;
                output.truncated = true;
            }
            Ok(output)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_results_are_untouched() {
        assert_eq!(cut_result(&json!({"a": 1}), 100), None);
        assert_eq!(cut_result(&json!("abc"), 3), None);
    }

    #[test]
    fn long_results_are_cut_on_a_character_boundary_with_a_marker() {
        let cut = cut_result(&json!("ééééé"), 2).unwrap();
        assert_eq!(
            cut,
            json!("éé\n[quiver: result cut: showed 2 of 5 characters]")
        );
        let cut = cut_result(&json!({"text": "x".repeat(50)}), 10).unwrap();
        assert!(cut.as_str().unwrap().starts_with("{\"text\":\"x"));
        assert!(cut.as_str().unwrap().contains("showed 10 of 61"));
    }
}
