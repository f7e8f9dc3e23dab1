//! A plugin file that is a symlink into a directory anyone can write is
//! refused (the target's directory passes the same trust checks as the
//! plugin directory); the same file reached through a trusted directory
//! loads.

use std::os::unix::fs::PermissionsExt;

use quiver_tests::{install_plugin, plugin_so, quiver_json_lines};

#[test]
fn a_symlink_into_a_world_writable_dir_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let open = temp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    install_plugin(&plugin_so("echo_v1"), &open, "echo.so");
    let trusted = temp.path().join("trusted");
    std::fs::create_dir(&trusted).unwrap();
    std::fs::set_permissions(&trusted, std::fs::Permissions::from_mode(0o700)).unwrap();
    install_plugin(&plugin_so("text"), &trusted, "text.so");
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(open.join("echo.so"), dir.join("echo.so")).unwrap();
    std::os::unix::fs::symlink(trusted.join("text.so"), dir.join("text.so")).unwrap();
    let config = temp.path().join("quiver.yaml");
    std::fs::write(&config, "plugins:\n  dirs: [plugins]\n  state_dir: state\n").unwrap();

    let lines = quiver_json_lines(&[
        "plugin",
        "list",
        "--config",
        config.to_str().unwrap(),
        "--json",
    ]);
    let plugins = lines[0]["plugins"].as_array().unwrap();
    let echo = plugins
        .iter()
        .find(|p| p["file"].as_str().unwrap().ends_with("echo.so"))
        .unwrap();
    assert!(echo["generation"].is_null(), "{echo}");
    let error = echo["last_error"].as_str().unwrap();
    assert!(error.contains("writable by anyone"), "{error}");
    assert!(error.contains("open"), "{error}");
    let text = plugins
        .iter()
        .find(|p| p["file"].as_str().unwrap().ends_with("text.so"))
        .unwrap();
    assert_eq!(text["generation"], 1, "{text}");
}
