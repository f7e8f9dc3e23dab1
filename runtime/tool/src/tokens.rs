//! Token estimates for text placed in the prompt: `ceil(chars / 4)`, with
//! chars counted as Unicode scalar values.

/// Characters of the compact JSON text of `value`, counted as it is
/// written, without the text (a listing's is tens of kilobytes); `None`
/// if `value` cannot be serialised.
pub fn json_chars<T: serde::Serialize + ?Sized>(value: &T) -> Option<usize> {
    /// Counts the characters of the UTF-8 text written to it: every byte
    /// but a continuation byte starts one.
    struct CharCount(usize);
    impl std::io::Write for CharCount {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = CharCount(0);
    serde_json::to_writer(&mut count, value).ok()?;
    Some(count.0)
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

    #[test]
    fn rounds_up() {
        assert_eq!(count(""), 0);
        assert_eq!(count("a"), 1);
        assert_eq!(count("abcd"), 1);
        assert_eq!(count("abcde"), 2);
        assert_eq!(tokens_for_chars(chars_for_tokens(7)), 7);
    }
}
