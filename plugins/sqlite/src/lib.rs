//! Quiver plugin `sqlite`: read-only SQL over a local SQLite database file.
//!
//! The database is opened with `SQLITE_OPEN_READ_ONLY` for every call (and
//! `PRAGMA query_only` on top), so no statement can change it; results are
//! cut at a row limit.

use std::path::Path;

use quiver_plugin_api::{PluginManifest, ToolError, ToolManifest, str_arg};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Value, json};

/// Rows returned when the caller gives no `max_rows`.
const DEFAULT_MAX_ROWS: u64 = 200;
/// The most rows a call may ask for.
const MAX_ROWS: u64 = 10_000;
/// Longest text or blob value returned, in characters (longer ones are cut).
const MAX_VALUE_CHARS: usize = 4096;

fn manifest() -> PluginManifest {
    let path = json!({"type": "string", "description": "Path of the SQLite database file."});
    PluginManifest::new("sqlite", env!("CARGO_PKG_VERSION"))
        .tool(ToolManifest::new(
            "sqlite_query",
            "Run one read-only SQL statement (SELECT, WITH, EXPLAIN, read-only PRAGMA) on a SQLite database file; returns columns and rows, cut at max_rows.",
            json!({"type": "object", "properties": {
                "path": path,
                "sql": {"type": "string", "description": "One SQL statement; use ?1, ?2 for parameters."},
                "params": {"type": "array", "description": "Values bound to ?1, ?2, ...", "items": {}},
                "max_rows": {"type": "integer", "minimum": 1, "maximum": MAX_ROWS, "description": "Most rows returned (default 200)."}
            }, "required": ["path", "sql"]}),
        ))
        .tool(ToolManifest::new(
            "sqlite_schema",
            "List the tables and views of a SQLite database file with their columns and CREATE statements.",
            json!({"type": "object", "properties": {"path": path}, "required": ["path"]}),
        ))
}

fn open(arguments: &Value) -> Result<Connection, ToolError> {
    let path = str_arg(arguments, "path")?;
    if !Path::new(path).is_file() {
        return Err(ToolError::new(format!("no database file at `{path}`")));
    }
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| ToolError::new(format!("cannot open `{path}` read-only: {e}")))?;
    connection.execute_batch("PRAGMA query_only = ON")?;
    connection.busy_timeout(std::time::Duration::from_millis(500))?;
    Ok(connection)
}

fn cut(text: String) -> Value {
    match text.char_indices().nth(MAX_VALUE_CHARS) {
        Some((end, _)) => json!(format!("{}…", &text[..end])),
        None => json!(text),
    }
}

fn to_json(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => json!(i),
        ValueRef::Real(f) => json!(f),
        ValueRef::Text(t) => cut(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => json!({"blob_bytes": b.len()}),
    }
}

fn to_sql(value: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as Sql;
    match value {
        Value::Null => Sql::Null,
        Value::Bool(b) => Sql::Integer(i64::from(*b)),
        Value::Number(n) => n
            .as_i64()
            .map(Sql::Integer)
            .unwrap_or_else(|| Sql::Real(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) => Sql::Text(s.clone()),
        other => Sql::Text(other.to_string()),
    }
}

fn query(arguments: &Value) -> Result<Value, ToolError> {
    let connection = open(arguments)?;
    let sql = str_arg(arguments, "sql")?;
    let max_rows = arguments["max_rows"]
        .as_u64()
        .unwrap_or(DEFAULT_MAX_ROWS)
        .clamp(1, MAX_ROWS) as usize;
    let mut statement = connection.prepare(sql)?;
    if !statement.readonly() {
        return Err(ToolError::new("only read-only statements are allowed"));
    }
    let columns: Vec<String> = statement.column_names().map(str::to_owned).collect();
    let params: Vec<rusqlite::types::Value> = arguments["params"]
        .as_array()
        .map(|p| p.iter().map(to_sql).collect())
        .unwrap_or_default();
    let mut rows = statement.query(rusqlite::params_from_iter(params))?;
    let mut out = Vec::new();
    let mut truncated = false;
    while let Some(row) = rows.next()? {
        if out.len() == max_rows {
            truncated = true;
            break;
        }
        let mut values = Vec::with_capacity(columns.len());
        for index in 0..columns.len() {
            values.push(to_json(row.get_ref(index)?));
        }
        out.push(Value::Array(values));
    }
    Ok(json!({"columns": columns, "rows": out, "row_count": out.len(), "truncated": truncated}))
}

fn schema(arguments: &Value) -> Result<Value, ToolError> {
    let connection = open(arguments)?;
    let mut statement = connection.prepare(
        "SELECT type, name, sql FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    let objects: Vec<(String, String, Option<String>)> = statement
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut tables = Vec::new();
    for (kind, name, sql) in objects {
        let mut info =
            connection.prepare("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1)")?;
        let columns: Vec<Value> = info
            .query_map([&name], |r| {
                let mut column = Map::new();
                column.insert("name".into(), json!(r.get::<_, String>(0)?));
                column.insert("type".into(), json!(r.get::<_, String>(1)?));
                column.insert("not_null".into(), json!(r.get::<_, i64>(2)? != 0));
                column.insert("primary_key".into(), json!(r.get::<_, i64>(3)? != 0));
                Ok(Value::Object(column))
            })?
            .collect::<Result<_, _>>()?;
        tables.push(json!({"kind": kind, "name": name, "columns": columns, "sql": sql}));
    }
    Ok(json!({"tables": tables}))
}

fn call(tool: &str, arguments: Value) -> Result<Value, ToolError> {
    match tool {
        "sqlite_query" => query(&arguments),
        "sqlite_schema" => schema(&arguments),
        other => Err(ToolError::unknown_tool(other)),
    }
}

quiver_plugin_api::export_plugin!(manifest, call);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn database() -> (std::path::PathBuf, String) {
        let dir = std::env::temp_dir().join(format!("quiver-sqlite-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.db");
        let _ = std::fs::remove_file(&path);
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL); INSERT INTO t(name) VALUES ('a'), ('b'), ('c');",
        )
        .unwrap();
        let text = path.display().to_string();
        (path, text)
    }

    #[test]
    fn reads_with_a_row_limit_and_refuses_writes() {
        let (path, p) = database();
        let out = call(
            "sqlite_query",
            json!({"path": p, "sql": "SELECT id, name FROM t WHERE id >= ?1 ORDER BY id", "params": [1], "max_rows": 2}),
        )
        .unwrap();
        assert_eq!(out["rows"], json!([[1, "a"], [2, "b"]]));
        assert_eq!(out["truncated"], true);
        let err = call("sqlite_query", json!({"path": p, "sql": "DELETE FROM t"})).unwrap_err();
        assert!(err.message().contains("read-only"), "{err}");
        let schema = call("sqlite_schema", json!({"path": p})).unwrap();
        assert_eq!(schema["tables"][0]["columns"][1]["name"], "name");
        std::fs::remove_file(path).unwrap();
    }
}
