//! The built `sqlite` plugin, loaded through the host's checks by
//! `quiver_plugin_api::testing` and called across the real boundary.

use quiver_plugin_api::testing::TestPlugin;
use rusqlite::Connection;
use serde_json::json;

#[test]
fn reads_with_a_row_limit_and_refuses_writes() {
    let sqlite = TestPlugin::built(env!("CARGO_PKG_NAME")).unwrap_or_else(|e| panic!("{e}"));
    let dir = std::env::temp_dir().join(format!("quiver-sqlite-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.db");
    let _ = std::fs::remove_file(&path);
    let c = Connection::open(&path).unwrap();
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL); INSERT INTO t(name) VALUES ('a'), ('b'), ('c');",
    )
    .unwrap();
    let p = path.display().to_string();
    let out = sqlite
        .call(
            "sqlite_query",
            json!({"path": p, "sql": "SELECT id, name FROM t WHERE id >= ?1 ORDER BY id", "params": [1], "max_rows": 2}),
        )
        .unwrap();
    assert_eq!(out["rows"], json!([[1, "a"], [2, "b"]]));
    assert_eq!(out["truncated"], true);
    let err = sqlite
        .call("sqlite_query", json!({"path": p, "sql": "DELETE FROM t"}))
        .unwrap_err();
    assert!(err.message().contains("read-only"), "{err}");
    assert_eq!(err.code(), "invalid_argument");
    let missing = sqlite
        .call("sqlite_schema", json!({"path": dir.join("nope.db")}))
        .unwrap_err();
    assert_eq!(missing.code(), "not_found");
    let schema = sqlite.call("sqlite_schema", json!({"path": p})).unwrap();
    assert_eq!(schema["tables"][0]["columns"][1]["name"], "name");
    assert_eq!(schema["tables"][0]["columns"][1]["type"], "TEXT");
    std::fs::remove_dir_all(dir).unwrap();
}
