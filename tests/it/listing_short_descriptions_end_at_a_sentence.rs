//! The listing's short descriptions (the `tool_search` description the
//! model reads) end at a real sentence end: not after an abbreviation
//! (`e.g.`, `Dr.`, `vs.`) nor inside a version or hostname, and `!` and
//! `?` end one; a long sentence is cut on a word boundary with `…` within
//! `SHORT_DESCRIPTION_CHARS` characters.

use quiver_tests::dispatch::fixture_with_shop;
use quiver_tool::tool::{SHORT_DESCRIPTION_CHARS, ToolSpec};
use serde_json::json;

#[tokio::test]
async fn the_listing_shows_whole_first_sentences() {
    let long = format!(
        "Search {} the end. More.",
        "everything everywhere ".repeat(8)
    );
    let specs = [
        (
            "contact",
            "Contact Dr. Smith about access. Second sentence.",
        ),
        (
            "create",
            "Create an issue (e.g. a bug report). Second sentence.",
        ),
        ("compare", "Compare this PR vs. its base. Second sentence."),
        ("list", "List repos! Supports pagination."),
        ("ping", "Is api.example.com v2.1 up? Checks it."),
        ("long", long.as_str()),
    ];
    let fixture = fixture_with_shop(
        specs
            .iter()
            .map(|(name, description)| {
                ToolSpec::new(*name, *description, json!({"type": "object"}))
            })
            .collect(),
    );
    let session = fixture.session("s", &["*"]);
    let assembly = session.assemble(&fixture.assembler, &fixture.registry.snapshot(), 200_000);
    let tools = assembly.tools();
    let search = tools
        .iter()
        .find(|t| t["function"]["name"] == "tool_search")
        .unwrap();
    let listing = search["function"]["description"].as_str().unwrap();
    for shown in [
        "Contact Dr. Smith about access.",
        "Create an issue (e.g. a bug report).",
        "Compare this PR vs. its base.",
        "List repos!",
        "Is api.example.com v2.1 up?",
    ] {
        assert!(listing.contains(shown), "{shown:?} not in {listing}");
    }
    assert!(!listing.contains("Second sentence") && !listing.contains("Supports pagination"));
    let line = listing.lines().find(|l| l.contains("everything")).unwrap();
    let short = &line[line.find("Search").unwrap()..];
    assert!(short.ends_with("everywhere…"), "{short}");
    assert!(short.chars().count() <= SHORT_DESCRIPTION_CHARS, "{short}");
}
