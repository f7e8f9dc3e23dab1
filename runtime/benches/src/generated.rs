//! The generated catalog: `servers` x `tools_per_server` tools with
//! realistic names, descriptions and schemas recombined from fixed word
//! lists by a seeded generator, so that every run (the criterion benches,
//! the `report` binary, the reference's driver reading the file the report
//! writes) sees the same 100,000 tools.

use quiver_catalog::catalog_file::{CatalogDocument, CatalogServer, CatalogTool};
use serde_json::{Map, Value, json};

/// A 64-bit linear congruential generator (Knuth's MMIX constants).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }
}

const PREFIXES: [&str; 20] = [
    "acme", "nimbus", "orbit", "atlas", "vertex", "zenith", "quartz", "harbor", "summit",
    "pioneer", "cobalt", "ember", "falcon", "granite", "helix", "lumen", "maple", "nova", "onyx",
    "prism",
];
const DOMAINS: [&str; 25] = [
    "billing",
    "crm",
    "tickets",
    "git",
    "deploy",
    "chat",
    "docs",
    "storage",
    "analytics",
    "monitoring",
    "payments",
    "shop",
    "marketing",
    "calendar",
    "tasks",
    "hr",
    "search",
    "mail",
    "notes",
    "forms",
    "survey",
    "wiki",
    "ci",
    "auth",
    "maps",
];
const VERBS: [&str; 20] = [
    "get",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "archive",
    "restore",
    "export",
    "import",
    "sync",
    "approve",
    "assign",
    "close",
    "merge",
    "publish",
    "schedule",
    "cancel",
    "validate",
    "summarize",
];
const NOUNS: [&str; 30] = [
    "invoice",
    "customer",
    "order",
    "ticket",
    "project",
    "repository",
    "branch",
    "deployment",
    "user",
    "team",
    "message",
    "channel",
    "document",
    "folder",
    "file",
    "report",
    "dashboard",
    "alert",
    "incident",
    "webhook",
    "subscription",
    "payment",
    "product",
    "campaign",
    "contact",
    "event",
    "calendar",
    "task",
    "comment",
    "label",
];
const QUALIFIERS: [&str; 8] = [
    "",
    "",
    "",
    "_by_id",
    "_details",
    "_history",
    "_settings",
    "_batch",
];
const FIELDS: [&str; 25] = [
    "id",
    "name",
    "status",
    "created_at",
    "updated_at",
    "owner",
    "email",
    "title",
    "amount",
    "currency",
    "due_date",
    "priority",
    "tags",
    "url",
    "description",
    "region",
    "state",
    "limit",
    "cursor",
    "sort",
    "query",
    "assignee",
    "start_date",
    "end_date",
    "version",
];
const EXTRA_SENTENCES: [&str; 8] = [
    "Results are paginated; pass the returned cursor to fetch the next page.",
    "Requires an API token with write access to the workspace.",
    "The call is idempotent and safe to retry on timeouts.",
    "Archived records are excluded unless explicitly requested.",
    "Rate limited to 100 requests per minute per token.",
    "Timestamps are ISO 8601 strings in UTC.",
    "Use this before making bulk changes to confirm the current state.",
    "Returns an error when the caller lacks permission on the parent resource.",
];

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_ascii_uppercase().to_string() + chars.as_str()
    })
}

fn generated_tool(rng: &mut Lcg, domain: &str, verb: &str, noun: &str) -> CatalogTool {
    let qualifier = rng.pick(&QUALIFIERS);
    let name = format!("{verb}_{noun}{qualifier}");
    let mut description = format!(
        "{} {} {} in the {domain} workspace{}.",
        capitalised(verb),
        if verb == "list" || verb == "search" || verb == "export" {
            "the"
        } else {
            "a"
        },
        noun.replace('_', " "),
        match qualifier {
            "_by_id" => " by its identifier",
            "_details" => ", with every field expanded",
            "_history" => " and its change history",
            "_settings" => " settings",
            "_batch" => " for many records at once",
            _ => "",
        }
    );
    // Three distinct fields: each step is 1..=12 and both add up to < 25.
    let first = rng.below(FIELDS.len());
    let second = (first + 1 + rng.below(12)) % FIELDS.len();
    let third = (second + 1 + rng.below(12)) % FIELDS.len();
    let fields = [FIELDS[first], FIELDS[second], FIELDS[third]];
    description.push_str(&format!(
        " Returns the {noun} with its {}, {} and {}.",
        fields[0], fields[1], fields[2]
    ));
    for _ in 0..rng.below(3) {
        description.push(' ');
        description.push_str(rng.pick(&EXTRA_SENTENCES));
    }

    let mut properties = Map::new();
    let mut required = Vec::new();
    for _ in 0..1 + rng.below(8) {
        let field = rng.pick(&FIELDS);
        if properties.contains_key(field) {
            continue;
        }
        let property = match field {
            "status" | "state" | "priority" => json!({
                "type": "string",
                "description": format!("Only {noun}s with this {field}."),
                "enum": ["open", "pending", "closed", "archived"],
            }),
            "limit" => json!({
                "type": "integer",
                "description": "Maximum number of results (1-100).",
                "minimum": 1,
                "maximum": 100,
                "default": 25,
            }),
            "tags" => json!({
                "type": "array",
                "description": format!("Tags attached to the {noun}."),
                "items": {"type": "string"},
            }),
            "amount" => json!({
                "type": "number",
                "description": format!("The {noun} amount in minor units."),
            }),
            _ => json!({
                "type": "string",
                "description": format!("The {} of the {noun}.", field.replace('_', " ")),
            }),
        };
        if rng.below(3) == 0 {
            required.push(Value::String(field.to_owned()));
        }
        properties.insert(field.to_owned(), property);
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    CatalogTool {
        name,
        description,
        input_schema: Value::Object(schema).into(),
        api_call: None,
        title: None,
        annotations: None,
    }
}

/// `servers` x `tools_per_server` tools (at most 500 x 600) with names,
/// descriptions and schemas recombined from fixed word lists; the same
/// arguments always give the same catalog.
pub fn generate_catalog(servers: usize, tools_per_server: usize) -> CatalogDocument {
    let combos = VERBS.len() * NOUNS.len();
    assert!(servers <= PREFIXES.len() * DOMAINS.len() && tools_per_server <= combos);
    let mut rng = Lcg(0x5155_4956_4552); // "QUIVER"
    let servers = (0..servers)
        .map(|s| {
            let domain = DOMAINS[s % DOMAINS.len()];
            let prefix = PREFIXES[s / DOMAINS.len()];
            let offset = rng.below(combos);
            let tools = (0..tools_per_server)
                .map(|i| {
                    // 7 is coprime with 600, so the (verb, noun) pairs are distinct.
                    let combo = (offset + i * 7) % combos;
                    let (verb, noun) = (VERBS[combo % VERBS.len()], NOUNS[combo / VERBS.len()]);
                    generated_tool(&mut rng, domain, verb, noun)
                })
                .collect();
            CatalogServer {
                name: format!("{prefix}-{domain}"),
                description: format!("{} {domain} service", capitalised(prefix)),
                title: None,
                tools,
            }
        })
        .collect();
    CatalogDocument { servers }
}

/// A `tools`-tool server's `tools/list` answer as rmcp reads it off the
/// wire: the generated catalog's first server (at most 600 tools).
pub fn mcp_listing(tools: usize) -> Vec<rmcp::model::Tool> {
    generate_catalog(1, tools)
        .servers
        .into_iter()
        .flat_map(|server| server.tools)
        .filter_map(|tool| {
            serde_json::from_value(json!({
                "name": tool.name,
                "description": tool.description,
                "inputSchema": tool.input_schema,
            }))
            .ok()
        })
        .collect()
}
