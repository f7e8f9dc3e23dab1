//! The built `time` plugin, loaded through the host's checks by
//! `quiver_plugin_api::testing` and called across the real boundary.

use quiver_plugin_api::testing::TestPlugin;
use serde_json::json;

fn plugin() -> TestPlugin {
    TestPlugin::built(env!("CARGO_PKG_NAME")).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn converts_across_zones() {
    let out = plugin()
        .call(
            "time_convert",
            json!({"datetime": "2025-01-15T12:00:00Z", "to_zone": "Asia/Tokyo"}),
        )
        .unwrap();
    assert_eq!(out["offset"], "+09");
    assert!(
        out["datetime"]
            .as_str()
            .unwrap()
            .starts_with("2025-01-15T21:00:00")
    );
}

#[test]
fn adds_across_dst_and_diffs() {
    let time = plugin();
    let out = time
        .call(
            "time_add",
            json!({"datetime": "2025-03-29T12:00", "zone": "Europe/Paris", "duration": "1 day"}),
        )
        .unwrap();
    assert!(
        out["datetime"]
            .as_str()
            .unwrap()
            .starts_with("2025-03-30T12:00:00+02:00")
    );
    let diff = time
        .call(
            "time_diff",
            json!({"start": "2025-01-01", "end": "2025-01-02T01:00"}),
        )
        .unwrap();
    assert_eq!(
        (diff["days"].as_u64(), diff["hours"].as_u64()),
        (Some(1), Some(1))
    );
    let error = time
        .call("time_now", json!({"zone": "Mars/Base"}))
        .unwrap_err();
    assert_eq!(error.code(), "invalid_argument");
    assert_eq!(error.data().unwrap()["field"], "zone");
}
