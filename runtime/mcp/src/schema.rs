//! Input-schema normalisation: MCP tool arguments are always a JSON object,
//! so every tool the model sees must have an object schema.
//!
//! - a schema without `type` (e.g. `{}` or only `properties`) gets
//!   `"type": "object"`;
//! - a `type` list that includes `"object"` becomes `"object"`;
//! - anything else (`"type": "string"`, `properties` that is not a map, a
//!   `required` that is not a list of names) cannot be called with an
//!   object of arguments: the tool is skipped, with a warning naming the
//!   server and the tool.

use serde_json::{Map, Value};

/// What normalisation did to one schema.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaOutcome {
    /// Already an object schema.
    Kept(Value),
    /// Made into an object schema; the text says what changed.
    Normalised(Value, &'static str),
    /// Not usable; the text says why.
    Skipped(String),
}

/// Normalises a tool's input schema (see the module docs).
pub fn normalise(schema: &Map<String, Value>) -> SchemaOutcome {
    let mut schema = schema.clone();
    let mut change = None;
    match schema.get("type") {
        None => {
            schema.insert("type".into(), Value::String("object".into()));
            change = Some("the input schema had no `type`; it is treated as an object schema");
        }
        Some(Value::String(kind)) if kind == "object" => {}
        Some(Value::Array(kinds)) if kinds.iter().any(|k| k == "object") => {
            schema.insert("type".into(), Value::String("object".into()));
            change = Some("the input schema's `type` list included `object`; it is now `object`");
        }
        Some(other) => {
            return SchemaOutcome::Skipped(format!(
                "its input schema has type {other}, but MCP tool arguments are always an object"
            ));
        }
    }
    if let Some(properties) = schema.get("properties")
        && !properties.is_object()
    {
        return SchemaOutcome::Skipped(format!(
            "its input schema's `properties` is {properties}, not a map"
        ));
    }
    if let Some(required) = schema.get("required") {
        let names = required
            .as_array()
            .is_some_and(|r| r.iter().all(Value::is_string));
        if !names {
            return SchemaOutcome::Skipped(format!(
                "its input schema's `required` is {required}, not a list of names"
            ));
        }
    }
    match change {
        None => SchemaOutcome::Kept(Value::Object(schema)),
        Some(change) => SchemaOutcome::Normalised(Value::Object(schema), change),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(value: Value) -> SchemaOutcome {
        normalise(value.as_object().unwrap())
    }

    #[test]
    fn object_schemas_are_kept() {
        let schema = json!({"type": "object", "properties": {"a": {}}, "required": ["a"]});
        assert_eq!(run(schema.clone()), SchemaOutcome::Kept(schema));
    }

    #[test]
    fn untyped_and_nullable_schemas_become_objects() {
        match run(json!({"properties": {"q": {}}})) {
            SchemaOutcome::Normalised(schema, _) => assert_eq!(schema["type"], "object"),
            other => panic!("{other:?}"),
        }
        match run(json!({"type": ["object", "null"]})) {
            SchemaOutcome::Normalised(schema, _) => assert_eq!(schema["type"], "object"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unusable_schemas_are_skipped() {
        for schema in [
            json!({"type": "string"}),
            json!({"type": "object", "properties": []}),
            json!({"type": "object", "required": "a"}),
            json!({"type": "object", "required": [1]}),
        ] {
            assert!(
                matches!(run(schema.clone()), SchemaOutcome::Skipped(_)),
                "{schema}"
            );
        }
    }
}
