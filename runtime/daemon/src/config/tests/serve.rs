//! The `serve`, `agent` and `gateway` sections, read through the root parse.

use std::ffi::OsStr;
use std::path::Path;

use crate::config::parse;
use quiver_config::ConfigError;
use quiver_config::paths::state_dir_from;

#[test]
fn default_state_dir_follows_xdg_then_home_then_a_per_user_temp_dir() {
    let temp = Path::new("/tmp");
    let resolve = |xdg: Option<&str>, home: Option<&str>| {
        state_dir_from(xdg.map(OsStr::new), home.map(OsStr::new), temp, 1000)
    };
    assert_eq!(
        resolve(Some("/x/state"), Some("/home/u")),
        Path::new("/x/state/quiver")
    );
    assert_eq!(
        resolve(None, Some("/home/u")),
        Path::new("/home/u/.local/state/quiver")
    );
    // Empty or relative XDG_STATE_HOME is ignored, as the XDG spec says.
    assert_eq!(
        resolve(Some(""), Some("/home/u")),
        Path::new("/home/u/.local/state/quiver")
    );
    assert_eq!(
        resolve(Some("state"), Some("/home/u")),
        Path::new("/home/u/.local/state/quiver")
    );
    // Neither: a directory of this user's own, not the temp dir itself.
    assert_eq!(resolve(None, None), Path::new("/tmp/quiver-1000"));
    assert_eq!(resolve(Some(""), Some("")), Path::new("/tmp/quiver-1000"));
}

#[test]
fn sections_are_read() {
    let text = "serve:\n  listen: 127.0.0.1:0\n  state_dir: state\nagent:\n  max_steps: 3\n  max_consecutive_searches: 2\n  system_prompt: be brief\ngateway:\n  grants: [core, \"plugin-*\"]\n  context_tokens: 8000\n";
    let loaded = parse(text, "q.yaml").unwrap();
    assert!(loaded.warnings.is_empty());
    let c = loaded.config;
    assert_eq!(c.serve.listen.to_string(), "127.0.0.1:0");
    assert_eq!(c.serve.state_dir.as_deref(), Some("state".as_ref()));
    assert_eq!(
        (c.agent.max_steps, c.agent.max_consecutive_searches),
        (3, 2)
    );
    assert_eq!(c.agent.system_prompt, "be brief");
    assert_eq!(c.gateway.grants, ["core", "plugin-*"]);
    assert_eq!(c.gateway.context_tokens, 8000);
}

#[test]
fn errors_name_key_and_allowed_values() {
    match parse("serve:\n  listen: localhost\n", "q.yaml") {
        Err(ConfigError::Invalid {
            key, line, allowed, ..
        }) => {
            assert_eq!((key.as_str(), line), ("serve.listen", 2));
            assert!(allowed.contains("127.0.0.1:8765"), "{allowed}");
        }
        other => panic!("{other:?}"),
    }
    match parse("agent:\n  max_step: 3\n", "q.yaml") {
        Err(ConfigError::Invalid {
            message, allowed, ..
        }) => {
            assert!(message.contains("max_step"), "{message}");
            assert!(allowed.contains("max_consecutive_searches"), "{allowed}");
        }
        other => panic!("{other:?}"),
    }
    let loaded = parse("agent:\n  max_steps: 0\n", "q.yaml").unwrap();
    assert_eq!(loaded.config.agent.max_steps, 1);
    assert_eq!(loaded.warnings[0].key, "agent.max_steps");
}
