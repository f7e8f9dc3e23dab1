//! `quiver plugin new | check | list`: tooling for plugin authors.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use serde_json::json;

use quiver_daemon::config;
use quiver_plugins::{PluginHost, PluginHostOptions, ReloadOutcome};
use quiver_tool::registry::ToolRegistry;

#[derive(Subcommand)]
pub(crate) enum PluginCommand {
    /// Scaffold a plugin crate that builds and loads as is.
    New {
        /// Plugin name: lowercase letters, digits, `_` and `-`.
        name: String,
        /// Directory to create (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Path of the quiver-plugin-api crate (default: the one this quiver was built from).
        #[arg(long)]
        api_path: Option<PathBuf>,
    },
    /// Load one plugin file in isolation and print its manifest, or the exact error.
    Check {
        /// The plugin `.so`.
        file: PathBuf,
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
            api_path,
        } => scaffold(&name, dir, api_path),
        PluginCommand::Check { file, dev, json } => check(&file, dev, json),
        PluginCommand::List { config, dev, json } => list(config.as_deref(), dev, json),
    }
}

struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn check(file: &Path, dev: bool, json_out: bool) -> Result<ExitCode> {
    let scratch = ScratchDir(
        std::env::temp_dir().join(format!("quiver-plugin-check-{}", std::process::id())),
    );
    let mut options = PluginHostOptions::new(&scratch.0);
    options.dev = dev;
    let host = PluginHost::new(Arc::new(ToolRegistry::new()), options)?;
    let file =
        std::path::absolute(file).with_context(|| format!("cannot resolve {}", file.display()))?;
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
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
                .collect();
            let mut out = std::io::stdout().lock();
            if json_out {
                let value = json!({
                    "file": file,
                    "name": generation.name(),
                    "version": generation.version(),
                    "sha256": generation.sha256(),
                    "abi_version": quiver_plugin_api::PLUGIN_ABI_VERSION,
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

fn scaffold(name: &str, dir: Option<PathBuf>, api_path: Option<PathBuf>) -> Result<ExitCode> {
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
    let api = match api_path {
        Some(path) => path,
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("plugin-api"),
    };
    let api = std::fs::canonicalize(&api).with_context(|| {
        format!(
            "cannot find quiver-plugin-api at {}; pass --api-path",
            api.display()
        )
    })?;
    let tool = format!("{}_hello", name.replace('-', "_"));
    std::fs::create_dir_all(dir.join("src"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let api_text = api
        .display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            r#"[package]
name = "quiver-plugin-{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
quiver-plugin-api = {{ path = "{api_text}" }}
serde_json = "1"

# A plugin is its own workspace: `cargo build --release` puts the plugin at
# target/release/libquiver_plugin_{under}.so.
[workspace]
"#,
            under = name.replace('-', "_")
        ),
    )?;
    std::fs::write(dir.join(".gitignore"), "/target\n")?;
    std::fs::write(
        dir.join("src/lib.rs"),
        format!(
            r#"//! Quiver plugin `{name}`.
//!
//! Build with `cargo build --release`, then install atomically:
//! `cp target/release/libquiver_plugin_{under}.so PLUGIN_DIR/.{name}.so.tmp &&
//! mv PLUGIN_DIR/.{name}.so.tmp PLUGIN_DIR/{name}.so`.

use quiver_plugin_api::{{PluginManifest, ToolError, ToolManifest, str_arg}};
use serde_json::{{Value, json}};

fn manifest() -> PluginManifest {{
    PluginManifest::new("{under}", env!("CARGO_PKG_VERSION")).tool(ToolManifest::new(
        "{tool}",
        "Greets someone by name.",
        json!({{
            "type": "object",
            "properties": {{"name": {{"type": "string", "description": "Who to greet."}}}},
            "required": ["name"]
        }}),
    ))
}}

fn call(tool: &str, arguments: Value) -> Result<Value, ToolError> {{
    match tool {{
        "{tool}" => Ok(json!({{"greeting": format!("hello, {{}}", str_arg(&arguments, "name")?)}})),
        other => Err(ToolError::unknown_tool(other)),
    }}
}}

quiver_plugin_api::export_plugin!(manifest, call);
"#,
            under = name.replace('-', "_")
        ),
    )?;
    println!(
        "created {} (build it with `cargo build --release` inside it)",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
