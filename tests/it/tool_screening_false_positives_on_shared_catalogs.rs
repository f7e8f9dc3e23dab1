//! Description screening over every tool of `../shared/catalogs` (public
//! tool definitions written by others, none of them an attack): the number
//! of flagged tools is the documented false-positive count of
//! docs/TOOL_INTEGRITY.md, and each flagged tool is listed there.

use quiver_catalog::catalog_file;
use quiver_tool::integrity::screen;
use quiver_tool::tool::ToolSpec;

/// Flagged tools, as docs/TOOL_INTEGRITY.md lists them.
const DOCUMENTED_FLAGGED: usize = 8;

#[test]
fn screening_flags_few_of_the_reference_catalogs() {
    let mut files: Vec<_> = std::fs::read_dir(quiver_tests::shared_catalogs())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    let mut tools = 0usize;
    let mut flagged = Vec::new();
    for file in &files {
        let document = catalog_file::read(file).unwrap();
        for server in &document.servers {
            for tool in &server.tools {
                tools += 1;
                let spec = ToolSpec::new(&tool.name, &tool.description, tool.input_schema.clone());
                let flags = screen(&spec);
                if !flags.is_empty() {
                    let codes: Vec<String> = flags
                        .iter()
                        .map(|f| format!("{} at {}", f.code, f.at))
                        .collect();
                    flagged.push(format!(
                        "{} / {} / {}: {}",
                        file.file_name().unwrap().to_string_lossy(),
                        server.name,
                        tool.name,
                        codes.join("; ")
                    ));
                }
            }
        }
    }
    let listing = flagged.join("\n");
    println!("{tools} tools, {} flagged:\n{listing}", flagged.len());
    assert!(tools > 14_000, "{tools}");
    assert_eq!(flagged.len(), DOCUMENTED_FLAGGED, "{listing}");
    // Well under 1%.
    assert!(flagged.len() * 1000 < tools, "{} of {tools}", flagged.len());
    let doc =
        std::fs::read_to_string(quiver_tests::workspace_root().join("docs/TOOL_INTEGRITY.md"))
            .unwrap();
    for entry in &flagged {
        let name = entry.split(':').next().unwrap();
        assert!(
            doc.contains(name),
            "docs/TOOL_INTEGRITY.md does not list {name}"
        );
    }
}
