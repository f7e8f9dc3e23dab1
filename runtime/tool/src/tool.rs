//! The tool model: what a tool is, where it comes from, and the facts about
//! it that every assembly needs (computed once, when the tool is built).

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::schema::Schema;

/// Where a tool comes from. Core tools are never deferred; plugin and MCP
/// tools are deferrable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolSource {
    /// Built into the runtime.
    Core,
    /// Offered by the `.so` plugin with this name.
    Plugin(String),
    /// Offered by the MCP server with this configured name.
    Mcp(String),
}

impl ToolSource {
    /// `core`, `plugin` or `mcp`.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolSource::Core => "core",
            ToolSource::Plugin(_) => "plugin",
            ToolSource::Mcp(_) => "mcp",
        }
    }

    /// The plugin or server name; `None` for core tools.
    pub fn group(&self) -> Option<&str> {
        match self {
            ToolSource::Core => None,
            ToolSource::Plugin(name) | ToolSource::Mcp(name) => Some(name),
        }
    }

    /// The toolset a session must be granted to see this source's tools:
    /// `core`, `plugin-NAME` or `mcp-SERVER`.
    pub fn toolset(&self) -> String {
        match self {
            ToolSource::Core => "core".to_owned(),
            ToolSource::Plugin(name) => format!("plugin-{name}"),
            ToolSource::Mcp(name) => format!("mcp-{name}"),
        }
    }

    /// Whether tools from this source may be deferred behind the bridge.
    pub fn is_deferrable(&self) -> bool {
        !matches!(self, ToolSource::Core)
    }
}

/// A tool as a source declares it, before the registry names it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the source uses for the tool.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON Schema of the arguments (an object schema), as compact text
    /// (see [`Schema`]).
    pub input_schema: Schema,
    /// The underlying call this tool makes, when its source says (a
    /// catalog's `api_call`). Tools of one source that make the same call
    /// are entries for one operation: enhanced search returns it once.
    pub operation: Option<String>,
    /// What else the source says about the tool (title, behaviour hints,
    /// output schema, `_meta`); `None` when it says nothing, which keeps a
    /// plain tool one pointer larger and no more.
    pub metadata: Option<Box<ToolMetadata>>,
}

/// What a source may say about a tool besides its name, description and
/// arguments: MCP's `title`, `annotations`, `outputSchema` and `_meta`
/// (plugins declare the same in their manifest).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolMetadata {
    /// A human-readable name for display (MCP `title`, else
    /// `annotations.title`).
    pub title: Option<String>,
    /// The source's claims about the tool's behaviour.
    pub annotations: ToolAnnotations,
    /// JSON Schema of the tool's structured result (MCP `outputSchema`).
    pub output_schema: Option<Value>,
    /// Source-specific metadata passed through untouched (MCP `_meta`).
    pub meta: Option<Map<String, Value>>,
}

impl ToolMetadata {
    /// Whether it says nothing at all.
    pub fn is_empty(&self) -> bool {
        *self == ToolMetadata::default()
    }

    /// A tool's display title as MCP gives it: the tool's own `title`,
    /// else its annotations' `title`; a blank one is none.
    pub fn title_from(own: Option<&str>, annotated: Option<&str>) -> Option<String> {
        own.or(annotated)
            .filter(|title| !title.trim().is_empty())
            .map(str::to_owned)
    }
}

/// Behaviour hints as MCP defines them (`readOnlyHint`, `destructiveHint`,
/// `idempotentHint`, `openWorldHint`). They are the source's claim, not a
/// guarantee; `None` means the source did not say (MCP's own defaults then
/// apply: not read-only, destructive, not idempotent, open world).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// The tool does not modify its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates (meaningful when not
    /// read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it again with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool talks to an open world of external entities (the web, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// A behaviour hint as guardrail and approval rules name it
/// (`annotation:destructive`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// `read_only`: the tool does not modify its environment.
    ReadOnly,
    /// `destructive`: the tool may perform destructive updates.
    Destructive,
    /// `idempotent`: repeating a call has no further effect.
    Idempotent,
    /// `open_world`: the tool reaches an open world of external entities.
    OpenWorld,
}

impl Hint {
    /// The names rules use, in order.
    pub const NAMES: [&'static str; 4] = ["read_only", "destructive", "idempotent", "open_world"];

    /// The hint called `name` (one of [`Hint::NAMES`]).
    pub fn parse(name: &str) -> Option<Hint> {
        match name {
            "read_only" => Some(Hint::ReadOnly),
            "destructive" => Some(Hint::Destructive),
            "idempotent" => Some(Hint::Idempotent),
            "open_world" => Some(Hint::OpenWorld),
            _ => None,
        }
    }
}

/// What a rule written `annotation:NAME` matches, e.g.
/// `annotation:destructive`; `None` for any other pattern. An unknown
/// `NAME` is an error naming the allowed ones.
pub fn annotation_pattern(pattern: &str) -> Option<Result<Hint, String>> {
    let name = pattern.strip_prefix("annotation:")?;
    Some(Hint::parse(name).ok_or_else(|| {
        format!(
            "`{pattern}` names no behaviour hint; use annotation:{}",
            Hint::NAMES.join(", annotation:")
        )
    }))
}

impl ToolAnnotations {
    /// Whether the tool has `hint`, reading an unset hint as MCP's
    /// default: not read-only, destructive (unless read-only), not
    /// idempotent (unless read-only), open world. A tool that says nothing
    /// is thus taken for the riskiest kind, so rules such as
    /// `approval.require: ["annotation:destructive"]` fail safe.
    pub fn has(&self, hint: Hint) -> bool {
        let read_only = self.read_only_hint.unwrap_or(false);
        match hint {
            Hint::ReadOnly => read_only,
            Hint::Destructive => !read_only && self.destructive_hint.unwrap_or(true),
            Hint::Idempotent => read_only || self.idempotent_hint.unwrap_or(false),
            Hint::OpenWorld => self.open_world_hint.unwrap_or(true),
        }
    }

    /// Whether no hint is given.
    pub fn is_empty(&self) -> bool {
        *self == ToolAnnotations::default()
    }

    /// The annotations as MCP's wire object (only the hints that are set).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl ToolSpec {
    /// A spec from its three parts.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: impl Into<Schema>,
    ) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: input_schema.into(),
            operation: None,
            metadata: None,
        }
    }

    /// The same spec with `metadata` (dropped when it says nothing).
    pub fn with_metadata(mut self, metadata: ToolMetadata) -> Self {
        self.metadata = (!metadata.is_empty()).then(|| Box::new(metadata));
        self
    }

    /// The same spec, declaring the underlying call it makes (see
    /// [`ToolSpec::operation`]).
    pub fn with_operation(mut self, operation: Option<String>) -> Self {
        self.operation = operation.filter(|o| !o.trim().is_empty());
        self
    }
}

/// Longest short description shown in a full listing line, in characters.
pub const SHORT_DESCRIPTION_CHARS: usize = 100;

/// A registered tool: its exposed name, its source and what the model is told.
///
/// A `Tool` is immutable; the registry builds a new one when a source changes,
/// so the derived facts below can never go stale. It shares its source's
/// [`ToolSpec`] instead of copying the description and schema.
#[derive(Debug)]
pub struct Tool {
    name: String,
    spec: Arc<ToolSpec>,
    source: ToolSource,
    short_description: String,
    name_chars: usize,
    short_description_chars: usize,
    definition_chars: usize,
    position: u32,
}

impl Tool {
    /// Builds a tool exposed as `name` from a copy of a source's spec.
    pub fn new(name: String, source: ToolSource, spec: &ToolSpec) -> Tool {
        Tool::from_shared(name, source, Arc::new(spec.clone()))
    }

    /// Builds a tool exposed as `name` that shares `spec`.
    pub fn from_shared(name: String, source: ToolSource, spec: Arc<ToolSpec>) -> Tool {
        // A tool without a description is listed by its title, when it has
        // one: a line that says something, at no cost to any other.
        let short_description = match spec.metadata.as_ref().and_then(|m| m.title.as_deref()) {
            Some(title) if spec.description.trim().is_empty() => short_description(title),
            _ => short_description(&spec.description),
        };
        let definition_chars = definition_chars(&name, &spec.description, &spec.input_schema);
        Tool {
            name_chars: name.chars().count(),
            short_description_chars: short_description.chars().count(),
            name,
            spec,
            source,
            short_description,
            definition_chars,
            position: 0,
        }
    }

    /// The same tool, at `position` in its source's list of tools.
    pub fn at_position(mut self, position: u32) -> Tool {
        self.position = position;
        self
    }

    /// Where the tool is in its source's list of tools (0 for the first;
    /// the registry sets it, a tool built alone is at 0).
    pub fn position(&self) -> u32 {
        self.position
    }

    /// The spec this tool was built from (shared with the registry).
    pub fn spec(&self) -> &Arc<ToolSpec> {
        &self.spec
    }

    /// The name the model sees and calls (for MCP tools `mcp_<server>_<tool>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name the source itself uses.
    pub fn original_name(&self) -> &str {
        &self.spec.name
    }

    /// The full description, never cut.
    pub fn description(&self) -> &str {
        &self.spec.description
    }

    /// The JSON Schema of the arguments (its tree: [`Schema::value`]).
    pub fn input_schema(&self) -> &Schema {
        &self.spec.input_schema
    }

    /// The underlying call the tool makes, when its source declares one.
    pub fn operation(&self) -> Option<&str> {
        self.spec.operation.as_deref()
    }

    /// What else the source says about the tool, when it says anything.
    pub fn metadata(&self) -> Option<&ToolMetadata> {
        self.spec.metadata.as_deref()
    }

    /// Whether the tool has `hint`, by its source's annotations (an
    /// unset hint reads as MCP's default, see [`ToolAnnotations::has`]).
    pub fn has_hint(&self, hint: Hint) -> bool {
        self.metadata()
            .map(|m| m.annotations)
            .unwrap_or_default()
            .has(hint)
    }

    /// The display title, when the source gives one.
    pub fn title(&self) -> Option<&str> {
        self.metadata()?.title.as_deref()
    }

    /// The source's behaviour hints (all `None` when it gives none).
    pub fn annotations(&self) -> ToolAnnotations {
        self.metadata().map(|m| m.annotations).unwrap_or_default()
    }

    /// The JSON Schema of the structured result, when declared.
    pub fn output_schema(&self) -> Option<&Value> {
        self.metadata()?.output_schema.as_ref()
    }

    /// Where the tool comes from.
    pub fn source(&self) -> &ToolSource {
        &self.source
    }

    /// The first sentence or line of the description, at most
    /// [`SHORT_DESCRIPTION_CHARS`] characters; used in listings.
    pub fn short_description(&self) -> &str {
        &self.short_description
    }

    /// Characters in [`Tool::name`].
    pub fn name_chars(&self) -> usize {
        self.name_chars
    }

    /// Characters in [`Tool::short_description`].
    pub fn short_description_chars(&self) -> usize {
        self.short_description_chars
    }

    /// Characters of this tool's function definition as sent to the model.
    pub fn definition_chars(&self) -> usize {
        self.definition_chars
    }

    /// Names of the top-level properties of the input schema (parsed for
    /// the call, see [`Schema::parsed`]).
    pub fn parameter_names(&self) -> Vec<String> {
        self.spec
            .input_schema
            .parsed()
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| props.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Names listed in the schema's `required` array.
    pub fn required_parameters(&self) -> impl Iterator<Item = &str> {
        self.spec.input_schema.required()
    }

    /// The OpenAI-style function definition the model is sent.
    pub fn definition(&self) -> Value {
        function_definition(
            &self.name,
            &self.spec.description,
            self.spec.input_schema.value(),
        )
    }
}

/// An OpenAI-style function definition:
/// `{"type": "function", "function": {"name", "description", "parameters"}}`.
pub fn function_definition(name: &str, description: &str, parameters: &Value) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), Value::String(name.to_owned()));
    function.insert("description".into(), Value::String(description.to_owned()));
    function.insert("parameters".into(), parameters.clone());
    let mut definition = Map::new();
    definition.insert("type".into(), Value::String("function".into()));
    definition.insert("function".into(), Value::Object(function));
    Value::Object(definition)
}

/// The characters of [`function_definition`]'s JSON text, counted
/// without building it: building it copies the whole schema, and a reload
/// builds a tool for every changed spec. The schema's part is the length
/// of its text, which is what the serialiser writes.
fn definition_chars(name: &str, description: &str, parameters: &Schema) -> usize {
    use crate::tokens::json_str_chars;
    // Everything but the three values; key order does not change a length.
    const FRAME: &str = r#"{"type":"function","function":{"name":,"description":,"parameters":}}"#;
    FRAME.len() + json_str_chars(name) + json_str_chars(description) + parameters.chars()
}

/// Words that end with a period without ending a sentence (compared
/// lowercased, without their last period and any opening bracket or quote).
pub const ABBREVIATIONS: &[&str] = &[
    "a.k.a", "approx", "ca", "cf", "dr", "e.g", "eg", "esp", "etc", "fig", "i.e", "ie", "incl",
    "jr", "mr", "mrs", "ms", "mt", "no", "prof", "sr", "st", "u.s", "viz", "vs",
];

/// Where the first sentence of `text` ends (just after its `.`, `!` or
/// `?`): the first such mark followed by whitespace or the end of the
/// text, unless it is the period of an abbreviation ([`ABBREVIATIONS`]) or
/// of a single-letter initial. A period inside a word (`v1.2`,
/// `api.github.com`) is followed by no whitespace, so it never ends one.
pub fn sentence_end(text: &str) -> Option<usize> {
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        if !chars.peek().is_none_or(|(_, next)| next.is_whitespace()) {
            continue;
        }
        if c == '.' {
            let word_start = text[..at].rfind(char::is_whitespace).map_or(0, |i| i + 1);
            let word = text[word_start..at]
                .trim_start_matches(|c: char| "([{\"'`".contains(c))
                .to_lowercase();
            let initial = word.chars().count() == 1 && word.chars().all(char::is_alphabetic);
            if initial || ABBREVIATIONS.binary_search(&word.as_str()).is_ok() {
                continue;
            }
        }
        return Some(at + c.len_utf8());
    }
    None
}

/// The listing's short form of a description: its first non-empty line,
/// up to the end of its first sentence ([`sentence_end`]); longer than
/// [`SHORT_DESCRIPTION_CHARS`] characters, it is cut at the last word
/// boundary that fits and ends with `…` (the whole result at most that
/// many characters).
pub fn short_description(description: &str) -> String {
    let first_line = description
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let sentence = match sentence_end(first_line) {
        Some(end) => &first_line[..end],
        None => first_line,
    };
    if sentence.chars().count() <= SHORT_DESCRIPTION_CHARS {
        return sentence.to_owned();
    }
    let room = SHORT_DESCRIPTION_CHARS - 1;
    let limit = sentence
        .char_indices()
        .nth(room)
        .map_or(sentence.len(), |(i, _)| i);
    // At a word boundary: before the word the limit falls in, unless that
    // would drop more than half of the room (one very long word).
    let boundary = if sentence[limit..].starts_with(char::is_whitespace) {
        limit
    } else {
        match sentence[..limit].rfind(char::is_whitespace) {
            Some(space) if sentence[..space].chars().count() >= room / 2 => space,
            _ => limit,
        }
    };
    let mut cut = sentence[..boundary]
        .trim_end_matches(|c: char| c.is_whitespace() || ",;:-–(".contains(c))
        .to_owned();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_counts_the_characters_of_its_definition_as_sent() {
        let schema = json!({
            "type": "object",
            "properties": {
                "städte": {"type": "array", "items": {"type": "string"}, "description": "Orte \"wie\" 東京\n"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 1.5e3}
            },
            "required": ["städte"]
        });
        let spec = ToolSpec::new(
            "wetter_abrufen",
            "Holt das Wetter für Städte — schnell.",
            schema,
        );
        let tool = Tool::new(
            "mcp_wetter_abrufen".into(),
            ToolSource::Mcp("wetter".into()),
            &spec,
        );
        let sent =
            function_definition(tool.name(), tool.description(), tool.input_schema().value());
        assert_eq!(tool.definition_chars, sent.to_string().chars().count());
    }

    #[test]
    fn short_description_takes_first_sentence_of_first_line() {
        assert_eq!(
            short_description("\n  Get a file. Then more.\nSecond line"),
            "Get a file."
        );
        assert_eq!(short_description(""), "");
        assert_eq!(short_description("No period here"), "No period here");
    }

    #[test]
    fn short_description_is_cut_with_ellipsis() {
        let long = "word ".repeat(60);
        let short = short_description(&long);
        assert!(short.chars().count() <= SHORT_DESCRIPTION_CHARS);
        assert!(short.ends_with("word…"), "{short}");
        let one_word = "x".repeat(300);
        assert_eq!(
            short_description(&one_word).chars().count(),
            SHORT_DESCRIPTION_CHARS
        );
    }

    #[test]
    fn a_sentence_ends_at_a_real_sentence_end() {
        for (text, short) in [
            (
                "Contact Dr. Smith for access. More.",
                "Contact Dr. Smith for access.",
            ),
            (
                "Create an issue (e.g. a bug). Then more.",
                "Create an issue (e.g. a bug).",
            ),
            (
                "Compare this PR vs. main. More.",
                "Compare this PR vs. main.",
            ),
            ("List repos! Supports pagination.", "List repos!"),
            ("Is it up? Checks the host.", "Is it up?"),
            (
                "Calls api.github.com with v1.2.3 of the API. More.",
                "Calls api.github.com with v1.2.3 of the API.",
            ),
            (
                "Files, dirs, etc. are listed. More.",
                "Files, dirs, etc. are listed.",
            ),
            ("By J. R. Tolkien. More.", "By J. R. Tolkien."),
        ] {
            assert_eq!(short_description(text), short, "{text}");
        }
    }

    #[test]
    fn a_long_sentence_is_cut_at_a_word_boundary() {
        let text = format!("{} tail", "abcdefgh ".repeat(12));
        let short = short_description(&text);
        assert!(short.chars().count() <= SHORT_DESCRIPTION_CHARS, "{short}");
        assert!(short.ends_with("abcdefgh…"), "{short}");
        let one_word = "x".repeat(300);
        assert_eq!(
            short_description(&one_word).chars().count(),
            SHORT_DESCRIPTION_CHARS
        );
    }

    #[test]
    fn abbreviations_are_sorted_for_binary_search() {
        assert!(ABBREVIATIONS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn tool_counts_characters_of_its_definition() {
        let spec = ToolSpec::new("échо", "d", json!({"type": "object"}));
        let tool = Tool::new("échо".into(), ToolSource::Plugin("p".into()), &spec);
        assert_eq!(
            tool.definition_chars(),
            tool.definition().to_string().chars().count()
        );
        assert_eq!(tool.name_chars(), 4);
    }

    #[test]
    fn parameter_and_required_names_come_from_the_schema() {
        let spec = ToolSpec::new(
            "t",
            "",
            json!({"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"]}),
        );
        let tool = Tool::new("t".into(), ToolSource::Core, &spec);
        assert_eq!(tool.parameter_names(), ["a", "b"]);
        assert_eq!(tool.required_parameters().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn toolsets_and_kinds() {
        assert_eq!(ToolSource::Core.toolset(), "core");
        assert_eq!(ToolSource::Plugin("text".into()).toolset(), "plugin-text");
        assert_eq!(ToolSource::Mcp("github".into()).toolset(), "mcp-github");
        assert!(!ToolSource::Core.is_deferrable());
        assert!(ToolSource::Mcp("x".into()).is_deferrable());
    }
}
