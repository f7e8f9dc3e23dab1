//! Quiver plugin `text`: regex find and replace, SHA-2 hashes, base64 and
//! word counts over text the model passes in.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use quiver_plugin_api::{JsonSchema, ToolError, tool};
use regex::RegexBuilder;
use serde::{Deserialize, Serialize};
use sha2::Digest;

/// Most matches `regex_find` returns.
const MAX_MATCHES: u32 = 1000;
/// Largest compiled regex, in bytes (guards against pathological patterns).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Arguments of `regex_find`.
#[derive(Deserialize, JsonSchema)]
struct RegexFindArgs {
    /// The input text.
    text: String,
    /// Regular expression.
    pattern: String,
    /// Ignore case (default false).
    #[serde(default)]
    case_insensitive: bool,
    /// Most matches to return (default 100).
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 1000))]
    limit: u32,
}

fn default_limit() -> u32 {
    100
}

fn yes() -> bool {
    true
}

/// One capture group of a match.
#[derive(Serialize, JsonSchema)]
struct Group {
    /// The group's name, for a named group.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// The text it captured (`null` when it did not take part).
    text: Option<String>,
}

/// One match.
#[derive(Serialize, JsonSchema)]
struct Match {
    /// The matched text.
    text: String,
    /// Byte offset of its start.
    start: usize,
    /// Byte offset just past its end.
    end: usize,
    /// Its capture groups, in order.
    groups: Vec<Group>,
}

/// What `regex_find` found.
#[derive(Serialize, JsonSchema)]
struct Found {
    /// How many matches the text has.
    count: usize,
    /// The first `limit` of them.
    matches: Vec<Match>,
    /// Whether `matches` stops short of `count`.
    truncated: bool,
}

fn regex(pattern: &str, case_insensitive: bool) -> Result<regex::Regex, ToolError> {
    RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| ToolError::invalid_argument("pattern", format!("invalid pattern: {e}")))
}

/// Find every match of a regular expression (Rust regex syntax) in a text. Returns each match with its byte offsets and capture groups.
#[tool(read_only, idempotent, open_world = false)]
fn regex_find(args: RegexFindArgs) -> Result<Found, ToolError> {
    let re = regex(&args.pattern, args.case_insensitive)?;
    let limit = args.limit.clamp(1, MAX_MATCHES) as usize;
    let names: Vec<Option<&str>> = re.capture_names().collect();
    let mut matches = Vec::new();
    let mut count = 0usize;
    for caps in re.captures_iter(&args.text) {
        count += 1;
        if matches.len() >= limit {
            continue;
        }
        let Some(whole) = caps.get(0) else { continue };
        let groups = (1..caps.len())
            .map(|i| Group {
                name: names.get(i).copied().flatten().map(str::to_owned),
                text: caps.get(i).map(|m| m.as_str().to_owned()),
            })
            .collect();
        matches.push(Match {
            text: whole.as_str().to_owned(),
            start: whole.start(),
            end: whole.end(),
            groups,
        });
    }
    Ok(Found {
        count,
        truncated: count > matches.len(),
        matches,
    })
}

/// Arguments of `regex_replace`.
#[derive(Deserialize, JsonSchema)]
struct RegexReplaceArgs {
    /// The input text.
    text: String,
    /// Regular expression.
    pattern: String,
    /// The replacement; `$1` or `${name}` insert capture groups.
    replacement: String,
    /// Ignore case (default false).
    #[serde(default)]
    case_insensitive: bool,
    /// Replace every match (default true) or only the first.
    #[serde(default = "yes")]
    all: bool,
}

/// What `regex_replace` made.
#[derive(Serialize, JsonSchema)]
struct Replaced {
    /// The text after replacement.
    text: String,
    /// How many matches were replaced.
    replaced: usize,
}

/// Replace matches of a regular expression in a text; the replacement may use $1 or ${name} for capture groups.
#[tool(read_only, idempotent, open_world = false)]
fn regex_replace(args: RegexReplaceArgs) -> Result<Replaced, ToolError> {
    let re = regex(&args.pattern, args.case_insensitive)?;
    let count = re.find_iter(&args.text).count();
    let all = args.all;
    let text = if all {
        re.replace_all(&args.text, args.replacement.as_str())
    } else {
        re.replace(&args.text, args.replacement.as_str())
    };
    Ok(Replaced {
        text: text.into_owned(),
        replaced: if all { count } else { count.min(1) },
    })
}

/// A SHA-2 algorithm.
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "lowercase")]
enum Algorithm {
    // No doc comments on the variants: with them schemars writes a `oneOf`
    // of constants instead of a plain `enum`.
    Sha224,
    #[default]
    Sha256,
    Sha384,
    Sha512,
}

/// Arguments of `hash`.
#[derive(Deserialize, JsonSchema)]
struct HashArgs {
    /// The input text.
    text: String,
    /// Default sha256.
    #[serde(default)]
    algorithm: Algorithm,
}

/// A digest.
#[derive(Serialize, JsonSchema)]
struct Digested {
    /// The algorithm used.
    algorithm: Algorithm,
    /// The digest, lowercase hex.
    hex: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hash a text (UTF-8) with SHA-224, SHA-256, SHA-384 or SHA-512; returns lowercase hex.
#[tool(read_only, idempotent, open_world = false)]
fn hash(args: HashArgs) -> Result<Digested, ToolError> {
    let algorithm = args.algorithm;
    let text = args.text.as_bytes();
    let hex = match algorithm {
        Algorithm::Sha224 => hex(&sha2::Sha224::digest(text)),
        Algorithm::Sha256 => hex(&sha2::Sha256::digest(text)),
        Algorithm::Sha384 => hex(&sha2::Sha384::digest(text)),
        Algorithm::Sha512 => hex(&sha2::Sha512::digest(text)),
    };
    Ok(Digested { algorithm, hex })
}

/// Arguments of `base64_encode`.
#[derive(Deserialize, JsonSchema)]
struct EncodeArgs {
    /// The input text.
    text: String,
    /// URL-safe alphabet without padding (default false: standard with padding).
    #[serde(default)]
    url_safe: bool,
}

/// Base64 text.
#[derive(Serialize, JsonSchema)]
struct Encoded {
    /// The base64 text.
    data: String,
}

/// Encode a text (UTF-8) as base64 (standard alphabet with padding, or URL-safe without).
#[tool(read_only, idempotent, open_world = false)]
fn base64_encode(args: EncodeArgs) -> Result<Encoded, ToolError> {
    let data = if args.url_safe {
        URL_SAFE_NO_PAD.encode(args.text)
    } else {
        STANDARD.encode(args.text)
    };
    Ok(Encoded { data })
}

/// Arguments of `base64_decode`.
#[derive(Deserialize, JsonSchema)]
struct DecodeArgs {
    /// The base64 text.
    data: String,
}

/// Decoded text.
#[derive(Serialize, JsonSchema)]
struct Decoded {
    /// The decoded text.
    text: String,
}

/// Decode base64 (standard or URL-safe, padding optional) to UTF-8 text.
#[tool(read_only, idempotent, open_world = false)]
fn base64_decode(args: DecodeArgs) -> Result<Decoded, ToolError> {
    let normalised: String = args
        .data
        .trim()
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
        .map_err(|e| ToolError::invalid_argument("data", format!("not valid base64: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ToolError::invalid_argument("data", "the decoded bytes are not UTF-8 text"))?;
    Ok(Decoded { text })
}

/// Arguments of `word_count`.
#[derive(Deserialize, JsonSchema)]
struct WordCountArgs {
    /// The input text.
    text: String,
}

/// Counts of a text.
#[derive(Serialize, JsonSchema)]
struct WordCount {
    /// Unicode scalar values.
    chars: usize,
    /// UTF-8 bytes.
    bytes: usize,
    /// Whitespace-separated words.
    words: usize,
    /// Lines.
    lines: usize,
}

/// Count the characters, bytes, words and lines of a text, like wc.
#[tool(read_only, idempotent, open_world = false)]
fn word_count(args: WordCountArgs) -> Result<WordCount, ToolError> {
    let text = args.text;
    Ok(WordCount {
        chars: text.chars().count(),
        bytes: text.len(),
        words: text.split_whitespace().count(),
        lines: text.lines().count(),
    })
}

quiver_plugin_api::plugin! {
    name: "text",
    tools: [regex_find, regex_replace, hash, base64_encode, base64_decode, word_count],
}
