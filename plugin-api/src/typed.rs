//! Typed tools: a [`TypedTool`] is a Rust function whose argument type
//! gives the input schema (schemars, `additionalProperties: false`) and
//! whose result type gives the output schema; a [`Plugin`] holds the tools,
//! the optional `init(config)` and shutdown hooks, and answers the host's
//! calls by tool name. The `#[tool]` attribute and the `plugin!` macro
//! build both, so plugin code never matches tool names itself.

use std::borrow::Cow;
use std::collections::HashMap;

use schemars::generate::{Contract, SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema, json_schema};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::{PluginManifest, ToolError, ToolHints, ToolManifest};

type Handler = Box<dyn Fn(Value) -> Result<Value, ToolError> + Send + Sync>;

/// One typed tool: its manifest and the function behind it.
pub struct TypedTool {
    manifest: ToolManifest,
    handler: Handler,
}

impl std::fmt::Debug for TypedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedTool")
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

impl TypedTool {
    /// A tool named `name` running `handler`: its arguments are
    /// deserialised into `A` (a mismatch is an [`invalid_argument`] error
    /// naming the field), its result serialised from `O`.
    ///
    /// [`invalid_argument`]: ToolError::invalid_argument
    pub fn new<A, O, F>(name: &str, description: &str, handler: F) -> TypedTool
    where
        A: DeserializeOwned + JsonSchema,
        O: Serialize + JsonSchema,
        F: Fn(A) -> Result<O, ToolError> + Send + Sync + 'static,
    {
        let mut manifest = ToolManifest::new(name, description, input_schema::<A>());
        manifest.output_schema = output_schema::<O>();
        let tool = name.to_owned();
        TypedTool {
            manifest,
            handler: Box::new(move |arguments| {
                let arguments: A = from_json(arguments)?;
                let result = handler(arguments)?;
                serde_json::to_value(result).map_err(|e| {
                    ToolError::failed(format!("the result of `{tool}` cannot be serialised: {e}"))
                })
            }),
        }
    }

    /// The same tool with a display title.
    pub fn title(mut self, title: &str) -> Self {
        self.manifest.title = Some(title.to_owned());
        self
    }

    /// The same tool with these behaviour hints.
    pub fn hints(mut self, hints: ToolHints) -> Self {
        self.manifest.hints = hints;
        self
    }

    /// What the host is told about the tool.
    pub fn manifest(&self) -> &ToolManifest {
        &self.manifest
    }

    /// Runs the tool on JSON arguments.
    pub fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        (self.handler)(arguments)
    }
}

/// The argument type of a tool that takes none: `{}` and nothing else.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

impl JsonSchema for NoArguments {
    fn schema_name() -> Cow<'static, str> {
        "NoArguments".into()
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "properties": {}, "additionalProperties": false})
    }
}

fn generator(contract: Contract) -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            // The model reads these: one self-contained schema, no `$defs`
            // to chase (recursive types still get a `$ref`).
            settings.inline_subschemas = true;
            settings.meta_schema = None;
            settings.contract = contract;
        })
        .into_generator()
}

/// The input schema derived from `A`: schemars' draft 2020-12 schema,
/// inlined, without the `$schema` and the root `title` (the Rust type's
/// name, noise to the model), and with `additionalProperties: false` on
/// the root object unless the type says otherwise, so that an argument
/// the tool does not take is refused instead of ignored.
pub fn input_schema<A: JsonSchema>() -> Value {
    let mut schema = generator(Contract::Deserialize)
        .into_root_schema_for::<A>()
        .to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("title");
        // The argument type's doc comment describes a Rust type; the tool's
        // own description is what the model reads.
        map.remove("description");
        // `#[serde(default)]` on an `Option` says `"default": null`: noise.
        if let Some(Value::Object(properties)) = map.get_mut("properties") {
            for property in properties.values_mut() {
                if let Value::Object(property) = property
                    && property.get("default") == Some(&Value::Null)
                {
                    property.remove("default");
                }
            }
        }
        if map.get("type").and_then(Value::as_str) == Some("object") {
            map.entry("properties").or_insert_with(|| json!({}));
            map.entry("additionalProperties").or_insert(json!(false));
        }
    }
    schema
}

/// The output schema derived from `O`, when it is an object schema (MCP's
/// `outputSchema` describes an object; a tool returning a string or any
/// JSON value has none).
pub fn output_schema<O: JsonSchema>() -> Option<Value> {
    let mut schema = generator(Contract::Serialize)
        .into_root_schema_for::<O>()
        .to_value();
    let map = schema.as_object_mut()?;
    if map.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    map.remove("title");
    map.remove("description");
    Some(schema)
}

/// Deserialises JSON arguments, naming the field that does not fit.
pub fn from_json<A: DeserializeOwned>(arguments: Value) -> Result<A, ToolError> {
    serde_path_to_error::deserialize(arguments).map_err(|error| {
        let path = error.path().to_string();
        let message = error.into_inner().to_string();
        // serde reports a missing or unknown field at its parent.
        let named = ["missing field `", "unknown field `"]
            .iter()
            .find_map(|prefix| message.strip_prefix(prefix))
            .and_then(|rest| rest.split('`').next());
        let field = match (named, path.as_str()) {
            (Some(name), ".") => name.to_owned(),
            (Some(name), parent) => format!("{parent}.{name}"),
            (None, path) => path.to_owned(),
        };
        ToolError::invalid_argument(field, message)
    })
}

type Init = Box<dyn Fn(Value) -> Result<(), ToolError> + Send + Sync>;

/// A plugin made of typed tools, with optional `init` and shutdown hooks.
/// [`plugin!`](crate::plugin) builds one and exports it.
pub struct Plugin {
    name: String,
    version: String,
    tools: Vec<TypedTool>,
    index: HashMap<String, usize>,
    config_schema: Option<Value>,
    init: Option<Init>,
    shutdown: Option<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// A plugin with no tools yet.
    pub fn new(name: &str, version: &str) -> Plugin {
        Plugin {
            name: name.to_owned(),
            version: version.to_owned(),
            tools: Vec::new(),
            index: HashMap::new(),
            config_schema: None,
            init: None,
            shutdown: None,
        }
    }

    /// Adds a tool (a second tool of the same name is kept in the
    /// manifest, where the host refuses it as listed twice).
    pub fn tool(mut self, tool: TypedTool) -> Plugin {
        self.index
            .entry(tool.manifest.name.clone())
            .or_insert(self.tools.len());
        self.tools.push(tool);
        self
    }

    /// Runs `init` once per loaded generation, before any call, with the
    /// plugin's `plugins.config.NAME` section deserialised into `C`; `C`'s
    /// schema is the config schema the host validates the section against
    /// first. An absent section is read as `{}`.
    pub fn init<C, F>(mut self, init: F) -> Plugin
    where
        C: DeserializeOwned + JsonSchema,
        F: Fn(C) -> Result<(), ToolError> + Send + Sync + 'static,
    {
        self.config_schema = Some(input_schema::<C>());
        self.init = Some(Box::new(move |config| {
            let config = if config.is_null() { json!({}) } else { config };
            let config: C = from_json(config).map_err(|e| {
                ToolError::new("invalid_config", format!("configuration: {}", e.message()))
            })?;
            init(config)
        }));
        self
    }

    /// Runs `shutdown` when the generation no longer serves and its last
    /// call returned.
    pub fn on_shutdown(mut self, shutdown: impl Fn() + Send + Sync + 'static) -> Plugin {
        self.shutdown = Some(Box::new(shutdown));
        self
    }

    /// The manifest built from the tools.
    pub fn manifest(&self) -> PluginManifest {
        PluginManifest {
            name: self.name.clone(),
            version: self.version.clone(),
            tools: self.tools.iter().map(|t| t.manifest.clone()).collect(),
            config_schema: self.config_schema.clone(),
        }
    }

    /// Calls the tool named `tool`.
    pub fn call(&self, tool: &str, arguments: Value) -> Result<Value, ToolError> {
        match self.index.get(tool) {
            Some(&index) => self.tools[index].call(arguments),
            None => Err(ToolError::unknown_tool(tool)),
        }
    }

    /// Runs the `init` hook, if any.
    pub fn run_init(&self, config: Value) -> Result<(), ToolError> {
        match &self.init {
            Some(init) => init(config),
            None => Ok(()),
        }
    }

    /// Runs the shutdown hook, if any.
    pub fn run_shutdown(&self) {
        if let Some(shutdown) = &self.shutdown {
            shutdown();
        }
    }
}

/// Exports a plugin made of `#[tool]` functions. Use it once, at the crate
/// root of a `cdylib` crate:
///
/// ```ignore
/// quiver_plugin_api::plugin! {
///     name: "text",
///     tools: [word_count, hash],
///     init: init,          // optional: fn init(config: Config) -> Result<(), ToolError>
///     shutdown: shutdown,  // optional: fn shutdown()
/// }
/// ```
///
/// The version is the crate's (`CARGO_PKG_VERSION`).
#[macro_export]
macro_rules! plugin {
    (
        name: $name:expr,
        tools: [ $( $($tool:ident)::+ ),* $(,)? ]
        $(, init: $($init:ident)::+ )?
        $(, shutdown: $($shutdown:ident)::+ )?
        $(,)?
    ) => {
        fn __quiver_plugin() -> &'static $crate::typed::Plugin {
            static PLUGIN: ::std::sync::OnceLock<$crate::typed::Plugin> = ::std::sync::OnceLock::new();
            PLUGIN.get_or_init(|| {
                $crate::typed::Plugin::new($name, ::core::env!("CARGO_PKG_VERSION"))
                    $( .tool($($tool)::+ :: __quiver_tool()) )*
                    $( .init($($init)::+) )?
                    $( .on_shutdown($($shutdown)::+) )?
            })
        }

        fn __quiver_plugin_manifest_typed() -> $crate::PluginManifest {
            __quiver_plugin().manifest()
        }

        fn __quiver_plugin_init_typed(
            config: $crate::serde_json::Value,
        ) -> ::core::result::Result<(), $crate::ToolError> {
            __quiver_plugin().run_init(config)
        }

        fn __quiver_plugin_call_typed(
            tool: &str,
            arguments: $crate::serde_json::Value,
        ) -> ::core::result::Result<$crate::serde_json::Value, $crate::ToolError> {
            __quiver_plugin().call(tool, arguments)
        }

        fn __quiver_plugin_shutdown_typed() {
            __quiver_plugin().run_shutdown()
        }

        $crate::export_plugin!(
            __quiver_plugin_manifest_typed,
            __quiver_plugin_call_typed,
            init = __quiver_plugin_init_typed,
            shutdown = __quiver_plugin_shutdown_typed,
        );
    };
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// Arguments of a test tool.
    #[derive(serde::Deserialize, JsonSchema)]
    struct Greet {
        /// Who to greet.
        name: String,
        /// How often.
        #[serde(default)]
        times: Option<u8>,
    }

    /// The greeting.
    #[derive(Serialize, JsonSchema)]
    struct Greeting {
        text: String,
    }

    fn greet(args: Greet) -> Result<Greeting, ToolError> {
        Ok(Greeting {
            text: format!("hi {}", args.name).repeat(usize::from(args.times.unwrap_or(1))),
        })
    }

    #[test]
    fn schemas_are_derived_and_closed() {
        let tool = TypedTool::new("greet", "Greets.", greet);
        let schema = &tool.manifest().input_schema;
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["name"]));
        assert_eq!(schema["properties"]["name"]["description"], "Who to greet.");
        assert!(schema.get("title").is_none() && schema.get("$schema").is_none());
        let output = tool.manifest().output_schema.as_ref().unwrap();
        assert_eq!(output["properties"]["text"]["type"], "string");
        assert!(output_schema::<String>().is_none());
        assert!(output_schema::<Value>().is_none());
    }

    #[test]
    fn bad_arguments_name_the_field() {
        let tool = TypedTool::new("greet", "Greets.", greet);
        assert_eq!(tool.call(json!({"name": "x"})).unwrap()["text"], "hi x");
        let missing = tool.call(json!({})).unwrap_err();
        assert_eq!(missing.code(), "invalid_argument");
        assert_eq!(missing.data().unwrap()["field"], "name");
        let wrong = tool.call(json!({"name": "x", "times": "two"})).unwrap_err();
        assert_eq!(wrong.data().unwrap()["field"], "times", "{wrong}");
    }

    #[test]
    fn a_plugin_routes_calls_and_runs_its_hooks() {
        #[derive(serde::Deserialize, JsonSchema)]
        struct Config {
            #[serde(default)]
            greeting: Option<String>,
        }
        let plugin = Plugin::new("p", "1")
            .tool(TypedTool::new("greet", "Greets.", greet))
            .init(|config: Config| match config.greeting.as_deref() {
                Some("") => Err(ToolError::failed("empty greeting")),
                _ => Ok(()),
            });
        let manifest = plugin.manifest();
        assert_eq!(manifest.tools.len(), 1);
        assert_eq!(
            manifest.config_schema.unwrap()["additionalProperties"],
            false
        );
        assert!(plugin.run_init(Value::Null).is_ok());
        assert!(plugin.run_init(json!({"greeting": ""})).is_err());
        assert_eq!(
            plugin.run_init(json!({"greeting": 3})).unwrap_err().code(),
            "invalid_config"
        );
        assert_eq!(
            plugin.call("nope", json!({})).unwrap_err().code(),
            "unknown_tool"
        );
        plugin.run_shutdown();
    }
}
