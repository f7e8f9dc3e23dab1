//! Each key of `quiver.yaml` described once: its name, what it takes, its
//! default and what it means ([`Setting`]). Every section's crate exports
//! the list of its keys; from the whole list come the range checks and the
//! `allowed` texts of the errors, the checks of `quiver config check`
//! ([`crate::check_document`]), the JSON Schema ([`json_schema`]) and the
//! README's table ([`markdown_table`]).
//!
//! Keys are dotted paths; `NAME` stands for a name of the user's (a map
//! from names to entries, such as `mcp_servers.NAME.url`) and `[]` for the
//! items of a list of maps (`guardrails.rules[].tool`).

use serde_json::{Map, Value, json};
use serde_saphyr::Spanned;

use crate::{ConfigError, ConfigWarning};

/// One key of `quiver.yaml`.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The dotted key, e.g. `approval.timeout_s` or `mcp_servers.NAME.url`.
    pub key: &'static str,
    /// What the key takes.
    pub kind: Kind,
    /// Its value when absent.
    pub default: DefaultValue,
    /// What it means (markdown, one paragraph).
    pub doc: &'static str,
}

/// What a key takes.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// An integer from `min` to `max`: a larger one is clamped to `max`
    /// with a warning; a smaller one is clamped to `min` with a warning, or
    /// is an error when `below` is [`Below::Error`].
    Integer {
        /// The smallest value.
        min: i64,
        /// The largest value.
        max: i64,
        /// What a value under `min` does.
        below: Below,
    },
    /// `true` or `false`.
    Bool,
    /// One of these words.
    Enum(&'static [&'static str]),
    /// A single value, described (e.g. "an http:// or https:// URL").
    Text(&'static str),
    /// A list of single values, described.
    List(&'static str),
    /// A map of names to single values, described.
    Map(&'static str),
    /// A map holding the keys below it; `true` and `false` too when
    /// `or_bool`.
    Table {
        /// Whether `true` and `false` are accepted as well.
        or_bool: bool,
    },
    /// A list of maps, each holding the keys below `KEY[]`.
    Tables,
}

/// What a number under a key's minimum does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Below {
    /// It is clamped to the minimum, with a warning.
    Clamp,
    /// It is an error: the minimum would not do what was meant (a timeout
    /// of zero, a negative one).
    Error,
}

/// A key's value when it is absent.
#[derive(Debug, Clone, Copy)]
pub enum DefaultValue {
    /// No value: the feature is off or the key is optional.
    None,
    /// The key must be given.
    Required,
    /// This integer.
    Int(i64),
    /// This boolean.
    Bool(bool),
    /// This word or string.
    Str(&'static str),
    /// This list of strings.
    List(&'static [&'static str]),
    /// An empty map.
    EmptyMap,
    /// A value that depends on the situation, described.
    Described(&'static str),
}

impl Setting {
    /// An integer key that clamps values out of `min..=max`.
    pub const fn int(
        key: &'static str,
        min: i64,
        max: i64,
        default: i64,
        doc: &'static str,
    ) -> Setting {
        Setting {
            key,
            kind: Kind::Integer {
                min,
                max,
                below: Below::Clamp,
            },
            default: DefaultValue::Int(default),
            doc,
        }
    }

    /// An integer key (a timeout) for which a value under `min` is an
    /// error; larger than `max` is clamped.
    pub const fn timeout(
        key: &'static str,
        min: i64,
        max: i64,
        default: i64,
        doc: &'static str,
    ) -> Setting {
        Setting {
            key,
            kind: Kind::Integer {
                min,
                max,
                below: Below::Error,
            },
            default: DefaultValue::Int(default),
            doc,
        }
    }

    /// The integer default (0 for a key without one).
    pub const fn default_int(&self) -> i64 {
        match self.default {
            DefaultValue::Int(n) => n,
            _ => 0,
        }
    }

    /// The range `(min, max)` of an integer key.
    pub const fn range(&self) -> (i64, i64) {
        match self.kind {
            Kind::Integer { min, max, .. } => (min, max),
            _ => (i64::MIN, i64::MAX),
        }
    }

    /// What the key accepts, as the `allowed` part of an error; for a
    /// table, `children` are the keys it holds.
    pub fn allowed(&self, children: &[&str]) -> String {
        match self.kind {
            Kind::Integer { min, max, .. } => format!("an integer from {min} to {max}"),
            Kind::Bool => "true, false".into(),
            Kind::Enum(words) => words.join(", "),
            Kind::Text(what) | Kind::List(what) | Kind::Map(what) => what.into(),
            Kind::Table { or_bool: false } => format!("a map with keys {}", children.join(", ")),
            Kind::Table { or_bool: true } => {
                format!("true, false or a map with keys {}", children.join(", "))
            }
            Kind::Tables => format!("a list of maps with keys {}", children.join(", ")),
        }
    }
}

// ---- the key tree ------------------------------------------------------------

/// The segments of a key: `guardrails.rules[].tool` is `guardrails`,
/// `rules`, `[]`, `tool`; an index `[3]` of a concrete key is `[]`.
pub(crate) fn segments(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            out.push(name.to_owned());
        }
        for _ in rest.split('[').filter(|r| r.ends_with(']')) {
            out.push("[]".to_owned());
        }
    }
    out
}

/// A node of the tree the settings' keys make: the root, a section, a
/// table, a `NAME` entry, a `[]` item or a leaf key.
#[derive(Debug, Default)]
pub(crate) struct Node<'s> {
    pub setting: Option<&'s Setting>,
    pub children: Vec<(String, Node<'s>)>,
}

impl<'s> Node<'s> {
    pub(crate) fn build(settings: &'s [Setting]) -> Node<'s> {
        let mut root = Node::default();
        for setting in settings {
            let mut node = &mut root;
            for segment in segments(setting.key) {
                let index = match node.children.iter().position(|(s, _)| *s == segment) {
                    Some(index) => index,
                    None => {
                        node.children.push((segment.clone(), Node::default()));
                        node.children.len() - 1
                    }
                };
                node = &mut node.children[index].1;
            }
            node.setting = Some(setting);
        }
        root
    }

    /// The child for a concrete segment: by name, else a `NAME` entry.
    pub(crate) fn child(&self, segment: &str) -> Option<&Node<'s>> {
        self.children
            .iter()
            .find(|(s, _)| s == segment)
            .or_else(|| self.children.iter().find(|(s, _)| s == "NAME"))
            .map(|(_, n)| n)
    }

    /// The names of the keys a map node holds.
    pub(crate) fn child_names(&self) -> Vec<&str> {
        self.children
            .iter()
            .map(|(s, _)| s.as_str())
            .filter(|s| *s != "NAME" && *s != "[]")
            .collect()
    }

    /// The `[]` item of a list of maps.
    pub(crate) fn item(&self) -> Option<&Node<'s>> {
        self.children
            .iter()
            .find(|(s, _)| s == "[]")
            .map(|(_, n)| n)
    }

    /// What this node accepts, for an error's `allowed` part.
    pub(crate) fn allowed(&self) -> String {
        if let Some(setting) = self.setting {
            let children = match setting.kind {
                Kind::Tables => self.item().map(|i| i.child_names()).unwrap_or_default(),
                _ => self.child_names(),
            };
            return setting.allowed(&children);
        }
        if let Some(entry) = self.children.iter().find(|(s, _)| s == "NAME") {
            return format!(
                "a map of names to maps with keys {}",
                entry.1.child_names().join(", ")
            );
        }
        format!("a map with keys {}", self.child_names().join(", "))
    }

    /// Whether the node holds other keys (a map or a list of maps).
    pub(crate) fn is_container(&self) -> bool {
        match self.setting.map(|s| s.kind) {
            Some(Kind::Table { .. } | Kind::Tables) | None => true,
            Some(_) => false,
        }
    }
}

/// What `key` (a concrete key such as `mcp_servers.x.call_timeout_s` or
/// `plugins.dirs[0]`) accepts: the `allowed` text of the deepest key of
/// `settings` it names or lies under; for a key unknown under a map, the
/// keys that map holds. `None` when no setting is near it.
pub fn allowed_in(settings: &[Setting], key: &str) -> Option<String> {
    let root = Node::build(settings);
    let mut node = &root;
    let parts = segments(key);
    for (depth, segment) in parts.iter().enumerate() {
        match node.child(segment) {
            Some(child) => node = child,
            None if !node.is_container() => return Some(node.allowed()),
            None if depth == 0 => return None,
            None => return Some(format!("keys {}", node.child_names().join(", "))),
        }
    }
    Some(node.allowed())
}

/// The setting of `settings` whose key is `key`, found at compile time
/// when used in a `const` (a wrong key does not build).
pub const fn by_key(settings: &'static [Setting], key: &str) -> &'static Setting {
    let mut index = 0;
    while index < settings.len() {
        if str_eq(settings[index].key, key) {
            return &settings[index];
        }
        index += 1;
    }
    panic!("no setting has this key");
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut index = 0;
    while index < a.len() {
        if a[index] != b[index] {
            return false;
        }
        index += 1;
    }
    true
}

/// The setting of `settings` whose key is `key` exactly.
pub fn find<'s>(settings: &'s [Setting], key: &str) -> Option<&'s Setting> {
    settings.iter().find(|s| s.key == key)
}

// ---- numbers ---------------------------------------------------------------

/// The integer `value` of `setting` (its default when absent), written at
/// `key` (the concrete key, for `NAME` settings): a value over the maximum
/// is clamped with a warning; one under the minimum too, unless the
/// setting says [`Below::Error`], when it is an error naming the key and
/// the range.
pub fn int_setting(
    value: &Option<Spanned<i64>>,
    setting: &Setting,
    key: &str,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<i64, ConfigError> {
    let (min, _) = setting.range();
    if let (Some(spanned), Kind::Integer { below, .. }) = (value, setting.kind)
        && spanned.value < min
        && below == Below::Error
    {
        return Err(crate::invalid_at(
            file,
            spanned,
            key.to_owned(),
            below_minimum(spanned.value, min),
            setting.allowed(&[]),
        ));
    }
    Ok(crate::clamp(
        value,
        key,
        setting.range(),
        setting.default_int(),
        file,
        warnings,
    ))
}

/// The message of a number under a minimum that is not clamped.
pub(crate) fn below_minimum(value: i64, min: i64) -> String {
    format!("{value} is less than {min}, the smallest value that works here")
}

// ---- JSON Schema -------------------------------------------------------------

/// The JSON Schema (draft 2020-12) of a file holding `settings`.
pub fn json_schema(settings: &[Setting], title: &str) -> Value {
    let root = Node::build(settings);
    let mut schema = node_schema(&root);
    if let Value::Object(map) = &mut schema {
        let mut head = Map::new();
        head.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        head.insert("title".into(), json!(title));
        head.append(map);
        *map = head;
    }
    schema
}

fn node_schema(node: &Node<'_>) -> Value {
    let mut schema = match node.setting.map(|s| s.kind) {
        Some(Kind::Integer { min, max, .. }) => {
            json!({"type": "integer", "minimum": min, "maximum": max})
        }
        Some(Kind::Bool) => json!({"type": "boolean"}),
        Some(Kind::Enum(words)) => json!({"enum": words}),
        Some(Kind::Text(_)) => json!({"type": "string"}),
        Some(Kind::List(_)) => json!({"type": "array", "items": {"type": "string"}}),
        Some(Kind::Map(_)) => {
            json!({"type": "object", "additionalProperties": {"type": "string"}})
        }
        Some(Kind::Tables) => {
            let item = node.item().map(node_schema).unwrap_or(json!({}));
            json!({"type": "array", "items": item})
        }
        Some(Kind::Table { or_bool }) => {
            let table = table_schema(node);
            if or_bool {
                json!({"anyOf": [{"type": "boolean"}, table]})
            } else {
                table
            }
        }
        None => table_schema(node),
    };
    if let (Some(setting), Value::Object(map)) = (node.setting, &mut schema) {
        map.insert("description".into(), json!(plain(setting.doc)));
        let default = match setting.default {
            DefaultValue::Int(n) => Some(json!(n)),
            DefaultValue::Bool(b) => Some(json!(b)),
            DefaultValue::Str(s) => Some(json!(s)),
            DefaultValue::List(items) => Some(json!(items)),
            DefaultValue::EmptyMap => Some(json!({})),
            DefaultValue::None | DefaultValue::Required | DefaultValue::Described(_) => None,
        };
        if let Some(default) = default {
            map.insert("default".into(), default);
        }
    }
    schema
}

fn table_schema(node: &Node<'_>) -> Value {
    if let Some((_, entry)) = node.children.iter().find(|(s, _)| s == "NAME") {
        return json!({
            "type": "object",
            "additionalProperties": node_schema(entry),
        });
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, child) in &node.children {
        if name == "[]" {
            continue;
        }
        if matches!(
            child.setting.map(|s| s.default),
            Some(DefaultValue::Required)
        ) {
            required.push(json!(name));
        }
        properties.insert(name.clone(), node_schema(child));
    }
    let mut schema = json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
    });
    if !required.is_empty()
        && let Value::Object(map) = &mut schema
    {
        map.insert("required".into(), Value::Array(required));
    }
    schema
}

/// `doc` without markdown's backticks, for the schema's descriptions.
fn plain(doc: &str) -> String {
    doc.replace('`', "")
}

// ---- the README table ----------------------------------------------------------

/// The markdown table of `settings`: key, values, default, meaning.
pub fn markdown_table(settings: &[Setting]) -> String {
    let root = Node::build(settings);
    let mut out = String::from("| key | values | default | meaning |\n|---|---|---|---|\n");
    for setting in settings {
        let node = find_node(&root, setting.key);
        let values = match (setting.kind, node) {
            (Kind::Integer { min, max, .. }, _) => format!("integer {min}..{max}"),
            (Kind::Bool, _) => "`true`, `false`".into(),
            (Kind::Enum(words), _) => words
                .iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(", "),
            (Kind::Text(what) | Kind::List(what) | Kind::Map(what), _) => what.into(),
            (Kind::Table { or_bool }, Some(node)) => format!(
                "{}a map with keys {}",
                if or_bool { "`true`, `false` or " } else { "" },
                code_list(&node.child_names())
            ),
            (Kind::Tables, Some(node)) => format!(
                "a list of maps with keys {}",
                code_list(&node.item().map(|i| i.child_names()).unwrap_or_default())
            ),
            (Kind::Table { .. } | Kind::Tables, None) => "a map".into(),
        };
        let default = match setting.default {
            DefaultValue::None => "none".into(),
            DefaultValue::Required => "required".into(),
            DefaultValue::Int(n) => format!("`{n}`"),
            DefaultValue::Bool(b) => format!("`{b}`"),
            DefaultValue::Str(s) => format!("`{s}`"),
            DefaultValue::List(items) => format!("`[{}]`", items.join(", ")),
            DefaultValue::EmptyMap => "`{}`".into(),
            DefaultValue::Described(text) => text.into(),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            setting.key,
            cell(&values),
            cell(&default),
            cell(setting.doc)
        ));
    }
    out
}

fn find_node<'a, 's>(root: &'a Node<'s>, key: &str) -> Option<&'a Node<'s>> {
    let mut node = root;
    for segment in segments(key) {
        node = &node.children.iter().find(|(s, _)| *s == segment)?.1;
    }
    Some(node)
}

fn code_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A table cell: `|` escaped, on one line.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// `text` with the part between the lines `start` and `end` replaced by
/// `body`; `None` when a marker is missing.
pub fn replace_between(text: &str, start: &str, end: &str, body: &str) -> Option<String> {
    let from = text.find(start)? + start.len();
    let to = from + text[from..].find(end)?;
    Some(format!("{}\n{}{}", &text[..from], body, &text[to..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_saphyr::Location;

    const SETTINGS: &[Setting] = &[
        Setting {
            key: "a",
            kind: Kind::Table { or_bool: false },
            default: DefaultValue::None,
            doc: "the a section",
        },
        Setting::int("a.n", 1, 10, 5, "a number"),
        Setting::timeout("a.t", 1, 60, 30, "a timeout"),
        Setting {
            key: "s.NAME.url",
            kind: Kind::Text("a URL"),
            default: DefaultValue::Required,
            doc: "where",
        },
        Setting {
            key: "r",
            kind: Kind::Tables,
            default: DefaultValue::List(&[]),
            doc: "rules",
        },
        Setting {
            key: "r[].tool",
            kind: Kind::Text("a glob"),
            default: DefaultValue::Required,
            doc: "which tool",
        },
    ];

    #[test]
    fn keys_split_into_segments() {
        assert_eq!(segments("r[].tool"), ["r", "[]", "tool"]);
        assert_eq!(segments("r[3].tool[0]"), ["r", "[]", "tool", "[]"]);
        assert_eq!(segments("s.NAME.url"), ["s", "NAME", "url"]);
    }

    #[test]
    fn allowed_texts_come_from_the_settings() {
        assert_eq!(
            allowed_in(SETTINGS, "a.n").as_deref(),
            Some("an integer from 1 to 10")
        );
        assert_eq!(allowed_in(SETTINGS, "a.x").as_deref(), Some("keys n, t"));
        assert_eq!(
            allowed_in(SETTINGS, "a").as_deref(),
            Some("a map with keys n, t")
        );
        assert_eq!(
            allowed_in(SETTINGS, "s.github.url").as_deref(),
            Some("a URL")
        );
        assert_eq!(allowed_in(SETTINGS, "r[2].tool").as_deref(), Some("a glob"));
        assert_eq!(
            allowed_in(SETTINGS, "r").as_deref(),
            Some("a list of maps with keys tool")
        );
        assert_eq!(allowed_in(SETTINGS, "zzz"), None);
    }

    #[test]
    fn a_timeout_under_its_minimum_is_an_error() {
        let value = |n| Some(Spanned::new(n, Location::UNKNOWN, Location::UNKNOWN));
        let mut warnings = Vec::new();
        let t = &SETTINGS[2];
        let error = int_setting(&value(0), t, "a.t", "f", &mut warnings).unwrap_err();
        assert!(
            error.to_string().contains("`a.t`: 0 is less than 1")
                && error
                    .to_string()
                    .ends_with("allowed: an integer from 1 to 60"),
            "{error}"
        );
        assert_eq!(
            int_setting(&value(99), t, "a.t", "f", &mut warnings).unwrap(),
            60
        );
        assert_eq!(
            int_setting(&None, t, "a.t", "f", &mut warnings).unwrap(),
            30
        );
        assert_eq!(warnings.len(), 1);
        assert_eq!(
            int_setting(&value(0), &SETTINGS[1], "a.n", "f", &mut warnings).unwrap(),
            1
        );
    }

    #[test]
    fn schema_nests_names_and_lists() {
        let schema = json_schema(SETTINGS, "t");
        assert_eq!(schema["properties"]["a"]["properties"]["n"]["maximum"], 10);
        assert_eq!(
            schema["properties"]["s"]["additionalProperties"]["required"][0],
            "url"
        );
        assert_eq!(
            schema["properties"]["r"]["items"]["properties"]["tool"]["type"],
            "string"
        );
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn markdown_rows_follow_the_list() {
        let table = markdown_table(SETTINGS);
        assert!(
            table.contains("| `a.n` | integer 1..10 | `5` | a number |"),
            "{table}"
        );
        assert!(
            table.contains("| `r` | a list of maps with keys `tool` |"),
            "{table}"
        );
        let text = "x\n<!-- s -->\nold\n<!-- e -->\ny";
        assert_eq!(
            replace_between(text, "<!-- s -->", "<!-- e -->", "new\n").as_deref(),
            Some("x\n<!-- s -->\nnew\n<!-- e -->\ny")
        );
    }
}
