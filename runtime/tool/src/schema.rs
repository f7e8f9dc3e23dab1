//! A tool's input schema, kept as its compact JSON text and parsed only
//! when someone needs the tree.
//!
//! A parsed `serde_json::Value` of a typical tool schema takes about seven
//! times the bytes of its text (a map node and a string per key), and a
//! registry of 100,000 tools held them all, then copied them. A [`Schema`]
//! holds compact JSON text (so its length is the definition's size as
//! sent, without counting), the names of its required parameters (which
//! search reads in its inner loops), and the tree, parsed on first
//! [`Schema::value`] and kept: only tools that are described, validated or
//! sent eagerly ever pay for it. Bulk readers (index builds) take
//! [`Schema::parsed`], which parses without keeping.
//!
//! A schema built from a `Value` holds what `serde_json` writes for it; one
//! read from a document (a catalog file) is transcoded straight to compact
//! text, in the document's own key order, without building the tree: at
//! 100,000 tools the trees were half the cost of reading the file.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// A JSON Schema as compact text, shared by pointer when cloned.
#[derive(Clone)]
pub struct Schema(Arc<Inner>);

struct Inner {
    /// Compact JSON (no whitespace): `serde_json::to_string` of the value,
    /// or a document's schema in its own key order.
    text: Box<str>,
    /// The names in the schema's `required` array that are strings.
    required: Box<[Box<str>]>,
    /// The tree, once someone asked for it with [`Schema::value`].
    value: OnceLock<Value>,
}

impl Schema {
    /// The schema of `value`, which is dropped: the tree is parsed again
    /// from the text if someone needs it.
    pub fn new(value: &Value) -> Schema {
        let required = required_list(value.get("required"));
        Schema(Arc::new(Inner {
            // Writing a `Value` to a string cannot fail: its keys are strings.
            text: serde_json::to_string(value).unwrap_or_default().into(),
            required,
            value: OnceLock::new(),
        }))
    }

    /// `{"type": "object", "properties": {}}`: what a tool that declares no
    /// arguments takes.
    pub fn empty_object() -> Schema {
        Schema::new(&serde_json::json!({"type": "object", "properties": {}}))
    }

    /// The compact JSON text, as `serde_json` writes the value.
    pub fn text(&self) -> &str {
        &self.0.text
    }

    /// Characters of [`Schema::text`] (what the schema adds to a tool's
    /// definition as sent).
    pub fn chars(&self) -> usize {
        self.0.text.chars().count()
    }

    /// The parsed tree, parsed on the first call and kept.
    pub fn value(&self) -> &Value {
        self.0.value.get_or_init(|| self.parse())
    }

    /// The tree: the kept one if [`Schema::value`] was called, else parsed
    /// for this caller alone (and dropped with the `Cow`).
    pub fn parsed(&self) -> Cow<'_, Value> {
        match self.0.value.get() {
            Some(value) => Cow::Borrowed(value),
            None => Cow::Owned(self.parse()),
        }
    }

    fn parse(&self) -> Value {
        // The text was written by serde_json (from a `Value` or a
        // transcoder), so it parses (and float_roundtrip keeps numbers).
        serde_json::from_str(&self.0.text).unwrap_or_default()
    }

    /// The schema whose compact JSON is `text`, which serde_json wrote.
    fn from_compact(text: String) -> Schema {
        let required = required_names(&text).unwrap_or_else(|| {
            let value: Value = serde_json::from_str(&text).unwrap_or_default();
            required_list(value.get("required"))
        });
        Schema(Arc::new(Inner {
            text: text.into(),
            required,
            value: OnceLock::new(),
        }))
    }

    /// Names listed in the schema's `required` array.
    pub fn required(&self) -> impl Iterator<Item = &str> {
        self.0.required.iter().map(|name| &**name)
    }

    /// Whether both are the same schema object (a clone of one another).
    pub fn ptr_eq(a: &Schema, b: &Schema) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

/// The strings of a schema's `required` entry (none unless it is an
/// array).
fn required_list(required: Option<&Value>) -> Box<[Box<str>]> {
    required
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(Box::from)
        .collect()
}

/// [`required_list`] read off an object's text, building only its
/// `required` entry's tree; `None` when the text is not a plain object
/// (not an object, or `required` given twice), for the caller to parse.
fn required_names(text: &str) -> Option<Box<[Box<str>]>> {
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(borrow, default)]
        required: Option<&'a serde_json::value::RawValue>,
    }
    if !text.starts_with('{') {
        return None;
    }
    let top: Top = serde_json::from_str(text).ok()?;
    Some(match top.required {
        None => Box::default(),
        Some(raw) => required_list(Some(&serde_json::from_str(raw.get()).ok()?)),
    })
}

impl From<Value> for Schema {
    /// The schema of `value`; the tree is dropped like any other (see
    /// [`Schema::new`]).
    fn from(value: Value) -> Schema {
        Schema::new(&value)
    }
}

impl From<&Value> for Schema {
    fn from(value: &Value) -> Schema {
        Schema::new(value)
    }
}

impl Default for Schema {
    fn default() -> Schema {
        Schema::empty_object()
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Schema) -> bool {
        // Equal texts are equal values; unequal ones may still be (the same
        // keys in another order), so the trees decide.
        Schema::ptr_eq(self, other)
            || self.0.text == other.0.text
            || *self.parsed() == *other.parsed()
    }
}

impl PartialEq<Value> for Schema {
    fn eq(&self, other: &Value) -> bool {
        *self.parsed() == *other
    }
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.text)
    }
}

impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.text)
    }
}

impl serde::Serialize for Schema {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match serde_json::value::RawValue::from_string(self.0.text.to_string()) {
            Ok(raw) => raw.serialize(serializer),
            Err(_) => self.parsed().serialize(serializer),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Schema {
    /// Transcoded from the document to compact text as it is read: no
    /// schema's tree is built.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Schema, D::Error> {
        let mut text = Vec::new();
        serde_transcode::transcode(deserializer, &mut serde_json::Serializer::new(&mut text))
            .map_err(serde::de::Error::custom)?;
        // serde_json writes UTF-8 (it escapes nothing into invalid bytes).
        let text = String::from_utf8(text).map_err(serde::de::Error::custom)?;
        Ok(Schema::from_compact(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_text_is_what_serde_json_writes_and_parses_back() {
        let value = json!({"type": "object", "required": ["b", 3, "a"],
            "properties": {"b": {"type": "string", "description": "é \"x\"\n"}, "a": {"maximum": 1.5e3}}});
        let schema = Schema::new(&value);
        assert_eq!(schema.text(), value.to_string());
        assert_eq!(schema.chars(), crate::tokens::json_chars(&value));
        assert_eq!(*schema.parsed(), value);
        assert_eq!(schema.value(), &value);
        assert_eq!(schema.required().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(Schema::from(value.clone()), schema);
        assert_eq!(schema, value);
    }

    #[test]
    fn it_serialises_as_the_json_it_holds_and_reads_one_back() {
        let schema =
            Schema::new(&json!({"type": "object", "properties": {"q": {"type": "string"}}}));
        let wrapped = serde_json::to_string(&json!({"inputSchema": schema.value()})).unwrap();
        assert_eq!(
            serde_json::to_string(&std::collections::BTreeMap::from([(
                "inputSchema",
                &schema
            )]))
            .unwrap(),
            wrapped
        );
        let read: std::collections::BTreeMap<String, Schema> =
            serde_json::from_str(&wrapped).unwrap();
        assert_eq!(read["inputSchema"], schema);
    }

    #[test]
    fn one_read_from_a_document_keeps_its_key_order_and_equals_its_value() {
        let text = r#"{ "type": "object", "required": ["z", 1, "a"],
            "properties": { "z": {"type": "string", "description": "\u00e9 \"x\"\n"}, "a": {"maximum": 1.5e3} } }"#;
        let read: Schema = serde_json::from_str(text).unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            read.text(),
            r#"{"type":"object","required":["z",1,"a"],"properties":{"z":{"type":"string","description":"é \"x\"\n"},"a":{"maximum":1500.0}}}"#
        );
        assert_eq!(read.chars(), crate::tokens::json_chars(&value));
        assert_eq!(read.required().collect::<Vec<_>>(), ["z", "a"]);
        assert_eq!(read, Schema::new(&value));
        assert_eq!(read, value);
        assert_ne!(read, Schema::empty_object());
        // Not an object, or `required` twice: the tree decides, as a `Value` would.
        let twice: Schema = serde_json::from_str(r#"{"required":["a"],"required":["b"]}"#).unwrap();
        assert_eq!(twice.required().collect::<Vec<_>>(), ["b"]);
        let list: Schema = serde_json::from_str(r#"[{"required":["a"]}]"#).unwrap();
        assert_eq!(list.required().count(), 0);
        assert!(serde_json::from_str::<Schema>(r#"{"a": }"#).is_err());
    }
}
