//! JSON-RPC error answers the gateway gives where rmcp alone would answer
//! vaguely or not at all: a request of a known method whose params do not
//! fit (`-32602` naming the field, where rmcp says `-32601`), input that is
//! not JSON (`-32700`, on stdio and Streamable HTTP), well-formed JSON that
//! is not a JSON-RPC message (`-32600`); and the log filter that keeps
//! expected client behaviour (probing for methods, cancelling) out of the
//! warnings.

use std::borrow::Cow;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CompleteRequestParams, GetPromptRequestParams, InitializeRequestParams,
    PaginatedRequestParams, ReadResourceRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use quiver_catalog::bridge::json_type;

/// What a request that reached rmcp's "custom request" fallback gets: a
/// method rmcp knows whose params did not fit its shape is `-32602` naming
/// the field; any other method is `-32601`.
pub fn custom_request_error(method: &str, params: Option<&Value>) -> ErrorData {
    let misfit = match method {
        "tools/call" => tools_call_misfit(params),
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
            misfit::<PaginatedRequestParams>(params, true)
        }
        "resources/read" => misfit::<ReadResourceRequestParams>(params, false),
        "resources/subscribe" => misfit::<SubscribeRequestParams>(params, false),
        "resources/unsubscribe" => misfit::<UnsubscribeRequestParams>(params, false),
        "prompts/get" => misfit::<GetPromptRequestParams>(params, false),
        "completion/complete" => misfit::<CompleteRequestParams>(params, false),
        "initialize" => misfit::<InitializeRequestParams>(params, false),
        _ => return method_not_found(method),
    };
    let message = misfit.unwrap_or_else(|| "the params do not fit this method".to_owned());
    ErrorData::invalid_params(
        format!("invalid params for {method}: {message}"),
        Some(json!({"method": method})),
    )
}

/// `-32601` for a method the gateway does not serve, naming it.
pub fn method_not_found(method: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!("method not found: {method}"),
        Some(json!({"method": method})),
    )
}

/// What is wrong with a `tools/call`'s params, in the words a client
/// author needs: which field, what it must be, what it was.
fn tools_call_misfit(params: Option<&Value>) -> Option<String> {
    let params = match params {
        Some(Value::Object(params)) => params,
        None => {
            return Some("`params` is missing: send `name` and optional `arguments`".to_owned());
        }
        Some(other) => {
            return Some(format!(
                "`params` must be an object with `name` and optional `arguments`, not {}",
                json_type(other)
            ));
        }
    };
    match params.get("name") {
        None => return Some("`name` is missing: the tool to call".to_owned()),
        Some(Value::String(_)) => {}
        Some(other) => {
            return Some(format!("`name` must be a string, not {}", json_type(other)));
        }
    }
    match params.get("arguments") {
        None | Some(Value::Object(_) | Value::Null) => {}
        Some(other) => {
            return Some(format!(
                "`arguments` must be an object, not {}",
                json_type(other)
            ));
        }
    }
    misfit::<CallToolRequestParams>(Some(&Value::Object(params.clone())), false)
}

/// Where `params` fails to read as `T`, with the path of the field.
/// `optional`: absent params are fine for this method.
fn misfit<T: DeserializeOwned>(params: Option<&Value>, optional: bool) -> Option<String> {
    let params = match params {
        None if optional => return None,
        None => return Some("`params` is missing".to_owned()),
        Some(params) => params,
    };
    match serde_path_to_error::deserialize::<_, T>(params) {
        Ok(_) => None,
        Err(error) => {
            let path = error.path().to_string();
            let inner = error.into_inner();
            Some(if path == "." {
                inner.to_string()
            } else {
                format!("`{path}`: {inner}")
            })
        }
    }
}

/// Why `bytes` cannot be a JSON-RPC message, as the error to answer: not
/// JSON at all is `-32700`; JSON of the wrong shape is `-32600` (with the
/// id, when one can be read). `None`: it reads.
pub fn unreadable_message(bytes: &[u8]) -> Option<(Option<Value>, ErrorData)> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(error) => {
            return Some((
                None,
                ErrorData::parse_error(format!("parse error: {error}"), None),
            ));
        }
    };
    if serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(value.clone()).is_ok() {
        return None;
    }
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    let why = match &value {
        Value::Object(map) if map.get("jsonrpc") != Some(&json!("2.0")) => {
            Cow::Borrowed("`jsonrpc` must be \"2.0\"")
        }
        Value::Object(map) => match map.get("method") {
            Some(Value::String(_)) => Cow::Borrowed("the message does not fit its method"),
            Some(other) => Cow::Owned(format!(
                "`method` must be a string, not {}",
                json_type(other)
            )),
            None => Cow::Borrowed("a request needs `method`"),
        },
        Value::Array(_) => Cow::Borrowed("batches are not supported: send one message at a time"),
        other => Cow::Owned(format!(
            "a JSON-RPC message is an object, not {}",
            json_type(other)
        )),
    };
    Some((
        id,
        ErrorData::invalid_request(format!("invalid request: {why}"), None),
    ))
}

/// `true` when `bytes` is not JSON at all (a syntax error or cut short),
/// the case rmcp's line transport drops without an answer.
pub fn is_not_json(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        Ok(_) => false,
        Err(error) => matches!(
            error.classify(),
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof
        ),
    }
}

/// A JSON-RPC error response, serialised (`id` null when it is unknown).
pub fn error_response(id: Option<Value>, error: &ErrorData) -> String {
    json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "error": error}).to_string()
}

/// The log filter for expected client behaviour: rmcp logs every error
/// response at WARN (`response error`, with `id` and `error`), including
/// `-32601` answers to clients probing for methods and the answers to
/// cancelled calls. The gateway logs its own error answers at the level
/// they deserve, so that one rmcp event is left out; everything else
/// passes.
pub fn keeps_event(metadata: &tracing::Metadata<'_>) -> bool {
    !(metadata.target().starts_with("rmcp::service")
        && *metadata.level() == tracing::Level::WARN
        && metadata.is_event()
        && metadata.fields().field("error").is_some()
        && metadata.fields().field("id").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(error: &ErrorData) -> String {
        error.message.to_string()
    }

    #[test]
    fn tools_call_misfits_name_the_field() {
        let cases = [
            (
                json!({"name": "x", "arguments": "abc"}),
                "`arguments` must be an object, not a string",
            ),
            (
                json!({"name": "x", "arguments": [1]}),
                "`arguments` must be an object, not an array",
            ),
            (json!({"arguments": {}}), "`name` is missing"),
            (json!({"name": 5}), "`name` must be a string, not a number"),
            (json!("x"), "`params` must be an object"),
        ];
        for (params, expected) in cases {
            let error = custom_request_error("tools/call", Some(&params));
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert!(
                message(&error).contains(expected),
                "{params}: {}",
                message(&error)
            );
        }
    }

    #[test]
    fn other_methods_name_the_path_or_say_not_found() {
        let error = custom_request_error("resources/read", Some(&json!({"uri": 3})));
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(message(&error).contains("`uri`"), "{}", message(&error));
        let error = custom_request_error("tools/list", Some(&json!({"cursor": 3})));
        assert!(message(&error).contains("`cursor`"), "{}", message(&error));
        let error = custom_request_error("sampling/whatever", None);
        assert_eq!(error.code, rmcp::model::ErrorCode::METHOD_NOT_FOUND);
        assert!(message(&error).contains("sampling/whatever"));
    }

    #[test]
    fn unreadable_messages_are_parse_errors_or_invalid_requests() {
        let (id, error) = unreadable_message(b"{not json").unwrap();
        assert_eq!(
            (id, error.code),
            (None, rmcp::model::ErrorCode::PARSE_ERROR)
        );
        assert!(is_not_json(b"{not json") && is_not_json(b"{\"a\":"));
        assert!(!is_not_json(b"[1]") && !is_not_json(b"\xEF\xBB\xBF{}"));
        let (id, error) =
            unreadable_message(br#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#).unwrap();
        assert_eq!(
            (id, error.code),
            (Some(json!(4)), rmcp::model::ErrorCode::INVALID_REQUEST)
        );
        assert!(unreadable_message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_none());
        let response = error_response(None, &ErrorData::parse_error("parse error", None));
        assert_eq!(
            serde_json::from_str::<Value>(&response).unwrap(),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error"}})
        );
    }
}
