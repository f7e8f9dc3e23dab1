//! `quiver serve` without `--config` reads `./quiver.yaml`, else
//! `$XDG_CONFIG_HOME/quiver/quiver.yaml`, else the embedded default, and
//! its startup summary says which.

use quiver_tests::daemon;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use daemon::{Fixture, TestDaemon};

/// Starts `quiver serve` (no `--config`) in `cwd` with `XDG_CONFIG_HOME`
/// at `xdg` and returns its summary's config line.
fn config_line(cwd: &Path, xdg: &Path, state: &Path) -> String {
    let mut command = quiver_tests::quiver_command();
    command
        .arg("serve")
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", xdg)
        .stderr(Stdio::piped());
    let mut daemon = TestDaemon::spawn(command, state);
    let lines = daemon.stderr_lines();
    let line = lines.wait_for(": config ", Duration::from_secs(60));
    daemon.stop();
    line
}

#[test]
fn the_current_directory_then_the_user_config_dir_then_the_default() {
    let fixture = Fixture::new();
    // A config with no model and no MCP server: quick to start.
    let yaml = format!(
        "plugins:\n  dirs: [{}]\ncore_tools:\n  workspace: {}\n",
        fixture.plugins().display(),
        fixture.work().display()
    );
    let project = fixture.path().join("project");
    let xdg = fixture.path().join("xdg");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(xdg.join("quiver")).unwrap();

    let line = config_line(&project, &xdg, &fixture.state());
    assert!(line.contains("the embedded default (no "), "{line}");
    assert!(
        line.contains(&project.join("quiver.yaml").display().to_string()),
        "{line}"
    );

    let user = xdg.join("quiver").join("quiver.yaml");
    std::fs::write(&user, &yaml).unwrap();
    let line = config_line(&project, &xdg, &fixture.state());
    assert!(
        line.contains(&format!(
            "config {} (found in the user config directory)",
            user.display()
        )),
        "{line}"
    );

    std::fs::write(project.join("quiver.yaml"), &yaml).unwrap();
    let line = config_line(&project, &xdg, &fixture.state());
    assert!(line.contains("(found in the current directory)"), "{line}");
    assert!(
        line.contains(&project.join("quiver.yaml").display().to_string()),
        "{line}"
    );
}
