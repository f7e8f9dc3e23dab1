//! The operator's example (`examples/operator/`): its `quiver.yaml` passes
//! `quiver config check` when its secrets are in the environment and names
//! the missing variable otherwise, and its systemd unit runs that config
//! with the state directory, workspace and hardening the config expects.

use quiver_tests::{arg, quiver_command, workspace_root};

#[test]
fn the_operator_config_checks_with_its_secrets_and_names_a_missing_one() {
    let config = workspace_root().join("examples/operator/quiver.yaml");
    let output = quiver_command()
        .args(["config", "check", arg(&config)])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("GITHUB_TOKEN", "test-token")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");

    let output = quiver_command()
        .args(["config", "check", arg(&config)])
        .env_remove("ANTHROPIC_API_KEY")
        .env("GITHUB_TOKEN", "test-token")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("`models.claude.api_key`") && stderr.contains("ANTHROPIC_API_KEY"),
        "{stderr}"
    );
}

#[test]
fn the_unit_runs_that_config_with_its_state_dir_workspace_and_hardening() {
    let unit =
        std::fs::read_to_string(workspace_root().join("examples/operator/quiver.service")).unwrap();
    let config =
        std::fs::read_to_string(workspace_root().join("examples/operator/quiver.yaml")).unwrap();
    let value = |key: &str| -> String {
        unit.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("the unit has no {key}="))
            .to_owned()
    };
    let exec = value("ExecStart");
    assert!(
        exec.contains("serve --config /etc/quiver/quiver.yaml --state-dir /var/lib/quiver"),
        "{exec}"
    );
    // StateDirectory=quiver is /var/lib/quiver, the config's state_dir.
    assert_eq!(value("StateDirectory"), "quiver");
    assert_eq!(value("StateDirectoryMode"), "0700");
    assert!(config.contains("state_dir: /var/lib/quiver"));
    // The only writable path besides the state is the core tools' workspace.
    let workspace = value("ReadWritePaths");
    assert!(
        config.contains(&format!("workspace: {workspace}")),
        "{workspace}"
    );
    for (key, expected) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("CapabilityBoundingSet", ""),
    ] {
        assert_eq!(value(key), expected, "{key}");
    }
    // The listener stays on loopback (the config has no other address).
    assert!(config.contains("listen: 127.0.0.1:"));
}
