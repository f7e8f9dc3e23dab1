//! The checks that come before reading a document into its typed shape:
//! YAML syntax, duplicate keys ([`syntax_and_duplicates`]), and, for
//! `quiver config check`, every unknown key, wrong type and unknown word of
//! the whole file at once, measured against the list of settings
//! ([`check_document`]).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{DuplicateKeyPolicy, Options, Spanned};

use crate::ConfigError;
use crate::setting::{Below, Kind, Node, Setting, below_minimum};

/// A YAML node with no type of ours yet, every part keeping its position.
#[derive(Debug)]
enum Doc {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Doc>>),
    Map(Vec<(Spanned<String>, Spanned<Doc>)>),
}

impl<'de> Deserialize<'de> for Doc {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DocVisitor;
        impl<'de> Visitor<'de> for DocVisitor {
            type Value = Doc;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_unit<E>(self) -> Result<Doc, E> {
                Ok(Doc::Null)
            }
            fn visit_none<E>(self) -> Result<Doc, E> {
                Ok(Doc::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Doc, D::Error> {
                Doc::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Doc, E> {
                Ok(Doc::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Doc, E> {
                Ok(Doc::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Doc, E> {
                Ok(i64::try_from(v).map_or(Doc::Float(v as f64), Doc::Int))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Doc, E> {
                Ok(Doc::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Doc, E> {
                Ok(Doc::Str(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Doc, E> {
                Ok(Doc::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Doc, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Spanned<Doc>>()? {
                    items.push(item);
                }
                Ok(Doc::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<Spanned<KeyText>>()? {
                    let value = map.next_value::<Spanned<Doc>>()?;
                    let key = Spanned::new(key.value.0, key.referenced, key.defined);
                    entries.push((key, value));
                }
                Ok(Doc::Map(entries))
            }
        }
        deserializer.deserialize_any(DocVisitor)
    }
}

/// A map key as text, whatever scalar it is.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(KeyText(match Doc::deserialize(deserializer)? {
            Doc::Str(s) => s,
            Doc::Int(n) => n.to_string(),
            Doc::Bool(b) => b.to_string(),
            Doc::Float(f) => f.to_string(),
            Doc::Null => "null".into(),
            Doc::Seq(_) | Doc::Map(_) => return Err(de::Error::custom("a key must be a scalar")),
        }))
    }
}

fn position<T>(at: &Spanned<T>) -> (u32, u32) {
    (at.referenced.line() as u32, at.referenced.column() as u32)
}

fn invalid<T>(
    file: &str,
    at: &Spanned<T>,
    key: &str,
    message: String,
    allowed: String,
) -> ConfigError {
    let (line, column) = position(at);
    ConfigError::Invalid {
        file: file.to_owned(),
        line,
        column,
        key: key.to_owned(),
        message,
        allowed,
    }
}

/// Reads `text` as plain YAML, duplicate keys kept: a syntax error is a
/// [`ConfigError::Syntax`] (not a type error of whatever key was being
/// read); an empty document is `Ok(None)`.
fn read_plain(text: &str, file: &str) -> Result<Option<Spanned<Doc>>, ConfigError> {
    let mut options = Options::default();
    options.duplicate_keys = DuplicateKeyPolicy::LastWins;
    match serde_saphyr::from_str_with_options::<Option<Spanned<Doc>>>(text, options) {
        Ok(doc) => Ok(doc),
        Err(error) => {
            let inner = error.without_snippet();
            let (line, column) = inner
                .location()
                .map(|l| (l.line() as u32, l.column() as u32))
                .unwrap_or((0, 0));
            Err(ConfigError::Syntax {
                file: file.to_owned(),
                line,
                column,
                message: first_line(&inner.to_string()),
            })
        }
    }
}

/// The parser's message without its location prefix and source snippet.
pub(crate) fn first_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    first
        .trim_start_matches("error: ")
        .split_once(": ")
        .filter(|(prefix, _)| prefix.starts_with("line "))
        .map(|(_, rest)| rest)
        .unwrap_or(first);
    // Some messages repeat the position that we print ourselves.
    match first.rsplit_once(" at line ") {
        Some((head, tail)) if tail.contains(", column ") => head.to_owned(),
        _ => first.to_owned(),
    }
}

/// Every key written twice in one map, as errors at the second one.
fn duplicates(doc: &Spanned<Doc>, path: &str, file: &str, out: &mut Vec<ConfigError>) {
    match &doc.value {
        Doc::Map(entries) => {
            for (index, (key, value)) in entries.iter().enumerate() {
                let child = join(path, &key.value);
                if let Some((first, _)) =
                    entries[..index].iter().find(|(k, _)| k.value == key.value)
                {
                    out.push(invalid(
                        file,
                        key,
                        &child,
                        format!(
                            "duplicate key `{}` (first written at line {})",
                            key.value,
                            first.referenced.line()
                        ),
                        "each key once in a map".into(),
                    ));
                }
                duplicates(value, &child, file, out);
            }
        }
        Doc::Seq(items) => {
            for (index, item) in items.iter().enumerate() {
                duplicates(item, &format!("{path}[{index}]"), file, out);
            }
        }
        _ => {}
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The YAML syntax error of `text`, or every duplicate key in it.
pub fn syntax_and_duplicates(text: &str, file: &str) -> Vec<ConfigError> {
    match read_plain(text, file) {
        Err(error) => vec![error],
        Ok(None) => Vec::new(),
        Ok(Some(doc)) => {
            let mut out = Vec::new();
            duplicates(&doc, "", file, &mut out);
            out
        }
    }
}

/// Every problem of `text` that the list of `settings` can tell: a syntax
/// error (then nothing else), duplicate keys, unknown keys (with the
/// closest known one), values of the wrong type, unknown words and numbers
/// under a minimum that is not clamped. Checks that need the typed
/// sections (globs, URLs, names) come after, in each section's validation.
pub fn check_document(text: &str, file: &str, settings: &[Setting]) -> Vec<ConfigError> {
    let doc = match read_plain(text, file) {
        Err(error) => return vec![error],
        Ok(None) => return Vec::new(),
        Ok(Some(doc)) => doc,
    };
    let mut out = Vec::new();
    duplicates(&doc, "", file, &mut out);
    let root = Node::build(settings);
    let mut walk = Walk {
        file,
        text,
        out: &mut out,
    };
    walk.map_entries(&root, &doc, "", None);
    out
}

struct Walk<'a> {
    file: &'a str,
    text: &'a str,
    out: &'a mut Vec<ConfigError>,
}

/// The known key closest to `unknown`, when one is close enough.
pub fn did_you_mean<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::jaro_winkler(unknown, k), *k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

fn describe(doc: &Doc) -> String {
    match doc {
        Doc::Null => "nothing".into(),
        Doc::Bool(b) => format!("`{b}`"),
        Doc::Int(n) => format!("the integer {n}"),
        Doc::Float(f) => format!("the number {f}"),
        Doc::Str(s) => format!("`{s}`"),
        Doc::Seq(_) => "a list".into(),
        Doc::Map(_) => "a map".into(),
    }
}

impl Walk<'_> {
    fn wrong<T>(&mut self, at: &Spanned<T>, key: &str, expected: &str, found: &Doc, node: &Node) {
        let message = format!("wrong type: expected {expected}, found {}", describe(found));
        self.out
            .push(invalid(self.file, at, key, message, node.allowed()));
    }

    /// `doc` under the map node `node`; `key_at` is where its key was
    /// written (a section of the wrong type is reported there).
    fn map_entries(
        &mut self,
        node: &Node,
        doc: &Spanned<Doc>,
        path: &str,
        key_at: Option<&Spanned<String>>,
    ) {
        let entries = match &doc.value {
            Doc::Null => return,
            Doc::Map(entries) => entries,
            other => {
                let key = if path.is_empty() { "<root>" } else { path };
                match key_at {
                    Some(at) => self.wrong(at, key, "a map", other, node),
                    None => self.wrong(doc, key, "a map", other, node),
                }
                return;
            }
        };
        let known = node.child_names();
        for (key, value) in entries {
            let child_path = join(path, &key.value);
            match node.child(&key.value) {
                Some(child) => self.value(child, value, &child_path, key),
                None => {
                    let mut message = format!("unknown key `{}`", key.value);
                    if let Some(close) = did_you_mean(&key.value, &known) {
                        message.push_str(&format!("; did you mean `{close}`?"));
                    }
                    self.out.push(invalid(
                        self.file,
                        key,
                        &child_path,
                        message,
                        format!("keys {}", known.join(", ")),
                    ));
                }
            }
        }
    }

    fn value(&mut self, node: &Node, doc: &Spanned<Doc>, path: &str, key_at: &Spanned<String>) {
        let Some(setting) = node.setting else {
            return self.map_entries(node, doc, path, Some(key_at));
        };
        if matches!(doc.value, Doc::Null) {
            return;
        }
        match setting.kind {
            Kind::Table { or_bool } => {
                if !(or_bool && matches!(doc.value, Doc::Bool(_))) {
                    self.map_entries(node, doc, path, Some(key_at));
                }
            }
            Kind::Tables => match (&doc.value, node.item()) {
                (Doc::Seq(items), Some(item)) => {
                    for (index, entry) in items.iter().enumerate() {
                        self.map_entries(item, entry, &format!("{path}[{index}]"), None);
                    }
                }
                (other, _) => self.wrong(doc, path, "a list of maps", other, node),
            },
            Kind::Integer { min, below, .. } => match doc.value {
                Doc::Int(n) if n < min && below == Below::Error => {
                    self.out.push(invalid(
                        self.file,
                        doc,
                        path,
                        below_minimum(n, min),
                        node.allowed(),
                    ));
                }
                Doc::Int(_) => {}
                ref other => self.wrong(doc, path, "an integer", other, node),
            },
            Kind::Bool => {
                if !matches!(doc.value, Doc::Bool(_)) {
                    self.wrong(doc, path, "true or false", &doc.value, node);
                }
            }
            Kind::Enum(words) => {
                let word = match &doc.value {
                    Doc::Str(s) => Some(s.clone()),
                    Doc::Bool(b) => Some(self.source_word(doc).unwrap_or_else(|| b.to_string())),
                    _ => None,
                };
                match word {
                    Some(word) if words.contains(&word.as_str()) => {}
                    Some(word) => {
                        let mut message = format!("unknown value `{word}`");
                        if let Some(close) = did_you_mean(&word, words) {
                            message.push_str(&format!("; did you mean `{close}`?"));
                        }
                        self.out
                            .push(invalid(self.file, doc, path, message, node.allowed()));
                    }
                    None => self.wrong(doc, path, "one word", &doc.value, node),
                }
            }
            Kind::Text(_) => self.scalar(doc, path, node),
            Kind::List(_) => match &doc.value {
                Doc::Seq(items) => {
                    for (index, item) in items.iter().enumerate() {
                        self.scalar(item, &format!("{path}[{index}]"), node);
                    }
                }
                other => self.wrong(doc, path, "a list", other, node),
            },
            Kind::Map(_) => match &doc.value {
                Doc::Map(entries) => {
                    for (key, value) in entries {
                        self.scalar(value, &join(path, &key.value), node);
                    }
                }
                other => self.wrong(doc, path, "a map", other, node),
            },
        }
    }

    /// The scalar at `doc` as written (`on` rather than the `true` the
    /// parser makes of it).
    fn source_word<T>(&self, doc: &Spanned<T>) -> Option<String> {
        let span = doc.referenced.span();
        let start = usize::try_from(span.byte_offset()?).ok()?;
        let len = usize::try_from(span.byte_len()?).ok()?;
        let word = self.text.get(start..start + len)?;
        word.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
            .then(|| word.to_owned())
    }

    fn scalar(&mut self, doc: &Spanned<Doc>, path: &str, node: &Node) {
        if let Doc::Seq(_) | Doc::Map(_) = doc.value {
            self.wrong(doc, path, "a single value", &doc.value, node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::DefaultValue;

    const SETTINGS: &[Setting] = &[
        Setting {
            key: "tools.search",
            kind: Kind::Table { or_bool: true },
            default: DefaultValue::Bool(true),
            doc: "",
        },
        Setting {
            key: "tools.search.enabled",
            kind: Kind::Enum(&["auto", "on", "off"]),
            default: DefaultValue::Str("auto"),
            doc: "",
        },
        Setting::int("tools.search.limit", 1, 50, 20, ""),
        Setting::timeout("approval.timeout_s", 1, 100, 30, ""),
        Setting {
            key: "servers.NAME.url",
            kind: Kind::Text("a URL"),
            default: DefaultValue::Required,
            doc: "",
        },
        Setting {
            key: "servers.NAME.args",
            kind: Kind::List("a list of strings"),
            default: DefaultValue::List(&[]),
            doc: "",
        },
    ];

    fn problems(text: &str) -> Vec<String> {
        check_document(text, "f", SETTINGS)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_good_document_has_no_problems() {
        assert!(problems("").is_empty());
        assert!(problems("tools:\n  search: false\n").is_empty());
        let text = "tools:\n  search:\n    enabled: on\n    limit: 99\nservers:\n  a:\n    url: x\n    args: [1, b]\n";
        assert_eq!(problems(text), Vec::<String>::new());
    }

    #[test]
    fn every_problem_is_reported_with_a_suggestion() {
        let text = "tools:\n  search:\n    enable: on\n    limit: lots\napproval:\n  timeout_s: 0\nservers:\n  a:\n    ur: x\nextra: 1\n";
        let found = problems(text);
        assert_eq!(found.len(), 5, "{found:#?}");
        assert!(found[0].starts_with("f:3:5: `tools.search.enable`: unknown key `enable`; did you mean `enabled`?; allowed: keys enabled, limit"), "{}", found[0]);
        assert!(
            found[1].starts_with(
                "f:4:12: `tools.search.limit`: wrong type: expected an integer, found `lots`"
            ),
            "{}",
            found[1]
        );
        assert!(
            found[2].contains("`approval.timeout_s`: 0 is less than 1"),
            "{}",
            found[2]
        );
        assert!(
            found[3].contains("`servers.a.ur`: unknown key `ur`; did you mean `url`?"),
            "{}",
            found[3]
        );
        let extra = problems("extra: 1\n");
        assert!(
            extra[0].contains("allowed: keys tools, approval, servers"),
            "{extra:?}"
        );
    }

    #[test]
    fn syntax_errors_and_duplicates_read_as_such() {
        assert_eq!(
            problems("tools: [1\n"),
            ["f:1:8: YAML syntax error: unclosed bracket '['"]
        );
        let found = problems("tools:\n  search: true\n  search: false\n");
        assert_eq!(
            found,
            [
                "f:3:3: `tools.search`: duplicate key `search` (first written at line 2); allowed: each key once in a map"
            ]
        );
    }
}
