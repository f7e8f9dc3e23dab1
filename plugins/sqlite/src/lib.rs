//! Quiver plugin `sqlite`: read-only SQL over a local SQLite database file.
//!
//! The database is opened with `SQLITE_OPEN_READ_ONLY` for every call (and
//! `PRAGMA query_only` on top), so no statement can change it; results are
//! cut at a row limit.

use std::path::Path;

use quiver_plugin_api::{JsonSchema, ToolError, tool};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Rows returned when the caller gives no `max_rows`.
const DEFAULT_MAX_ROWS: u64 = 200;
/// The most rows a call may ask for.
const MAX_ROWS: u64 = 10_000;
/// Longest text or blob value returned, in characters (longer ones are cut).
const MAX_VALUE_CHARS: usize = 4096;

fn open(path: &str) -> Result<Connection, ToolError> {
    if !Path::new(path).is_file() {
        return Err(ToolError::not_found(format!(
            "no database file at `{path}`"
        )));
    }
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| ToolError::failed(format!("cannot open `{path}` read-only: {e}")))?;
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

fn default_max_rows() -> u64 {
    DEFAULT_MAX_ROWS
}

/// Arguments of `sqlite_query`.
#[derive(Deserialize, JsonSchema)]
struct QueryArgs {
    /// Path of the SQLite database file.
    path: String,
    /// One SQL statement; use ?1, ?2 for parameters.
    sql: String,
    /// Values bound to ?1, ?2, ...
    #[serde(default)]
    params: Vec<Value>,
    /// Most rows returned (default 200).
    #[serde(default = "default_max_rows")]
    #[schemars(range(min = 1, max = 10000))]
    max_rows: u64,
}

/// A query's result.
#[derive(Serialize, JsonSchema)]
struct Rows {
    /// Column names.
    columns: Vec<String>,
    /// Rows, each a list of values in column order (blobs as `{"blob_bytes": N}`).
    rows: Vec<Vec<Value>>,
    /// How many rows are returned.
    row_count: usize,
    /// Whether more rows were left out (past `max_rows`).
    truncated: bool,
}

/// Run one read-only SQL statement (SELECT, WITH, EXPLAIN, read-only PRAGMA) on a SQLite database file; returns columns and rows, cut at max_rows.
#[tool(read_only, idempotent, open_world = false)]
fn sqlite_query(args: QueryArgs) -> Result<Rows, ToolError> {
    let connection = open(&args.path)?;
    let max_rows = args.max_rows.clamp(1, MAX_ROWS) as usize;
    let mut statement = connection
        .prepare(&args.sql)
        .map_err(|e| ToolError::invalid_argument("sql", e.to_string()))?;
    if !statement.readonly() {
        return Err(ToolError::invalid_argument(
            "sql",
            "only read-only statements are allowed",
        ));
    }
    let columns: Vec<String> = statement.column_names().map(str::to_owned).collect();
    let params: Vec<rusqlite::types::Value> = args.params.iter().map(to_sql).collect();
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
        out.push(values);
    }
    Ok(Rows {
        columns,
        row_count: out.len(),
        rows: out,
        truncated,
    })
}

/// Arguments of `sqlite_schema`.
#[derive(Deserialize, JsonSchema)]
struct SchemaArgs {
    /// Path of the SQLite database file.
    path: String,
}

/// A column of a table or view.
#[derive(Serialize, JsonSchema)]
struct Column {
    /// Its name.
    name: String,
    /// Its declared type.
    #[serde(rename = "type")]
    declared_type: String,
    /// Whether it is NOT NULL.
    not_null: bool,
    /// Whether it is part of the primary key.
    primary_key: bool,
}

/// A table or view.
#[derive(Serialize, JsonSchema)]
struct Table {
    /// `table` or `view`.
    kind: String,
    /// Its name.
    name: String,
    /// Its columns.
    columns: Vec<Column>,
    /// Its CREATE statement.
    sql: Option<String>,
}

/// A database's tables and views.
#[derive(Serialize, JsonSchema)]
struct Tables {
    /// Tables and views, by name.
    tables: Vec<Table>,
}

/// List the tables and views of a SQLite database file with their columns and CREATE statements.
#[tool(read_only, idempotent, open_world = false)]
fn sqlite_schema(args: SchemaArgs) -> Result<Tables, ToolError> {
    let connection = open(&args.path)?;
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
        let columns: Vec<Column> = info
            .query_map([&name], |r| {
                Ok(Column {
                    name: r.get(0)?,
                    declared_type: r.get(1)?,
                    not_null: r.get::<_, i64>(2)? != 0,
                    primary_key: r.get::<_, i64>(3)? != 0,
                })
            })?
            .collect::<Result<_, _>>()?;
        tables.push(Table {
            kind,
            name,
            columns,
            sql,
        });
    }
    Ok(Tables { tables })
}

quiver_plugin_api::plugin! {
    name: "sqlite",
    tools: [sqlite_query, sqlite_schema],
}
