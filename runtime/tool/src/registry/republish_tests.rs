//! The incremental publish ([`republish`]) against a full build of the same
//! state, over random sequences of changes with every kind of name
//! conflict: what a source's change publishes must not depend on whether
//! the registry took the fast path.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;

use super::*;

const SOURCES: usize = 6;

fn source(index: usize) -> ToolSource {
    match index {
        0 => ToolSource::Core,
        1 => ToolSource::Plugin("p".into()),
        2 => ToolSource::Plugin("q".into()),
        3 => ToolSource::Mcp("a".into()),
        4 => ToolSource::Mcp("a_b".into()),
        _ => ToolSource::Mcp("b".into()),
    }
}

/// Names that collide in every way the registry resolves: plain names two
/// plugins want, an MCP name a plugin takes (`mcp_a_x`), two servers'
/// tools with one natural name (`a` + `b_x`, `a_b` + `x`), bridge names,
/// invalid names and (by repetition) duplicates.
const NAMES: [&str; 7] = ["x", "y", "b_x", "mcp_a_x", "tool_call", "bad name", "z"];

#[derive(Debug, Clone)]
enum Change {
    Set(usize, Vec<(usize, u8)>),
    Remove(usize),
    Describe(usize, Option<u8>),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => (0..SOURCES, proptest::collection::vec((0..NAMES.len(), 0..2u8), 0..5))
            .prop_map(|(s, names)| Change::Set(s, names)),
        1 => (0..SOURCES).prop_map(Change::Remove),
        1 => (0..SOURCES, proptest::option::of(0..2u8)).prop_map(|(s, d)| Change::Describe(s, d)),
    ]
}

fn apply(registry: &ToolRegistry, change: &Change) {
    match change {
        Change::Set(s, names) => {
            let specs = names
                .iter()
                .map(|&(n, version)| {
                    ToolSpec::new(
                        NAMES[n],
                        format!("{} v{version}", NAMES[n]),
                        json!({"type": "object"}),
                    )
                })
                .collect();
            registry.set_source_tools(source(*s), specs);
        }
        Change::Remove(s) => {
            registry.remove_source(&source(*s));
        }
        Change::Describe(s, text) => {
            registry.set_descriptions([(
                source(*s),
                text.map(|t| format!("about {t}")).unwrap_or_default(),
            )]);
        }
    }
}

type GroupView = (
    ToolSource,
    Option<String>,
    Vec<(String, String, u32, String)>,
);

/// Everything a reader of a snapshot can observe.
fn view(snapshot: &RegistrySnapshot) -> (Vec<GroupView>, Vec<RefusedTool>, Vec<RenamedTool>) {
    let groups = snapshot
        .groups()
        .iter()
        .map(|g| {
            let tools = g
                .tools()
                .iter()
                .map(|t| {
                    (
                        t.name().to_owned(),
                        t.original_name().to_owned(),
                        t.position(),
                        t.spec().description.clone(),
                    )
                })
                .collect();
            (
                g.source().clone(),
                g.description().map(|d| d.to_string()),
                tools,
            )
        })
        .collect();
    (
        groups,
        snapshot.refused().to_vec(),
        snapshot.renamed().to_vec(),
    )
}

/// What a full build makes of the registry's current state.
fn rebuilt(registry: &ToolRegistry) -> RegistrySnapshot {
    let state = registry.state.lock().unwrap();
    let mut fresh = RegistryState {
        registry_id: state.registry_id,
        sources: state.sources.clone(),
        built: HashMap::new(),
        descriptions: state.descriptions.clone(),
        generation: state.generation,
    };
    build_snapshot(&mut fresh)
}

fn check(registry: &ToolRegistry) {
    let snapshot = registry.snapshot();
    let full = rebuilt(registry);
    assert_eq!(view(&snapshot), view(&full));
    assert_eq!(snapshot.len(), full.len());
    let mut names: Vec<&String> = snapshot.by_name.keys().collect();
    names.sort();
    let mut expected: Vec<&String> = full.by_name.keys().collect();
    expected.sort();
    assert_eq!(names, expected);
    for tool in full.tools() {
        let found = snapshot
            .get(tool.name())
            .expect("every tool is found by name");
        assert_eq!(found.source(), tool.source());
        assert_eq!(found.original_name(), tool.original_name());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_publish_equals_a_full_build(changes in proptest::collection::vec(change(), 1..24)) {
        let registry = ToolRegistry::new();
        for change in &changes {
            apply(&registry, change);
            check(&registry);
        }
    }
}

#[test]
fn a_change_to_one_source_shares_every_other_group() {
    let registry = ToolRegistry::new();
    let spec = |name: &str| ToolSpec::new(name, "a tool", json!({"type": "object"}));
    registry.set_many(vec![
        (ToolSource::Mcp("a".into()), vec![spec("x"), spec("y")]),
        (ToolSource::Mcp("b".into()), vec![spec("x")]),
        (ToolSource::Plugin("p".into()), vec![spec("z")]),
    ]);
    let before = registry.snapshot();
    registry.set_source_tools(ToolSource::Mcp("b".into()), vec![spec("x"), spec("w")]);
    let after = registry.snapshot();
    let group =
        |snapshot: &RegistrySnapshot, source: ToolSource| snapshot.group(&source).unwrap().clone();
    for unchanged in [ToolSource::Mcp("a".into()), ToolSource::Plugin("p".into())] {
        assert!(Arc::ptr_eq(
            &group(&before, unchanged.clone()),
            &group(&after, unchanged)
        ));
    }
    // The changed server's unchanged tool is the same tool too.
    assert!(Arc::ptr_eq(
        before.get("mcp_b_x").unwrap(),
        after.get("mcp_b_x").unwrap()
    ));
    assert!(after.get("mcp_b_w").is_some());
    assert_eq!(after.len(), 5);
}
