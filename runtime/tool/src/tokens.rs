//! Token estimates for text placed in the prompt: `ceil(chars / 4)`, with
//! chars counted as Unicode scalar values.

use serde_json::Value;

/// Characters (Unicode scalar values) of the compact JSON text of
/// `value`, as `serde_json` writes it, counted without writing it: a
/// listing's text is tens of kilobytes, and counting it through the
/// serialiser's byte-by-byte escaping cost more than planning the listing.
pub fn json_chars(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        // Numbers are short; their text is the serialiser's own.
        Value::Number(number) => number.to_string().len(),
        Value::String(text) => json_str_chars(text),
        Value::Array(items) => {
            2 + items.iter().map(json_chars).sum::<usize>() + items.len().saturating_sub(1)
        }
        Value::Object(entries) => {
            2 + entries
                .iter()
                .map(|(key, value)| json_str_chars(key) + 1 + json_chars(value))
                .sum::<usize>()
                + entries.len().saturating_sub(1)
        }
    }
}

/// Characters of `text` as a JSON string literal, quotes included:
/// `"`, `\\` and the control characters `serde_json` writes as two-character
/// escapes (`\b`, `\t`, `\n`, `\f`, `\r`) count 2, the other control
/// characters 6 (`\u00XX`), anything else 1.
pub fn json_str_chars(text: &str) -> usize {
    let (mut chars, mut escaped, mut long) = (0usize, 0usize, 0usize);
    // Byte counters per chunk of at most 255 bytes, which cannot overflow,
    // let the compiler count 16 bytes at a time: a listing's tens of
    // kilobytes are counted at every arrangement.
    for chunk in text.as_bytes().chunks(255) {
        let (mut c, mut e, mut l) = (0u8, 0u8, 0u8);
        for &b in chunk {
            // Every byte but a UTF-8 continuation byte starts a character.
            c += u8::from(b & 0xC0 != 0x80);
            e += u8::from(b < 0x20 || b == b'"' || b == b'\\');
            l += u8::from(b < 0x20 && !matches!(b, 0x08 | 0x09 | 0x0A | 0x0C | 0x0D));
        }
        chars += usize::from(c);
        escaped += usize::from(e);
        long += usize::from(l);
    }
    2 + chars + escaped + 4 * long
}

/// Tokens of `chars` characters of prompt text.
pub fn tokens_for_chars(chars: u64) -> u64 {
    chars.div_ceil(4)
}

/// Tokens of `text`.
///
/// ```
/// assert_eq!(quiver_tool::tokens::count("abcde"), 2);
/// assert_eq!(quiver_tool::tokens::count("ééé"), 1);
/// ```
pub fn count(text: &str) -> u64 {
    tokens_for_chars(text.chars().count() as u64)
}

/// The most characters whose token count stays within `tokens`.
pub fn chars_for_tokens(tokens: u64) -> u64 {
    tokens.saturating_mul(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;
    use serde_json::json;

    /// Any JSON value, with strings of every escape class and of
    /// multi-byte characters.
    fn value() -> impl Strategy<Value = Value> {
        let text = "[\\x00-\\x1f\"\\\\a-z é✓𝄞\\x7f]{0,40}";
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|n| json!(n)),
            text.prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((text, inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn json_chars_is_the_length_of_the_serialised_text(value in value()) {
            prop_assert_eq!(json_chars(&value), value.to_string().chars().count());
        }
    }

    #[test]
    fn json_chars_of_long_and_unusual_strings() {
        for value in [
            json!({"é": "naïve — ünïcödé ✓ 𝄞", "quote": "\"back\\slash\"\n\t", "ctl": "\u{1}\u{7f}"}),
            json!("x\n".repeat(70_000)),
            json!(1e300),
            json!(-0.0),
        ] {
            assert_eq!(
                json_chars(&value),
                value.to_string().chars().count(),
                "{value}"
            );
        }
    }

    #[test]
    fn rounds_up() {
        assert_eq!(count(""), 0);
        assert_eq!(count("a"), 1);
        assert_eq!(count("abcd"), 1);
        assert_eq!(count("abcde"), 2);
        assert_eq!(tokens_for_chars(chars_for_tokens(7)), 7);
    }
}
