//! A harness for a plugin's own `#[test]`s: [`TestPlugin`] loads the built
//! `.so` through the host's checks ([`loader`](crate::loader): stamp,
//! layout, manifest, schemas, config, `init`) and calls tools with JSON
//! across the real boundary, checking the arguments against the tool's
//! input schema first as the daemon does.
//!
//! ```ignore
//! // tests/boundary.rs of a plugin crate (with quiver-plugin-api's
//! // `testing` feature as a dev-dependency)
//! use quiver_plugin_api::testing::TestPlugin;
//!
//! #[test]
//! fn hello_greets() {
//!     let plugin = TestPlugin::built(env!("CARGO_PKG_NAME")).unwrap();
//!     let out = plugin.call("hello", serde_json::json!({"name": "Ada"})).unwrap();
//!     assert_eq!(out["greeting"], "hello, Ada");
//! }
//! ```
//!
//! The dynamic loader returns the already-loaded code for a path it has
//! seen, so every `TestPlugin` of one path in a test process shares one
//! copy of the plugin's statics; `init` runs for each.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};

use abi_stable::std_types::RResult;
use serde_json::{Value, json};

use crate::loader::{self, LoadError};
use crate::{PluginManifest, PluginModuleRef, ToolError};

/// A plugin loaded as the host loads it.
pub struct TestPlugin {
    path: PathBuf,
    module: PluginModuleRef,
    manifest: PluginManifest,
    validators: HashMap<String, jsonschema::Validator>,
}

impl std::fmt::Debug for TestPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestPlugin")
            .field("path", &self.path)
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

/// Why a test plugin could not be loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct TestLoadError {
    /// The file.
    pub path: PathBuf,
    /// What the host's checks said.
    pub error: LoadError,
}

impl std::fmt::Display for TestLoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

impl std::error::Error for TestLoadError {}

/// Where cargo put the cdylib of package `package` for the profile of the
/// running test binary (`target/PROFILE/libNAME.so`, beside the `deps`
/// directory that holds the test binary).
pub fn built_path(package: &str) -> PathBuf {
    let file = format!("lib{}.so", package.replace('-', "_"));
    let exe = std::env::current_exe().unwrap_or_default();
    let deps = exe.parent().unwrap_or(Path::new("."));
    let profile_dir = if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().unwrap_or(deps)
    } else {
        deps
    };
    profile_dir.join(file)
}

/// Packages this process already built (cargo is run once per package).
static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Builds the cdylib of `package` with the cargo running the tests, in the
/// test binary's profile, once per process: `cargo test` builds a
/// `cdylib`-only package's tests but not its `.so`.
pub fn build(package: &str) -> Result<PathBuf, String> {
    let path = built_path(package);
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    if built.iter().any(|p| p == package) {
        return Ok(path);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["build", "--quiet", "--lib", "-p", package]);
    if path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|p| p == "release")
    {
        command.arg("--release");
    }
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        command.current_dir(dir);
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run cargo to build {package}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo build -p {package} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    built.push(package.to_owned());
    Ok(path)
}

impl TestPlugin {
    /// Builds the cdylib of package `package` (pass
    /// `env!("CARGO_PKG_NAME")`) with [`build`], then loads it with no
    /// configuration.
    pub fn built(package: &str) -> Result<TestPlugin, TestLoadError> {
        TestPlugin::built_with_config(package, None)
    }

    /// [`TestPlugin::built`] with `config` as the plugin's
    /// `plugins.config.NAME` section.
    pub fn built_with_config(
        package: &str,
        config: Option<Value>,
    ) -> Result<TestPlugin, TestLoadError> {
        let path = build(package).map_err(|detail| TestLoadError {
            path: built_path(package),
            error: LoadError::Open(detail),
        })?;
        TestPlugin::load(&path, config)
    }

    /// Loads the plugin file at `path`, with `config` as its
    /// `plugins.config.NAME` section (`None`: absent).
    pub fn load(path: &Path, config: Option<Value>) -> Result<TestPlugin, TestLoadError> {
        let fail = |error| TestLoadError {
            path: path.to_owned(),
            error,
        };
        if !path.is_file() {
            return Err(fail(LoadError::Open(
                "no such file: build the plugin first (`cargo build`)".into(),
            )));
        }
        let (module, manifest) = loader::open(path).map_err(fail)?;
        loader::init(&module, &manifest, config.as_ref()).map_err(fail)?;
        let mut validators = HashMap::new();
        for tool in &manifest.tools {
            let validator = loader::compile_schema(&tool.input_schema)
                .map_err(|e| fail(LoadError::Manifest(format!("tool `{}`: {e}", tool.name))))?;
            validators.insert(tool.name.clone(), validator);
        }
        Ok(TestPlugin {
            path: path.to_owned(),
            module,
            manifest,
            validators,
        })
    }

    /// The checked manifest, as the host read it.
    pub fn manifest(&self) -> &PluginManifest {
        &self.manifest
    }

    /// Calls `tool` with `arguments`. Arguments that miss the input schema
    /// are refused before the call with code `invalid_arguments` (what the
    /// daemon answers); the plugin's own errors keep their code and data;
    /// a panic is an error with code `plugin_panicked`.
    pub fn call(&self, tool: &str, arguments: Value) -> Result<Value, ToolError> {
        let Some(validator) = self.validators.get(tool) else {
            return Err(ToolError::new(
                "tool_unavailable",
                format!("plugin `{}` has no tool `{tool}`", self.manifest.name),
            ));
        };
        let problems: Vec<Value> = validator
            .iter_errors(&arguments)
            .map(|e| json!({"pointer": e.instance_path().as_str(), "message": e.to_string()}))
            .collect();
        if !problems.is_empty() {
            return Err(ToolError::new(
                "invalid_arguments",
                format!("`{tool}` was not called: its arguments do not match its schema"),
            )
            .with_data(json!({"problems": problems})));
        }
        self.call_unchecked(tool, &arguments.to_string())
    }

    /// Calls `tool` with raw argument text, skipping the schema check (to
    /// see what the plugin itself does with bad input).
    pub fn call_unchecked(&self, tool: &str, arguments_json: &str) -> Result<Value, ToolError> {
        match (self.module.call())(tool.into(), arguments_json.into()) {
            RResult::ROk(text) => serde_json::from_str(text.as_str()).map_err(|e| {
                ToolError::new(
                    "plugin_bad_result",
                    format!("`{tool}` returned invalid JSON: {e}"),
                )
            }),
            RResult::RErr(error) => Err(ToolError::from_ffi(&error)),
        }
    }

    /// Runs the plugin's shutdown hook (the host runs it when a generation
    /// stops serving).
    pub fn shutdown(&self) {
        (self.module.shutdown())();
    }
}
