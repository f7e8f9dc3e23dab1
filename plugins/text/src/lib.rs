//! Quiver plugin `text`: regex find and replace, SHA-2 hashes, base64 and
//! word counts over text the model passes in.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use quiver_plugin_api::{PluginManifest, ToolError, ToolManifest, str_arg};
use regex::RegexBuilder;
use serde_json::{Value, json};
use sha2::Digest;

/// Most matches `regex_find` returns.
const MAX_MATCHES: usize = 1000;
/// Largest compiled regex, in bytes (guards against pathological patterns).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

fn manifest() -> PluginManifest {
    let text = json!({"type": "string", "description": "The input text."});
    PluginManifest::new("text", env!("CARGO_PKG_VERSION"))
        .tool(ToolManifest::new(
            "regex_find",
            "Find every match of a regular expression (Rust regex syntax) in a text. Returns each match with its byte offsets and capture groups.",
            json!({"type": "object", "properties": {
                "text": text,
                "pattern": {"type": "string", "description": "Regular expression."},
                "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_MATCHES, "description": "Most matches to return (default 100)."}
            }, "required": ["text", "pattern"]}),
        ))
        .tool(ToolManifest::new(
            "regex_replace",
            "Replace matches of a regular expression in a text; the replacement may use $1 or ${name} for capture groups.",
            json!({"type": "object", "properties": {
                "text": text,
                "pattern": {"type": "string"},
                "replacement": {"type": "string"},
                "case_insensitive": {"type": "boolean"},
                "all": {"type": "boolean", "description": "Replace every match (default true) or only the first."}
            }, "required": ["text", "pattern", "replacement"]}),
        ))
        .tool(ToolManifest::new(
            "hash",
            "Hash a text (UTF-8) with SHA-224, SHA-256, SHA-384 or SHA-512; returns lowercase hex.",
            json!({"type": "object", "properties": {
                "text": text,
                "algorithm": {"type": "string", "enum": ["sha224", "sha256", "sha384", "sha512"], "description": "Default sha256."}
            }, "required": ["text"]}),
        ))
        .tool(ToolManifest::new(
            "base64_encode",
            "Encode a text (UTF-8) as base64 (standard alphabet with padding, or URL-safe without).",
            json!({"type": "object", "properties": {
                "text": text,
                "url_safe": {"type": "boolean"}
            }, "required": ["text"]}),
        ))
        .tool(ToolManifest::new(
            "base64_decode",
            "Decode base64 (standard or URL-safe, padding optional) to UTF-8 text.",
            json!({"type": "object", "properties": {
                "data": {"type": "string", "description": "The base64 text."}
            }, "required": ["data"]}),
        ))
        .tool(ToolManifest::new(
            "word_count",
            "Count the characters, bytes, words and lines of a text, like wc.",
            json!({"type": "object", "properties": {"text": text}, "required": ["text"]}),
        ))
}

fn regex(arguments: &Value) -> Result<regex::Regex, ToolError> {
    let pattern = str_arg(arguments, "pattern")?;
    RegexBuilder::new(pattern)
        .case_insensitive(arguments["case_insensitive"].as_bool().unwrap_or(false))
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| ToolError::new(format!("invalid pattern: {e}")))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn call(tool: &str, arguments: Value) -> Result<Value, ToolError> {
    match tool {
        "regex_find" => {
            let text = str_arg(&arguments, "text")?;
            let re = regex(&arguments)?;
            let limit = arguments["limit"]
                .as_u64()
                .map_or(100, |n| (n as usize).clamp(1, MAX_MATCHES));
            let names: Vec<Option<&str>> = re.capture_names().collect();
            let mut matches = Vec::new();
            let mut total = 0usize;
            for caps in re.captures_iter(text) {
                total += 1;
                if matches.len() >= limit {
                    continue;
                }
                let Some(whole) = caps.get(0) else { continue };
                let groups: Vec<Value> = (1..caps.len())
                    .map(|i| {
                        let value = caps.get(i).map(|m| m.as_str());
                        match names.get(i).copied().flatten() {
                            Some(name) => json!({"name": name, "text": value}),
                            None => json!({"text": value}),
                        }
                    })
                    .collect();
                matches.push(json!({"text": whole.as_str(), "start": whole.start(), "end": whole.end(), "groups": groups}));
            }
            Ok(json!({"count": total, "matches": matches, "truncated": total > matches.len()}))
        }
        "regex_replace" => {
            let text = str_arg(&arguments, "text")?;
            let replacement = str_arg(&arguments, "replacement")?;
            let re = regex(&arguments)?;
            let count = re.find_iter(text).count();
            let all = arguments["all"].as_bool().unwrap_or(true);
            let result = if all {
                re.replace_all(text, replacement)
            } else {
                re.replace(text, replacement)
            };
            Ok(json!({"text": result, "replaced": if all { count } else { count.min(1) }}))
        }
        "hash" => {
            let text = str_arg(&arguments, "text")?.as_bytes();
            let algorithm = arguments["algorithm"].as_str().unwrap_or("sha256");
            let digest = match algorithm {
                "sha224" => hex(&sha2::Sha224::digest(text)),
                "sha256" => hex(&sha2::Sha256::digest(text)),
                "sha384" => hex(&sha2::Sha384::digest(text)),
                "sha512" => hex(&sha2::Sha512::digest(text)),
                other => {
                    return Err(ToolError::new(format!(
                        "unknown algorithm `{other}`; use sha224, sha256, sha384 or sha512"
                    )));
                }
            };
            Ok(json!({"algorithm": algorithm, "hex": digest}))
        }
        "base64_encode" => {
            let text = str_arg(&arguments, "text")?;
            let encoded = if arguments["url_safe"].as_bool().unwrap_or(false) {
                URL_SAFE_NO_PAD.encode(text)
            } else {
                STANDARD.encode(text)
            };
            Ok(json!({"data": encoded}))
        }
        "base64_decode" => {
            let data = str_arg(&arguments, "data")?.trim();
            let normalised: String = data
                .chars()
                .filter(|c| !c.is_whitespace() && *c != '=')
                .map(|c| match c {
                    '-' => '+',
                    '_' => '/',
                    c => c,
                })
                .collect();
            let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(normalised)
                .map_err(|e| ToolError::new(format!("not valid base64: {e}")))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| ToolError::new("the decoded bytes are not UTF-8 text"))?;
            Ok(json!({"text": text}))
        }
        "word_count" => {
            let text = str_arg(&arguments, "text")?;
            Ok(json!({
                "chars": text.chars().count(),
                "bytes": text.len(),
                "words": text.split_whitespace().count(),
                "lines": text.lines().count(),
            }))
        }
        other => Err(ToolError::unknown_tool(other)),
    }
}

quiver_plugin_api::export_plugin!(manifest, call);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn find_and_replace() {
        let found = call(
            "regex_find",
            json!({"text": "a1 b22", "pattern": "(?P<d>\\d+)"}),
        )
        .unwrap();
        assert_eq!(found["count"], 2);
        assert_eq!(found["matches"][1]["text"], "22");
        assert_eq!(found["matches"][1]["groups"][0]["name"], "d");
        let replaced = call(
            "regex_replace",
            json!({"text": "a1 b22", "pattern": "\\d+", "replacement": "#"}),
        )
        .unwrap();
        assert_eq!(replaced["text"], "a# b#");
        assert!(call("regex_find", json!({"text": "", "pattern": "("})).is_err());
    }

    #[test]
    fn hashes_base64_and_counts() {
        let h = call("hash", json!({"text": "abc"})).unwrap();
        assert_eq!(
            h["hex"],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let e = call("base64_encode", json!({"text": "hi?>"})).unwrap();
        assert_eq!(e["data"], "aGk/Pg==");
        let d = call("base64_decode", json!({"data": "aGk_Pg"})).unwrap();
        assert_eq!(d["text"], "hi?>");
        let w = call("word_count", json!({"text": "one two\nthree"})).unwrap();
        assert_eq!(
            (w["words"].as_u64(), w["lines"].as_u64()),
            (Some(3), Some(2))
        );
    }
}
