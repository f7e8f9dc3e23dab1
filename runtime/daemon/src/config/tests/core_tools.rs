//! The `core_tools` sections, read through the root parse of a whole `quiver.yaml`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::config::{invalid_parts as invalid, parse};
use quiver_core_tools::settings::*;

#[test]
fn defaults_offer_every_tool_with_approval_for_commands() {
    let c = parse("", "q.yaml").unwrap().config.core_tools;
    assert_eq!(c, CoreToolsConfig::default());
    assert_eq!(c.enabled, CoreToolName::ALL);
    assert_eq!(c.workspace, PathBuf::from("."));
    assert!(c.run_command.require_approval);
    assert_eq!(c.approval_globs(), ["run_command"]);
}

#[test]
fn full_section_is_read() {
    let text = "core_tools:\n  enabled: [run_command, read_file, read_file]\n  workspace: work\n  max_read_bytes: 2048\n  max_write_bytes: 100\n  max_list_entries: 10\n  max_search_matches: 5\n  run_command:\n    require_approval: false\n    timeout_s: 7\n    max_output_bytes: 4096\n    shell: [bash, -lc]\n    sandbox: off\n";
    let loaded = parse(text, "q.yaml").unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let c = loaded.config.core_tools;
    assert_eq!(
        c.enabled,
        [CoreToolName::ReadFile, CoreToolName::RunCommand]
    );
    assert_eq!(c.workspace, PathBuf::from("work"));
    assert_eq!(
        (
            c.max_read_bytes,
            c.max_write_bytes,
            c.max_list_entries,
            c.max_search_matches
        ),
        (2048, 100, 10, 5)
    );
    assert_eq!(
        c.run_command,
        RunCommandConfig {
            require_approval: false,
            timeout_s: 7,
            max_output_bytes: 4096,
            shell: vec!["bash".into(), "-lc".into()],
            environment: CommandEnvironment::default(),
            sandbox: quiver_core_tools::settings::SandboxMode::Off,
        }
    );
    assert!(c.approval_globs().is_empty());
}

#[test]
fn disabled_run_command_needs_no_approval_glob() {
    let c = parse("core_tools:\n  enabled: [read_file]\n", "q.yaml")
        .unwrap()
        .config
        .core_tools;
    assert!(c.approval_globs().is_empty());
    assert!(!c.is_enabled(CoreToolName::RunCommand));
}

#[test]
fn out_of_range_numbers_are_clamped_with_warnings() {
    let text = "core_tools:\n  max_read_bytes: 1\n  max_list_entries: 0\n  run_command:\n    timeout_s: 999999\n    max_output_bytes: 0\n";
    let loaded = parse(text, "q.yaml").unwrap();
    let c = &loaded.config.core_tools;
    assert_eq!(c.max_read_bytes, 1024);
    assert_eq!(c.max_list_entries, 1);
    assert_eq!(c.run_command.timeout_s, 3600);
    assert_eq!(c.run_command.max_output_bytes, 1024);
    let keys: Vec<(&str, u32, u32)> = loaded
        .warnings
        .iter()
        .map(|w| (w.key.as_str(), w.line, w.column))
        .collect();
    assert_eq!(
        keys,
        [
            ("core_tools.max_read_bytes", 2, 19),
            ("core_tools.max_list_entries", 3, 21),
            ("core_tools.run_command.timeout_s", 5, 16),
            ("core_tools.run_command.max_output_bytes", 6, 23),
        ]
    );
}

#[test]
fn errors_name_key_location_and_allowed_values() {
    let (key, line, _, message, allowed) =
        invalid("core_tools:\n  enabled: [read_file, delete_file]\n");
    assert!(key.starts_with("core_tools.enabled"), "{key}");
    assert_eq!(line, 2);
    assert!(message.contains("delete_file"), "{message}");
    assert!(allowed.contains("search_files"), "{allowed}");
    let (key, line, column, message, allowed) =
        invalid("core_tools:\n  run_command:\n    approval: false\n");
    assert!(key.starts_with("core_tools.run_command"), "{key}");
    assert_eq!((line, column), (3, 5));
    assert!(message.contains("approval"), "{message}");
    assert!(allowed.contains("require_approval"), "{allowed}");
    let (key, line, _, _, allowed) = invalid("core_tools:\n  workspace: \"\"\n");
    assert_eq!((key.as_str(), line), ("core_tools.workspace", 2));
    assert!(allowed.contains("directory"), "{allowed}");
    let (key, line, ..) = invalid("core_tools:\n  run_command:\n    shell: []\n");
    assert_eq!((key.as_str(), line), ("core_tools.run_command.shell", 3));
    let (key, line, _, message, allowed) =
        invalid("core_tools:\n  run_command:\n    env_inherit: [PATH, \"LC_[\"]\n");
    assert_eq!(
        (key.as_str(), line),
        ("core_tools.run_command.env_inherit", 3)
    );
    assert!(message.contains("`LC_[` is not a valid glob"), "{message}");
    assert!(allowed.contains("LC_*"), "{allowed}");
    let (key, _, _, message, _) =
        invalid("core_tools:\n  run_command:\n    env_inherit: [PATH, \" \"]\n");
    assert_eq!(key, "core_tools.run_command.env_inherit");
    assert!(message.contains("item 2"), "{message}");
    let (key, line, _, message, _) =
        invalid("core_tools:\n  run_command:\n    env: {\"A=B\": x}\n");
    assert_eq!((key.as_str(), line), ("core_tools.run_command.env", 3));
    assert!(message.contains("A=B"), "{message}");
    let (key, _, _, message, allowed) = invalid("core_tools:\n  max_read_bytes: lots\n");
    assert_eq!(key, "core_tools.max_read_bytes");
    assert!(message.contains("integer"), "{message}");
    assert_eq!(allowed, "an integer from 1024 to 67108864");
    let (key, _, _, _, allowed) = invalid("core_tools:\n  workdir: x\n");
    assert!(key.starts_with("core_tools"), "{key}");
    assert!(allowed.contains("max_search_matches"), "{allowed}");
}

#[test]
fn the_environment_inherits_by_glob_and_set_variables_win() {
    let daemon = || {
        [
            ("PATH", "/bin"),
            ("LC_ALL", "C"),
            ("API_KEY", "k"),
            ("CI", "0"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
    };
    let names = |e: &CommandEnvironment| -> Vec<(String, String)> {
        e.resolve(daemon())
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect()
    };
    let defaults = CommandEnvironment::default();
    assert_eq!(
        names(&defaults),
        [
            ("PATH".into(), "/bin".into()),
            ("LC_ALL".into(), "C".into())
        ]
    );
    let set = BTreeMap::from([("CI".to_owned(), "1".to_owned())]);
    let all = CommandEnvironment::new(vec!["*".into()], set).unwrap();
    assert_eq!(
        names(&all),
        [
            ("PATH".into(), "/bin".into()),
            ("LC_ALL".into(), "C".into()),
            ("API_KEY".into(), "k".into()),
            ("CI".into(), "1".into())
        ]
    );
    let loaded = parse(
        "core_tools:\n  run_command:\n    env_inherit: [HOME]\n    env: {CI: \"1\"}\n",
        "q.yaml",
    )
    .unwrap();
    let environment = &loaded.config.core_tools.run_command.environment;
    assert_eq!(environment.inherit(), ["HOME"]);
    assert_eq!(environment.set().get("CI").map(String::as_str), Some("1"));
}

#[test]
fn relative_workspace_follows_the_config_file() {
    let mut c = CoreToolsConfig {
        workspace: "ws".into(),
        ..CoreToolsConfig::default()
    };
    c.resolve_relative_to(Path::new("/etc/quiver"));
    assert_eq!(c.workspace, PathBuf::from("/etc/quiver/ws"));
    let mut c = CoreToolsConfig {
        workspace: "/abs".into(),
        ..CoreToolsConfig::default()
    };
    c.resolve_relative_to(Path::new("/etc/quiver"));
    assert_eq!(c.workspace, PathBuf::from("/abs"));
}
