//! The root of `quiver.yaml`: tools, plugins and the file as a whole.

use crate::config::invalid_parts as invalid;
use crate::config::*;
use quiver_config::ConfigError;
use quiver_config::Switch;
use std::path::{Path, PathBuf};

#[test]
fn defaults_when_absent_or_empty() {
    for text in ["", "tools:\n  tool_search: true\n", "tools: {}\n"] {
        let c = parse(text, "q.yaml").unwrap().config.tool_search;
        assert_eq!(c.enabled, Switch::Auto);
        assert_eq!(c.threshold_pct, 5);
        assert_eq!(c.search_default_limit, 5);
        assert_eq!(c.max_search_limit, 20);
        assert_eq!(c.listing, Switch::Auto);
        assert_eq!(c.listing_max_tokens, 20_000);
        assert!(c.eager.is_empty());
    }
}

#[test]
fn false_means_off() {
    let c = parse("tools:\n  tool_search: false\n", "q.yaml").unwrap();
    assert_eq!(c.config.tool_search.enabled, Switch::Off);
}

#[test]
fn full_map_is_read() {
    let text = "tools:\n  tool_search:\n    enabled: on\n    threshold_pct: 10\n    search_default_limit: 7\n    max_search_limit: 30\n    listing: off\n    listing_max_tokens: 1000\n    eager: [\"mcp_github_*\", echo]\n    mode: classic\n";
    let loaded = parse(text, "q.yaml").unwrap();
    assert!(loaded.warnings.is_empty());
    let c = loaded.config.tool_search;
    assert_eq!(c.enabled, Switch::On);
    assert_eq!(c.threshold_pct, 10);
    assert_eq!(c.search_default_limit, 7);
    assert_eq!(c.max_search_limit, 30);
    assert_eq!(c.listing, Switch::Off);
    assert_eq!(c.listing_max_tokens, 1000);
    assert!(c.is_eager("mcp_github_create_issue"));
    assert!(c.is_eager("echo"));
    assert!(!c.is_eager("Echo"));
}

#[test]
fn out_of_range_numbers_are_clamped_with_warnings() {
    let text = "tools:\n  tool_search:\n    threshold_pct: 500\n    max_search_limit: 0\n    search_default_limit: 9\n    listing_max_tokens: 10\n";
    let loaded = parse(text, "q.yaml").unwrap();
    let c = &loaded.config.tool_search;
    assert_eq!(c.threshold_pct, 100);
    assert_eq!(c.max_search_limit, 1);
    assert_eq!(c.search_default_limit, 1);
    assert_eq!(c.listing_max_tokens, 200);
    let w = &loaded.warnings[0];
    assert_eq!(
        (w.key.as_str(), w.given, w.used, w.line, w.column),
        ("tools.tool_search.threshold_pct", 500, 100, 3, 20)
    );
    assert_eq!(loaded.warnings.len(), 4);
    assert!(
        loaded.warnings[2]
            .to_string()
            .contains("`tools.tool_search.search_default_limit` = 9 is outside 1..1; using 1")
    );
}

#[test]
fn default_limit_follows_a_small_max() {
    let c = parse(
        "tools:\n  tool_search:\n    max_search_limit: 3\n",
        "q.yaml",
    )
    .unwrap();
    assert_eq!(c.config.tool_search.search_default_limit, 3);
    assert!(c.warnings.is_empty());
}

#[test]
fn unknown_word_names_key_location_and_allowed_values() {
    let (key, line, column, message, allowed) =
        invalid("tools:\n  tool_search:\n    enabled: maybe\n");
    assert_eq!(key, "tools.tool_search.enabled");
    assert_eq!((line, column), (3, 14));
    assert!(message.contains("maybe"), "{message}");
    assert_eq!(allowed, "auto, on, off");
}

#[test]
fn wrong_type_names_the_key() {
    let (key, line, _, message, allowed) =
        invalid("tools:\n  tool_search:\n    threshold_pct: lots\n");
    assert_eq!(key, "tools.tool_search.threshold_pct");
    assert_eq!(line, 3);
    assert!(message.contains("integer"), "{message}");
    assert_eq!(allowed, "an integer from 0 to 100");
    let (key, ..) = invalid("tools:\n  tool_search: 5\n");
    assert_eq!(key, "tools.tool_search");
}

#[test]
fn unknown_keys_are_errors() {
    let (key, line, column, message, allowed) = invalid("tools:\n  tool_search:\n    enable: on\n");
    assert!(key.starts_with("tools.tool_search"), "{key}");
    assert_eq!((line, column), (3, 5));
    assert!(message.contains("enable"), "{message}");
    assert!(allowed.contains("enabled"), "{allowed}");
    let (_, line, _, message, _) = invalid("tool:\n  x: 1\n");
    assert_eq!(line, 1);
    assert!(message.contains("tool"), "{message}");
}

#[test]
fn bad_eager_glob_is_an_error() {
    let (key, line, ..) = invalid("tools:\n  tool_search:\n    eager: [ok, \"a[\"]\n");
    assert_eq!(key, "tools.tool_search.eager[1]");
    assert_eq!(line, 3);
}

#[test]
fn yaml_syntax_error_has_a_location() {
    match parse("tools: [1\n", "q.yaml") {
        Err(error @ ConfigError::Syntax { line: 1, .. }) => assert_eq!(
            error.to_string(),
            "q.yaml:1:8: YAML syntax error: unclosed bracket '['"
        ),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn a_duplicate_key_is_named_plainly() {
    let (key, line, column, message, _) = invalid("approval:\n  timeout_s: 5\n  timeout_s: 6\n");
    assert_eq!((key.as_str(), line, column), ("approval.timeout_s", 3, 3));
    assert_eq!(
        message,
        "duplicate key `timeout_s` (first written at line 2)"
    );
}

#[test]
fn timeouts_under_their_minimum_are_errors_not_clamps() {
    for (text, key) in [
        ("approval:\n  timeout_s: 0\n", "approval.timeout_s"),
        (
            "plugins:\n  call_timeout_ms: -5\n",
            "plugins.call_timeout_ms",
        ),
        (
            "guardrails:\n  call_timeout_ms: 0\n",
            "guardrails.call_timeout_ms",
        ),
        (
            "mcp_servers:\n  s:\n    command: x\n    call_timeout_s: 0\n",
            "mcp_servers.s.call_timeout_s",
        ),
    ] {
        let (found, _, _, message, allowed) = invalid(text);
        assert_eq!(found, key, "{text}");
        assert!(message.contains("is less than"), "{message}");
        assert!(allowed.starts_with("an integer from 1 to "), "{allowed}");
    }
    // Too large is still clamped, with a warning.
    let loaded = parse("approval:\n  timeout_s: 999999\n", "q.yaml").unwrap();
    assert_eq!(loaded.config.approval.timeout_s, 86_400);
    assert_eq!(loaded.warnings.len(), 1);
}

#[test]
fn check_reports_every_problem_with_suggestions() {
    let text = "tools:\n  tool_search:\n    enable: on\napproval:\n  timeout_s: 0\nplugin:\n  dirs: []\nmodels:\n  m:\n    provider: openia\n    model: x\n";
    let errors = check(text, "q.yaml").unwrap_err();
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(
        lines[0]
            .contains("`tools.tool_search.enable`: unknown key `enable`; did you mean `enabled`?"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("q.yaml:5:14: `approval.timeout_s`: 0 is less than 1"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].contains("`plugin`: unknown key `plugin`; did you mean `plugins`?"),
        "{}",
        lines[2]
    );
    assert!(lines[3].contains("`models.m.provider`: unknown value `openia`; did you mean `openai`?; allowed: openai, anthropic"), "{}", lines[3]);
    // Problems only the sections can tell are collected across sections.
    let text = "approval:\n  require: [\"a[\"]\nserve:\n  listen: nowhere\n";
    let errors = check(text, "q.yaml").unwrap_err();
    assert_eq!(errors.len(), 2, "{errors:#?}");
}

#[test]
fn the_embedded_default_and_the_examples_pass_check() {
    assert!(check(EMBEDDED_DEFAULT, "<embedded default>").is_ok());
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for entry in std::fs::read_dir(examples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            if let Err(errors) = check(&text, &path.display().to_string()) {
                // Only what the walk finds is checked here; a section's own
                // checks may need the environment (`${VAR}`).
                let walk = quiver_config::check_document(&text, "x", &settings());
                assert!(walk.is_empty(), "{}: {errors:#?}", path.display());
            }
        }
    }
}

#[test]
fn effective_limit_is_clamped() {
    let c = ToolSearchConfig::default();
    assert_eq!(c.effective_limit(None), 5);
    assert_eq!(c.effective_limit(Some(0)), 1);
    assert_eq!(c.effective_limit(Some(1000)), 20);
}

#[test]
fn plugins_section_is_read() {
    let hash = "AB".repeat(32);
    let text = format!(
        "plugins:\n  dirs: [plugins, /opt/quiver/plugins]\n  state_dir: /var/lib/quiver\n  call_timeout_ms: 2500\n  reload_warn_after: 10\n  pin:\n    text: {hash}\n"
    );
    let loaded = parse(&text, "q.yaml").unwrap();
    assert!(loaded.warnings.is_empty());
    let p = loaded.config.plugins;
    assert_eq!(
        p.dirs,
        [
            PathBuf::from("plugins"),
            PathBuf::from("/opt/quiver/plugins")
        ]
    );
    assert_eq!(p.state_dir, Some(PathBuf::from("/var/lib/quiver")));
    assert_eq!((p.call_timeout_ms, p.reload_warn_after), (2500, 10));
    assert_eq!(p.pin["text"], "ab".repeat(32));
}

#[test]
fn plugins_defaults_and_clamps() {
    let p = parse("", "q.yaml").unwrap().config.plugins;
    assert_eq!(p, PluginsConfig::default());
    let loaded = parse("plugins:\n  call_timeout_ms: 9999999\n", "q.yaml").unwrap();
    assert_eq!(loaded.config.plugins.call_timeout_ms, 600_000);
    assert_eq!(loaded.warnings[0].key, "plugins.call_timeout_ms");
    assert_eq!(
        (loaded.warnings[0].line, loaded.warnings[0].column),
        (2, 20)
    );
}

#[test]
fn plugins_errors_name_key_and_allowed_values() {
    let (key, line, _, _, allowed) = invalid("plugins:\n  pin:\n    text: nothex\n");
    assert_eq!((key.as_str(), line), ("plugins.pin.text", 3));
    assert!(allowed.contains("sha256"), "{allowed}");
    let (key, line, column, message, allowed) = invalid("plugins:\n  dir: [x]\n");
    assert_eq!((line, column), (2, 3));
    assert!(key.starts_with("plugins"), "{key}");
    assert!(message.contains("dir"), "{message}");
    assert!(allowed.contains("state_dir"), "{allowed}");
    let (key, _, _, _, allowed) = invalid("plugins:\n  call_timeout_ms: soon\n");
    assert_eq!(key, "plugins.call_timeout_ms");
    assert_eq!(allowed, "an integer from 1 to 600000");
}

#[test]
fn relative_plugin_paths_follow_the_config_file() {
    let mut p = PluginsConfig {
        dirs: vec!["p".into(), "/abs".into()],
        state_dir: Some("s".into()),
        ..PluginsConfig::default()
    };
    p.resolve_relative_to(Path::new("/etc/quiver"));
    assert_eq!(
        p.dirs,
        [PathBuf::from("/etc/quiver/p"), PathBuf::from("/abs")]
    );
    assert_eq!(p.state_dir, Some(PathBuf::from("/etc/quiver/s")));
}

#[test]
fn embedded_default_is_valid() {
    let loaded = embedded_default().unwrap();
    assert!(loaded.warnings.is_empty());
}

#[test]
fn discovery_prefers_the_current_directory_then_the_user_config_dir() {
    use std::ffi::OsStr;
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("project");
    let xdg = dir.path().join("xdg");
    let home = dir.path().join("home");
    for d in [&cwd, &xdg.join("quiver"), &home.join(".config/quiver")] {
        std::fs::create_dir_all(d).unwrap();
    }
    let find = |xdg_value: Option<&Path>| {
        discover_in(
            None,
            &cwd,
            xdg_value.map(Path::as_os_str),
            Some(home.as_os_str()),
        )
    };
    // Nothing anywhere: the embedded default, naming where it looked.
    match find(Some(&xdg)) {
        ConfigOrigin::Embedded(looked) => assert_eq!(
            looked,
            [cwd.join("quiver.yaml"), xdg.join("quiver/quiver.yaml")]
        ),
        other => panic!("{other:?}"),
    }
    std::fs::write(home.join(".config/quiver/quiver.yaml"), "").unwrap();
    // XDG_CONFIG_HOME set: ~/.config is not its fallback.
    assert!(matches!(find(Some(&xdg)), ConfigOrigin::Embedded(_)));
    assert_eq!(
        find(None),
        ConfigOrigin::UserConfig(home.join(".config/quiver/quiver.yaml"))
    );
    assert_eq!(
        discover_in(None, &cwd, Some(OsStr::new("")), Some(home.as_os_str())),
        ConfigOrigin::UserConfig(home.join(".config/quiver/quiver.yaml"))
    );
    std::fs::write(xdg.join("quiver/quiver.yaml"), "").unwrap();
    assert_eq!(
        find(Some(&xdg)),
        ConfigOrigin::UserConfig(xdg.join("quiver/quiver.yaml"))
    );
    // A relative XDG_CONFIG_HOME is ignored (the XDG spec).
    assert_eq!(
        find(Some(Path::new("relative"))),
        ConfigOrigin::UserConfig(home.join(".config/quiver/quiver.yaml"))
    );
    std::fs::write(cwd.join("quiver.yaml"), "").unwrap();
    assert_eq!(
        find(Some(&xdg)),
        ConfigOrigin::CurrentDir(cwd.join("quiver.yaml"))
    );
    let given = PathBuf::from("/elsewhere/q.yaml");
    assert_eq!(
        discover_in(Some(&given), &cwd, None, None),
        ConfigOrigin::Given(given)
    );
}
