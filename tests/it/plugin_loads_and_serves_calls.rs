//! The shipped plugins load from a plugin directory and serve calls: text
//! utilities, time zones, and read-only SQL over a real SQLite file.

use std::sync::Arc;

use quiver_plugins::{PluginHost, PluginHostOptions, ReloadOutcome};
use quiver_tests::{install_plugin, plugin_so};
use quiver_tool::registry::ToolRegistry;
use serde_json::json;

#[tokio::test]
async fn shipped_plugins_load_and_answer() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    for name in ["text", "time", "sqlite"] {
        install_plugin(&plugin_so(name), &dir, &format!("{name}.so"));
    }
    let registry = Arc::new(ToolRegistry::new());
    let mut options = PluginHostOptions::new(temp.path().join("state"));
    options.stable_wait = std::time::Duration::from_millis(5);
    let host = PluginHost::new(registry.clone(), options).unwrap();
    let outcomes = host.load_dirs(std::slice::from_ref(&dir));
    assert_eq!(outcomes.len(), 3);
    for (path, outcome) in &outcomes {
        assert!(
            matches!(outcome, ReloadOutcome::Loaded { generation: 1, .. }),
            "{}: {outcome:?}",
            path.display()
        );
    }

    let count = host
        .call("word_count", &json!({"text": "a b c\nd"}))
        .await
        .unwrap();
    assert_eq!(count["words"], 4);
    let converted = host
        .call(
            "time_convert",
            &json!({"datetime": "2025-07-01T12:00:00Z", "to_zone": "America/New_York"}),
        )
        .await
        .unwrap();
    assert_eq!(converted["offset"], "-04");

    let db = temp.path().join("shop.db");
    let connection = rusqlite::Connection::open(&db).unwrap();
    connection
        .execute_batch("CREATE TABLE items(name TEXT, price REAL); INSERT INTO items VALUES ('pen', 1.5), ('ink', 7.25);")
        .unwrap();
    drop(connection);
    let db = db.display().to_string();
    let rows = host
        .call(
            "sqlite_query",
            &json!({"path": db, "sql": "SELECT name FROM items WHERE price > ?1", "params": [2]}),
        )
        .await
        .unwrap();
    assert_eq!(rows["rows"], json!([["ink"]]));
    let refused = host
        .call(
            "sqlite_query",
            &json!({"path": db, "sql": "DROP TABLE items"}),
        )
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("read-only"), "{refused}");

    let statuses = host.list();
    assert_eq!(statuses.len(), 3);
    assert!(
        statuses
            .iter()
            .all(|s| s.generation == Some(1) && s.last_error.is_none())
    );
    assert!(registry.snapshot().get("regex_replace").is_some());
}
