//! Copying a whole store into another (`quiver store migrate`): every
//! table's rows exported in key order as JSON objects of typed columns,
//! inserted as they are (ids kept), then exported again from the target
//! and compared by count and checksum, table by table. Both backends
//! describe their rows with the one table list here, so an export from
//! either reads the same.

use sha2::{Digest, Sha256};

use serde_json::Value;

use crate::{Store, StoreError};

/// What a column holds, as exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// Text, never null.
    Text,
    /// Text or null.
    OptText,
    /// A 64-bit integer, never null.
    Int,
    /// A 64-bit integer or null.
    OptInt,
    /// `true` or `false`.
    Bool,
}

/// One table as both backends keep it.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// Its name.
    pub name: &'static str,
    /// The `ORDER BY` of an export (its key).
    pub order: &'static str,
    /// Its columns, in order.
    pub columns: &'static [(&'static str, Column)],
}

impl Table {
    /// The comma-joined column names.
    pub fn column_list(&self) -> String {
        self.columns
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every table, parents before children (sessions before messages).
pub const TABLES: &[Table] = &[
    Table {
        name: "sessions",
        order: "id",
        columns: &[
            ("id", Column::Text),
            ("kind", Column::Text),
            ("parent", Column::OptText),
            ("grants", Column::Text),
            ("model", Column::OptText),
            ("context_tokens", Column::Int),
            ("created_ms", Column::Int),
        ],
    },
    Table {
        name: "messages",
        order: "session, seq",
        columns: &[
            ("session", Column::Text),
            ("seq", Column::Int),
            ("created_ms", Column::Int),
            ("body", Column::Text),
        ],
    },
    Table {
        name: "events",
        order: "id",
        columns: &[
            ("id", Column::Int),
            ("time_ms", Column::Int),
            ("instance", Column::OptText),
            ("session", Column::Text),
            ("call_id", Column::Int),
            ("tool", Column::Text),
            ("via_bridge", Column::Bool),
            ("arguments", Column::Text),
            ("status", Column::Text),
            ("duration_ms", Column::Int),
            ("detail", Column::OptText),
            ("line", Column::Text),
            ("result", Column::OptText),
            ("answered_by", Column::OptText),
        ],
    },
    Table {
        name: "gateway_clients",
        order: "name",
        columns: &[
            ("name", Column::Text),
            ("token_sha256", Column::Text),
            ("grants", Column::Text),
            ("created_ms", Column::Int),
        ],
    },
    Table {
        name: "tool_pins",
        order: "source, tool",
        columns: &[
            ("source", Column::Text),
            ("tool", Column::Text),
            ("hash", Column::Text),
            ("shape", Column::Text),
            ("definition", Column::Text),
            ("accepted_ms", Column::Int),
            ("accepted_by", Column::Text),
        ],
    },
    Table {
        name: "approvals",
        order: "id",
        columns: &[
            ("id", Column::Int),
            ("instance", Column::Text),
            ("session", Column::Text),
            ("call_id", Column::Int),
            ("tool", Column::Text),
            ("via_bridge", Column::Bool),
            ("arguments", Column::Text),
            ("digest", Column::Text),
            ("requested_ms", Column::Int),
            ("state", Column::Text),
            ("decision", Column::OptText),
            ("reason", Column::OptText),
            ("answered_by", Column::OptText),
            ("closed_ms", Column::OptInt),
        ],
    },
    Table {
        name: "instances",
        order: "id",
        columns: &[
            ("id", Column::Text),
            ("host", Column::Text),
            ("pid", Column::Int),
            ("version", Column::Text),
            ("listen", Column::OptText),
            ("started_ms", Column::Int),
            ("heartbeat_ms", Column::Int),
            ("stopped_ms", Column::OptInt),
            ("stop_reason", Column::OptText),
        ],
    },
    Table {
        name: "savings",
        order: "instance, time_ms",
        columns: &[
            ("instance", Column::Text),
            ("time_ms", Column::Int),
            ("point", Column::Text),
        ],
    },
    Table {
        name: "credentials",
        order: "server",
        columns: &[
            ("server", Column::Text),
            ("credentials", Column::Text),
            ("stored_ms", Column::Int),
        ],
    },
];

/// The table called `name`.
pub fn table(name: &str) -> Result<&'static Table, StoreError> {
    TABLES
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| StoreError::Corrupt {
            what: "table name",
            detail: format!(
                "`{name}` is not a table of the store; tables: {}",
                TABLES.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
            ),
        })
}

/// The value of column `name` of an exported row, checked against its type.
pub fn cell<'a>(row: &'a Value, name: &str, column: Column) -> Result<&'a Value, StoreError> {
    let value = row.get(name).unwrap_or(&Value::Null);
    let fits = match column {
        Column::Text => value.is_string(),
        Column::OptText => value.is_string() || value.is_null(),
        Column::Int => value.is_i64(),
        Column::OptInt => value.is_i64() || value.is_null(),
        Column::Bool => value.is_boolean(),
    };
    if fits {
        Ok(value)
    } else {
        Err(StoreError::Corrupt {
            what: "row to import",
            detail: format!("column `{name}` should be {column:?}, is {value}"),
        })
    }
}

/// What copying one table found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCopy {
    /// The table.
    pub table: &'static str,
    /// Rows read from the source.
    pub rows: usize,
    /// sha256 (hex) of the source's rows, one canonical JSON line each.
    pub checksum: String,
    /// Whether the target, read back, has the same count and checksum.
    pub verified: bool,
}

/// The sha256 (hex) of `rows`: each row's JSON (keys sorted), a newline
/// after each.
pub fn checksum(rows: &[Value]) -> String {
    let mut hasher = Sha256::new();
    for row in rows {
        hasher.update(row.to_string().as_bytes());
        hasher.update(b"\n");
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Why a copy did not happen or did not verify.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// Reading or writing a store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The target holds rows already.
    #[error(
        "the target store {location} is not empty (table `{table}` has {rows} rows); copy into an empty database"
    )]
    TargetNotEmpty {
        /// The target.
        location: String,
        /// The first table with rows.
        table: &'static str,
        /// How many.
        rows: usize,
    },
}

/// Copies every table of `from` into `to` (which must be empty), then
/// reads each back from `to` and compares; one [`TableCopy`] per table.
pub async fn copy_store(from: &dyn Store, to: &dyn Store) -> Result<Vec<TableCopy>, CopyError> {
    for table in TABLES {
        let rows = to.export_rows(table.name).await?.len();
        // Opening a store registers nothing, so any row is someone's data.
        if rows > 0 {
            return Err(CopyError::TargetNotEmpty {
                location: to.location(),
                table: table.name,
                rows,
            });
        }
    }
    let mut copies = Vec::new();
    for table in TABLES {
        let rows = from.export_rows(table.name).await?;
        to.import_rows(table.name, &rows).await?;
        let back = to.export_rows(table.name).await?;
        let sum = checksum(&rows);
        copies.push(TableCopy {
            table: table.name,
            rows: rows.len(),
            verified: back.len() == rows.len() && checksum(&back) == sum,
            checksum: sum,
        });
    }
    Ok(copies)
}
