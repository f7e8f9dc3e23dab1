//! A tool's input schema, kept as its compact JSON text and parsed only
//! when someone needs the tree.
//!
//! A parsed `serde_json::Value` of a typical tool schema takes about seven
//! times the bytes of its text (a map node and a string per key), and a
//! registry of 100,000 tools held them all, then copied them. A [`Schema`]
//! holds the text `serde_json` writes for the value (so its length is the
//! definition's size as sent, without counting), the names of its required
//! parameters (which search reads in its inner loops), and the tree, parsed
//! on first [`Schema::value`] and kept: only tools that are described,
//! validated or sent eagerly ever pay for it. Bulk readers (index builds)
//! take [`Schema::parsed`], which parses without keeping.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// A JSON Schema as compact text, shared by pointer when cloned.
#[derive(Clone)]
pub struct Schema(Arc<Inner>);

struct Inner {
    /// `serde_json::to_string` of the value: keys sorted, no whitespace.
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
        let required = value
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(Box::from)
            .collect();
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
        // The text was written from a `Value`, so it parses back to the
        // same one (serde_json's float_roundtrip is on).
        serde_json::from_str(&self.0.text).unwrap_or_default()
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
        // Both texts are serde_json's writing of a value: equal texts,
        // equal values.
        Schema::ptr_eq(self, other) || self.0.text == other.0.text
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
    /// One schema's tree at a time: a catalog file of 100,000 tools is
    /// read without ever holding every schema's tree.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Schema, D::Error> {
        Value::deserialize(deserializer).map(|value| Schema::new(&value))
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
}
