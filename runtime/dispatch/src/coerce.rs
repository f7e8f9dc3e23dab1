//! Schema-guided argument coercion, before validation: what models commonly
//! send for what servers commonly declare, read the one way the schema
//! allows.
//!
//! | declared | sent | becomes |
//! |---|---|---|
//! | `integer` | `"42"` | `42` |
//! | `number` | `"2.5"` | `2.5` |
//! | `boolean` | `"true"`, `"False"` | `true`, `false` |
//! | `object` / `array` | `"{...}"` / `"[...]"` (JSON text) | the parsed value |
//!
//! A value is coerced only when the property's schema declares no `string`
//! type (so the string could not have been meant as it is) and the string
//! reads as exactly one of the declared types. Properties are found through
//! `properties` and `items`, and through `anyOf`/`oneOf` of plain types
//! (`Optional[int]` is `anyOf: [{type: integer}, {type: null}]`); `$ref`
//! and other combinators are left alone. Every coercion is reported, so the
//! result and the feed can say what was changed.
//!
//! `null` for a property declared `nullable: true` (OpenAPI's spelling) is
//! not a coercion: the validator is given the schema with such types
//! widened to `[T, "null"]` (see [`nullable_as_type`]), the spelling JSON
//! Schema itself uses.

use serde_json::{Map, Value};

/// One value read as another type.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Coercion {
    /// JSON pointer into the arguments.
    pub pointer: String,
    /// The value as sent.
    pub from: Value,
    /// The type it was read as.
    pub to: &'static str,
}

impl std::fmt::Display for Coercion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut from = self.from.to_string();
        if from.chars().count() > 40 {
            from = format!("{}…", from.chars().take(40).collect::<String>());
        }
        write!(f, "{} {from} read as {}", self.pointer, self.to)
    }
}

/// The sentence that tells the model (and the feed) what was coerced.
pub fn describe(coercions: &[Coercion]) -> String {
    format!(
        "arguments coerced to the declared types: {}",
        coercions
            .iter()
            .map(Coercion::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// Coerces `arguments` in place by `schema`; returns what was changed.
pub fn coerce(schema: &Value, arguments: &mut Value) -> Vec<Coercion> {
    let mut out = Vec::new();
    walk(schema, arguments, &mut String::new(), &mut out);
    out
}

/// The declared types of a schema (`type`, widened by `nullable: true`),
/// and the one non-null branch of an `anyOf`/`oneOf` of plain types.
fn declared(schema: &Value) -> Option<(Vec<&str>, &Value)> {
    let object = schema.as_object()?;
    if let Some(kind) = object.get("type") {
        let mut types: Vec<&str> = match kind {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => return None,
        };
        if object.get("nullable") == Some(&Value::Bool(true)) {
            types.push("null");
        }
        return Some((types, schema));
    }
    let branches = object
        .get("anyOf")
        .or_else(|| object.get("oneOf"))?
        .as_array()?;
    let mut types = Vec::new();
    let mut main = None;
    for branch in branches {
        let (branch_types, _) = declared(branch)?;
        if branch_types != ["null"] {
            if main.is_some() {
                return None;
            }
            main = Some(branch);
        }
        types.extend(branch_types);
    }
    Some((types, main?))
}

fn walk(schema: &Value, value: &mut Value, pointer: &mut String, out: &mut Vec<Coercion>) {
    let Some((types, schema)) = declared(schema) else {
        return;
    };
    if let Value::String(text) = value
        && !types.contains(&"string")
        && let Some((coerced, to)) = read_as(text, &types)
    {
        out.push(Coercion {
            pointer: if pointer.is_empty() {
                "(root)".to_owned()
            } else {
                pointer.clone()
            },
            from: value.clone(),
            to,
        });
        *value = coerced;
    }
    match value {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (key, item) in map.iter_mut() {
                if let Some(property) = properties.get(key) {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                    walk(property, item, pointer, out);
                    pointer.truncate(len);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) else {
                return;
            };
            for (index, item) in items.iter_mut().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&index.to_string());
                walk(item_schema, item, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// `text` read as the one declared type it can be, or `None`.
fn read_as(text: &str, types: &[&str]) -> Option<(Value, &'static str)> {
    let trimmed = text.trim();
    let mut readings: Vec<(Value, &'static str)> = Vec::new();
    if (types.contains(&"integer") || types.contains(&"number"))
        && let Ok(Value::Number(n)) = serde_json::from_str::<Value>(trimmed)
    {
        if types.contains(&"integer") && (n.is_i64() || n.is_u64()) {
            readings.push((Value::Number(n), "integer"));
        } else if types.contains(&"integer")
            && let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
        {
            readings.push((Value::from(f as i64), "integer"));
        } else if types.contains(&"number") {
            readings.push((Value::Number(n), "number"));
        }
    }
    if types.contains(&"boolean") {
        if trimmed.eq_ignore_ascii_case("true") {
            readings.push((Value::Bool(true), "boolean"));
        } else if trimmed.eq_ignore_ascii_case("false") {
            readings.push((Value::Bool(false), "boolean"));
        }
    }
    if types.contains(&"object") || types.contains(&"array") {
        match serde_json::from_str::<Value>(trimmed) {
            Ok(Value::Object(map)) if types.contains(&"object") => {
                readings.push((Value::Object(map), "object"));
            }
            Ok(Value::Array(items)) if types.contains(&"array") => {
                readings.push((Value::Array(items), "array"));
            }
            _ => {}
        }
    }
    if readings.len() == 1 {
        readings.pop()
    } else {
        None
    }
}

/// `schema` with every `type: T` that says `nullable: true` widened to
/// `type: [T, "null"]` (and `null` added to its `enum`), at any depth:
/// what OpenAPI-derived servers mean by it, in JSON Schema's spelling.
/// `None` when the schema has no `nullable: true`.
pub fn nullable_as_type(schema: &Value) -> Option<Value> {
    fn has(value: &Value) -> bool {
        match value {
            Value::Object(map) => {
                map.get("nullable") == Some(&Value::Bool(true)) || map.values().any(has)
            }
            Value::Array(items) => items.iter().any(has),
            _ => false,
        }
    }
    fn widen(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if map.get("nullable") == Some(&Value::Bool(true)) {
                    widen_here(map);
                }
                map.values_mut().for_each(widen);
            }
            Value::Array(items) => items.iter_mut().for_each(widen),
            _ => {}
        }
    }
    fn widen_here(map: &mut Map<String, Value>) {
        let null = Value::String("null".into());
        match map.get_mut("type") {
            Some(Value::String(t)) => {
                let t = Value::String(std::mem::take(t));
                map.insert("type".into(), Value::Array(vec![t, null]));
            }
            Some(Value::Array(types)) if !types.contains(&null) => types.push(null),
            _ => {}
        }
        if let Some(Value::Array(values)) = map.get_mut("enum")
            && !values.contains(&Value::Null)
        {
            values.push(Value::Null);
        }
    }
    if !has(schema) {
        return None;
    }
    let mut widened = schema.clone();
    widen(&mut widened);
    Some(widened)
}

/// `content` with `note` added where the model reads it: a text block for
/// an MCP result (`{"content": [...]}`), a line for a string, a
/// `quiver_note` key for any other object, else `{"result", "quiver_note"}`.
pub fn annotate(content: Value, note: &str) -> Value {
    let marker = format!("[quiver: {note}]");
    match content {
        Value::Object(mut map) => {
            if let Some(Value::Array(blocks)) = map.get_mut("content") {
                blocks.push(serde_json::json!({"type": "text", "text": marker}));
            } else {
                map.insert("quiver_note".into(), Value::String(note.to_owned()));
            }
            Value::Object(map)
        }
        Value::String(text) => Value::String(format!("{text}\n{marker}")),
        other => serde_json::json!({"result": other, "quiver_note": note}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(schema: Value, mut arguments: Value) -> (Value, Vec<Coercion>) {
        let coerced = coerce(&schema, &mut arguments);
        (arguments, coerced)
    }

    #[test]
    fn strings_become_the_one_declared_type() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
            "o": {"type": "object", "properties": {"k": {"type": "integer"}}},
            "a": {"type": "array", "items": {"type": "integer"}},
            "s": {"type": "string"}, "either": {"type": ["string", "integer"]},
            "opt": {"anyOf": [{"type": "integer"}, {"type": "null"}]}
        }});
        let (out, coerced) = run(
            schema,
            json!({"n": "42", "x": " 2.5", "b": "False", "o": "{\"k\": \"3\"}", "a": "[1, \"2\"]",
                   "s": "7", "either": "7", "opt": "5"}),
        );
        assert_eq!(
            out,
            json!({"n": 42, "x": 2.5, "b": false, "o": {"k": 3}, "a": [1, 2], "s": "7", "either": "7", "opt": 5})
        );
        let pointers: Vec<&str> = coerced.iter().map(|c| c.pointer.as_str()).collect();
        assert!(
            pointers.contains(&"/o/k") && pointers.contains(&"/a/1"),
            "{pointers:?}"
        );
        assert_eq!(coerced.len(), 8, "{coerced:?}");
    }

    #[test]
    fn ambiguous_or_unreadable_strings_are_left_alone() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "b": {"type": "boolean"}, "o": {"type": "object"},
            "r": {"$ref": "#/defs/x"}
        }});
        let (out, coerced) = run(
            schema,
            json!({"n": "4.5", "b": "yes", "o": "[1]", "r": "1", "extra": "2"}),
        );
        assert!(coerced.is_empty(), "{coerced:?}");
        assert_eq!(out["n"], "4.5");
    }

    #[test]
    fn nullable_becomes_a_null_type() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string", "nullable": true, "enum": ["x"]}}});
        let widened = nullable_as_type(&schema).unwrap();
        assert_eq!(
            widened["properties"]["a"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(widened["properties"]["a"]["enum"], json!(["x", null]));
        assert_eq!(nullable_as_type(&json!({"type": "object"})), None);
    }

    #[test]
    fn notes_go_where_the_model_reads_them() {
        let mcp = annotate(json!({"content": [{"type": "text", "text": "ok"}]}), "n");
        assert_eq!(mcp["content"][1]["text"], "[quiver: n]");
        assert_eq!(annotate(json!("ok"), "n"), json!("ok\n[quiver: n]"));
        assert_eq!(annotate(json!({"a": 1}), "n")["quiver_note"], "n");
        assert_eq!(annotate(json!([1]), "n")["result"], json!([1]));
    }
}
