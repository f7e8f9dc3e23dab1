//! `${NAME}` references in config values (MCP server env, headers, model
//! API keys), expanded from the environment at load.

/// Replaces each `${NAME}` in `text` with `lookup(NAME)`; `$` not followed by
/// `{` is kept. Errors name the first unset variable, or say the text has an
/// unterminated or empty `${`.
pub fn expand_vars(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unterminated `${{` in `{text}`"));
        };
        let name = &after[..end];
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "`${{{name}}}` is not a variable reference; use ${{NAME}} with NAME from [A-Za-z0-9_]"
            ));
        }
        match lookup(name) {
            Some(value) => out.push_str(&value),
            None => return Err(format!("environment variable `{name}` is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::expand_vars;

    #[test]
    fn expands_names_and_keeps_a_lone_dollar() {
        let lookup = |name: &str| (name == "HOME").then(|| "/h".to_owned());
        assert_eq!(expand_vars("${HOME}/x $y", lookup).unwrap(), "/h/x $y");
        assert!(
            expand_vars("${NOPE}", lookup)
                .unwrap_err()
                .contains("`NOPE` is not set")
        );
        assert!(
            expand_vars("${HOME", lookup)
                .unwrap_err()
                .contains("unterminated")
        );
        assert!(
            expand_vars("${1A}", lookup)
                .unwrap_err()
                .contains("not a variable")
        );
    }
}
