//! `quiver plugin new | check | list`: tooling for plugin authors.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use serde_json::json;

use quiver_core_tools::CoreToolName;
use quiver_daemon::config;
use quiver_plugins::{PluginHost, PluginHostOptions, ReloadOutcome};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::tool::{ToolSource, ToolSpec};

#[derive(Subcommand)]
pub(crate) enum PluginCommand {
    /// Scaffold a plugin crate that builds and loads as is. It depends on
    /// quiver-plugin-api at the version this quiver speaks, from the
    /// registry unless --api-git or --api-path says otherwise.
    New {
        /// Plugin name: lowercase letters, digits, `_` and `-`.
        name: String,
        /// Directory to create (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The quiver-plugin-api version to depend on (default: the one
        /// this quiver was built with).
        #[arg(long, default_value = quiver_plugin_api::API_VERSION)]
        api_version: String,
        /// Take quiver-plugin-api from this git repository (at that version).
        #[arg(long, conflicts_with = "api_path")]
        api_git: Option<String>,
        /// Take quiver-plugin-api from this local checkout of the crate
        /// (for working on Quiver itself).
        #[arg(long)]
        api_path: Option<PathBuf>,
    },
    /// Load one plugin file in isolation, with the daemon's checks, and
    /// print its manifest or the exact error.
    Check {
        /// The plugin `.so`.
        file: PathBuf,
        /// Also check against this config: its `plugins.config.NAME` is
        /// handed to the plugin, and the plugins of its `plugins.dirs` are
        /// loaded first, so that a tool name another plugin has is refused.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Relax the ownership and permission checks.
        #[arg(long)]
        dev: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Load the configured plugin directories and show each plugin's
    /// generation, hash, tools, health and last error.
    List {
        /// Config file (default: the embedded default config).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Relax the ownership and permission checks.
        #[arg(long)]
        dev: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(command: PluginCommand) -> Result<ExitCode> {
    match command {
        PluginCommand::New {
            name,
            dir,
            api_version,
            api_git,
            api_path,
        } => {
            let source = match (api_git, api_path) {
                (Some(url), _) => ApiSource::Git(url),
                (None, Some(path)) => ApiSource::Path(path),
                (None, None) => ApiSource::Registry,
            };
            scaffold(&name, dir, &api_version, source)
        }
        PluginCommand::Check {
            file,
            config,
            dev,
            json,
        } => check(&file, config.as_deref(), dev, json),
        PluginCommand::List { config, dev, json } => list(config.as_deref(), dev, json),
    }
}

struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Core tool names as the daemon registers them: a plugin tool with one
/// of these names is refused as it would be at load.
fn register_core_names(registry: &ToolRegistry) {
    let specs = CoreToolName::ALL
        .iter()
        .map(|name| {
            ToolSpec::new(
                name.as_str(),
                "A core tool.",
                json!({"type": "object", "properties": {}}),
            )
        })
        .collect();
    registry.set_source_tools(ToolSource::Core, specs);
}

fn check(file: &Path, config_path: Option<&Path>, dev: bool, json_out: bool) -> Result<ExitCode> {
    let scratch = ScratchDir(
        std::env::temp_dir().join(format!("quiver-plugin-check-{}", std::process::id())),
    );
    let loaded = match config_path {
        Some(path) => Some(config::load_file(path)?),
        None => None,
    };
    let mut options = PluginHostOptions::new(&scratch.0);
    options.dev = dev;
    if let Some(loaded) = &loaded {
        options.config = loaded.config.plugins.config.clone();
    }
    let registry = Arc::new(ToolRegistry::new());
    register_core_names(&registry);
    let host = PluginHost::new(registry, options)?;
    let file =
        std::path::absolute(file).with_context(|| format!("cannot resolve {}", file.display()))?;
    if let Some(loaded) = &loaded {
        // The other plugins first, as the daemon would have them.
        for dir in &loaded.config.plugins.dirs {
            let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|entries| entries.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            paths.sort();
            for path in paths {
                if host.accepts(&path) && !same_file(&path, &file) {
                    host.reload_path(&path);
                }
            }
        }
    }
    let outcome = if file.exists() {
        host.reload_path(&file)
    } else {
        ReloadOutcome::Failed(format!("{}: no such file", file.display()))
    };
    match outcome {
        ReloadOutcome::Loaded { .. } => {
            let Some(generation) = host.generation_of_file(&file) else {
                bail!("{}: loaded but not found afterwards", file.display());
            };
            let tools: Vec<_> = generation
                .tools()
                .iter()
                .map(|t| {
                    let mut tool = json!({"name": t.name, "description": t.description, "input_schema": t.input_schema});
                    if let Some(metadata) = &t.metadata {
                        if let Some(title) = &metadata.title {
                            tool["title"] = json!(title);
                        }
                        if !metadata.annotations.is_empty() {
                            tool["annotations"] = json!(metadata.annotations);
                        }
                        if let Some(schema) = &metadata.output_schema {
                            tool["output_schema"] = schema.clone();
                        }
                    }
                    tool
                })
                .collect();
            let mut out = std::io::stdout().lock();
            if json_out {
                let value = json!({
                    "file": file,
                    "name": generation.name(),
                    "version": generation.version(),
                    "sha256": generation.sha256(),
                    "abi_version": quiver_plugin_api::PLUGIN_ABI_VERSION,
                    "api_version": quiver_plugin_api::API_VERSION,
                    "tools": tools,
                });
                writeln!(out, "{value}")?;
            } else {
                writeln!(out, "{}: ok", file.display())?;
                writeln!(
                    out,
                    "plugin {} {} (sha256 {})",
                    generation.name(),
                    generation.version(),
                    generation.sha256()
                )?;
                for tool in generation.tools() {
                    writeln!(
                        out,
                        "  {}: {}",
                        tool.name,
                        quiver_tool::tool::short_description(&tool.description)
                    )?;
                    writeln!(out, "    input_schema: {}", tool.input_schema)?;
                    if let Some(schema) = tool
                        .metadata
                        .as_ref()
                        .and_then(|m| m.output_schema.as_ref())
                    {
                        writeln!(out, "    output_schema: {schema}")?;
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ReloadOutcome::Failed(message) => {
            eprintln!("error: {message}");
            Ok(ExitCode::FAILURE)
        }
        ReloadOutcome::Ignored => {
            eprintln!(
                "error: {}: not a plugin file name (plugins are `*.so`, not dotfiles or `*.tmp`)",
                file.display()
            );
            Ok(ExitCode::FAILURE)
        }
        ReloadOutcome::Unchanged => Ok(ExitCode::SUCCESS),
    }
}

fn list(config_path: Option<&Path>, dev: bool, json_out: bool) -> Result<ExitCode> {
    let loaded = config::discover(config_path).load()?;
    for warning in &loaded.warnings {
        eprintln!("warning: {warning}");
    }
    let plugins = &loaded.config.plugins;
    let host = PluginHost::new(
        Arc::new(ToolRegistry::new()),
        PluginHostOptions::from_config(plugins, dev),
    )?;
    host.load_dirs(&plugins.dirs);
    let mut out = std::io::stdout().lock();
    if json_out {
        writeln!(out, "{}", host.list_json())?;
        return Ok(ExitCode::SUCCESS);
    }
    let statuses = host.list();
    if statuses.is_empty() {
        writeln!(out, "no plugins in {:?}", plugins.dirs)?;
    }
    for s in statuses {
        writeln!(
            out,
            "{} {}  generation {}  sha256 {}  {:?}",
            s.name.as_deref().unwrap_or("(not loaded)"),
            s.version.as_deref().unwrap_or("-"),
            s.generation.map_or("-".to_owned(), |g| g.to_string()),
            s.sha256.as_deref().map_or("-", |h| &h[..16]),
            s.health
        )?;
        writeln!(out, "  file: {}", s.file.display())?;
        writeln!(out, "  tools: {}", s.tools.join(", "))?;
        if let Some(error) = &s.last_error {
            writeln!(out, "  last error: {error}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Where the scaffold takes quiver-plugin-api from.
enum ApiSource {
    /// The package registry, at the version.
    Registry,
    /// A git repository, at the version.
    Git(String),
    /// A local checkout of the crate.
    Path(PathBuf),
}

fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The dependency line's inline table, without `features`.
fn api_dependency(version: &str, source: &ApiSource) -> Result<String> {
    let version = toml_string(version);
    Ok(match source {
        ApiSource::Registry => format!("version = {version}"),
        ApiSource::Git(url) => format!("git = {}, version = {version}", toml_string(url)),
        ApiSource::Path(path) => {
            let path = std::fs::canonicalize(path)
                .with_context(|| format!("cannot find quiver-plugin-api at {}", path.display()))?;
            if !path.join("Cargo.toml").is_file() {
                bail!(
                    "{} is not the quiver-plugin-api crate (no Cargo.toml); pass the `plugin-api` directory of a Quiver checkout",
                    path.display()
                );
            }
            format!(
                "path = {}, version = {version}",
                toml_string(&path.display().to_string())
            )
        }
    })
}

fn scaffold(
    name: &str,
    dir: Option<PathBuf>,
    api_version: &str,
    source: ApiSource,
) -> Result<ExitCode> {
    if name.is_empty()
        || name.len() > 40
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        || !name.starts_with(|c: char| c.is_ascii_lowercase())
    {
        bail!(
            "plugin name `{name}`: use 1 to 40 lowercase letters, digits, `_` or `-`, starting with a letter"
        );
    }
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    let api = api_dependency(api_version, &source)?;
    let under = name.replace('-', "_");
    let tool = format!("{under}_hello");
    for sub in ["src", "tests"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let files = [
        ("Cargo.toml", scaffold_manifest(name, &under, &api)),
        (".gitignore", "/target\n".to_owned()),
        ("src/lib.rs", scaffold_lib(name, &under, &tool)),
        ("tests/boundary.rs", scaffold_test(name, &tool)),
        ("README.md", scaffold_readme(name, &under, &tool)),
    ];
    for (file, text) in files {
        let path = dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    println!(
        "created {} (build it with `cargo build --release` inside it; see its README.md)",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn scaffold_manifest(name: &str, under: &str, api: &str) -> String {
    format!(
        r#"[package]
name = "quiver-plugin-{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
quiver-plugin-api = {{ {api} }}
schemars = "1.2"
serde = {{ version = "1", features = ["derive"] }}
serde_json = "1"

# `cargo test` loads the built .so through the host's own checks.
[dev-dependencies]
quiver-plugin-api = {{ {api}, features = ["testing"] }}

# A plugin is its own workspace: `cargo build --release` puts the plugin at
# target/release/libquiver_plugin_{under}.so.
[workspace]

[profile.release]
# Plugins are loaded once per generation and never unloaded: keep them small.
strip = "debuginfo"
"#
    )
}

fn scaffold_lib(name: &str, under: &str, tool: &str) -> String {
    format!(
        r#"//! Quiver plugin `{name}`.

use quiver_plugin_api::{{JsonSchema, ToolError, tool}};
use serde::{{Deserialize, Serialize}};

/// Arguments of `{tool}`.
#[derive(Deserialize, JsonSchema)]
struct HelloArgs {{
    /// Who to greet.
    name: String,
}}

/// What `{tool}` answers.
#[derive(Serialize, JsonSchema)]
struct Hello {{
    /// The greeting.
    greeting: String,
}}

/// Greets someone by name.
#[tool(read_only, idempotent, open_world = false)]
fn {tool}(args: HelloArgs) -> Result<Hello, ToolError> {{
    if args.name.trim().is_empty() {{
        return Err(ToolError::invalid_argument("name", "must not be empty"));
    }}
    quiver_plugin_api::tracing::debug!(name = %args.name, "greeting");
    Ok(Hello {{
        greeting: format!("hello, {{}}", args.name),
    }})
}}

quiver_plugin_api::plugin! {{
    name: "{under}",
    tools: [{tool}],
}}
"#
    )
}

fn scaffold_test(name: &str, tool: &str) -> String {
    format!(
        r#"//! The built `{name}` plugin, loaded as the Quiver host loads it, called
//! across the real boundary.

use quiver_plugin_api::testing::TestPlugin;
use serde_json::json;

#[test]
fn {tool}_greets() {{
    let plugin = TestPlugin::built(env!("CARGO_PKG_NAME")).unwrap_or_else(|e| panic!("{{e}}"));
    let out = plugin.call("{tool}", json!({{"name": "Ada"}})).unwrap();
    assert_eq!(out["greeting"], "hello, Ada");
    let error = plugin.call("{tool}", json!({{"name": " "}})).unwrap_err();
    assert_eq!(error.code(), "invalid_argument");
    // Arguments the schema does not allow never reach the tool.
    let error = plugin.call("{tool}", json!({{"nmae": "Ada"}})).unwrap_err();
    assert_eq!(error.code(), "invalid_arguments");
}}
"#
    )
}

fn scaffold_readme(name: &str, under: &str, tool: &str) -> String {
    format!(
        r#"# Quiver plugin `{name}`

A tool plugin for Quiver, built with `quiver-plugin-api`'s typed tools:
each tool is a function marked `#[tool]`; its argument type gives the input
schema (with `additionalProperties: false`), its doc comment the
description, its result type the output schema.

## Dev loop

```sh
cargo test                        # builds the .so and calls its tools as the host would
cargo build --release             # target/release/libquiver_plugin_{under}.so
quiver plugin check target/release/libquiver_plugin_{under}.so   # the daemon's checks, without a daemon
```

Install it into a directory the daemon watches (`plugins.dirs`) **by
rename**, never by writing the file in place:

```sh
cp target/release/libquiver_plugin_{under}.so PLUGIN_DIR/.{name}.so.tmp
mv PLUGIN_DIR/.{name}.so.tmp PLUGIN_DIR/{name}.so
```

The running daemon loads it as a new generation (dotfiles and `*.tmp` are
ignored until the rename); `{tool}` is in the next assembly, found through
`tool_search`. Rebuild and rename again to replace it: calls in flight
finish on the old generation. A load that fails (`quiver plugin list`
shows why) keeps the previous one serving.

Settings of your own go under `plugins.config.{under}` in `quiver.yaml`:
declare them with `init: init` in `plugin!` (`fn init(config: Config) ->
Result<(), ToolError>`, `Config: Deserialize + JsonSchema`); the daemon
checks the section against `Config`'s schema before it loads the plugin.
"#
    )
}
