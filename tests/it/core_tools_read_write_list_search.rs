//! The file tools end to end through the dispatch chain: a file written
//! (with its directories created) is read back, paged, listed (ignored
//! entries marked, not entered) and found by search; errors are typed and
//! name the tool and the path; arguments outside a tool's schema never
//! reach it; the tools are core tools, sent eagerly, and the workspace of
//! a config file is relative to that file.

use quiver_tests::core_tools as core_tools_support;

use core_tools_support::env;
use quiver_core_tools::CoreToolSet;
use quiver_daemon::config::load_file;
use quiver_tool::tool::ToolSource;
use serde_json::{Value, json};

const CONFIG: &str =
    "core_tools:\n  workspace: ws\n  max_read_bytes: 1024\n  max_list_entries: 50\n";

#[tokio::test]
async fn a_written_file_is_read_listed_and_found() {
    let env = env(CONFIG).await;
    let text: String = (1..=200)
        .map(|i| format!("row {i:03} of the table\n"))
        .collect();
    let written = env
        .call(
            "write_file",
            json!({"path": "docs/notes/table.txt", "content": text, "create_dirs": true}),
        )
        .await
        .unwrap();
    assert_eq!(
        written,
        json!({"path": "docs/notes/table.txt", "bytes_written": text.len(), "created": true})
    );
    assert_eq!(
        std::fs::read_to_string(env.ws_path("docs/notes/table.txt")).unwrap(),
        text
    );

    // 21 bytes a line: 48 whole lines fit in 1024 bytes; then page on.
    let mut collected = String::new();
    let mut start = 1;
    let mut pages = 0;
    loop {
        let page = env
            .call(
                "read_file",
                json!({"path": "docs/notes/table.txt", "start_line": start}),
            )
            .await
            .unwrap();
        collected.push_str(page["content"].as_str().unwrap());
        pages += 1;
        match page["next_start_line"].as_u64() {
            Some(next) => {
                assert_eq!(page["truncated"], true);
                assert!(
                    page["note"].as_str().unwrap().contains("max_read_bytes"),
                    "{page}"
                );
                start = next;
            }
            None => {
                assert_eq!(page["total_lines"], 200);
                break;
            }
        }
    }
    assert_eq!(collected, text);
    assert_eq!(pages, 5);

    let found = env
        .call(
            "search_files",
            json!({"pattern": "row 1[0-9]7 ", "glob": "*.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(
        found["matches"],
        json!([
            {"path": "docs/notes/table.txt", "line": 107, "text": "row 107 of the table"},
            {"path": "docs/notes/table.txt", "line": 117, "text": "row 117 of the table"},
            {"path": "docs/notes/table.txt", "line": 127, "text": "row 127 of the table"},
            {"path": "docs/notes/table.txt", "line": 137, "text": "row 137 of the table"},
            {"path": "docs/notes/table.txt", "line": 147, "text": "row 147 of the table"},
            {"path": "docs/notes/table.txt", "line": 157, "text": "row 157 of the table"},
            {"path": "docs/notes/table.txt", "line": 167, "text": "row 167 of the table"},
            {"path": "docs/notes/table.txt", "line": 177, "text": "row 177 of the table"},
            {"path": "docs/notes/table.txt", "line": 187, "text": "row 187 of the table"},
            {"path": "docs/notes/table.txt", "line": 197, "text": "row 197 of the table"},
        ])
    );
    assert_eq!(found["files_searched"], 1);
}

#[tokio::test]
async fn listings_mark_ignored_entries_and_searches_skip_them() {
    let env = env(CONFIG).await;
    for (path, content) in [
        (".gitignore", "target/\n*.log\n"),
        ("src/main.rs", "fn main() { println!(\"needle\"); }\n"),
        ("src/debug.log", "needle in a log\n"),
        ("target/debug/build.rs", "needle in a build\n"),
        (".git/config", "needle in git\n"),
    ] {
        env.call(
            "write_file",
            json!({"path": path, "content": content, "create_dirs": true}),
        )
        .await
        .unwrap();
    }
    let listing = env.call("list_dir", json!({"depth": 3})).await.unwrap();
    let entries: Vec<(String, Value)> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_owned(),
                e.get("ignored").cloned().unwrap_or(json!(false)),
            )
        })
        .collect();
    let expected = [
        (".git", true),
        (".gitignore", false),
        ("src", false),
        ("src/debug.log", true),
        ("src/main.rs", false),
        ("target", true),
    ];
    let expected: Vec<(String, Value)> = expected
        .iter()
        .map(|(p, i)| ((*p).to_owned(), json!(i)))
        .collect();
    assert_eq!(entries, expected, "{listing}");
    let main_size = "fn main() { println!(\"needle\"); }\n".len();
    assert_eq!(
        listing["entries"][4],
        json!({"path": "src/main.rs", "type": "file", "size": main_size})
    );
    let found = env
        .call("search_files", json!({"pattern": "needle"}))
        .await
        .unwrap();
    let paths: Vec<&str> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["src/main.rs"]);
    // An ignored directory can still be searched when asked for by name.
    let found = env
        .call(
            "search_files",
            json!({"pattern": "needle", "path": "target/debug/build.rs"}),
        )
        .await
        .unwrap();
    assert_eq!(found["matches"][0]["line"], 1);
}

#[tokio::test]
async fn errors_are_typed_and_name_the_tool_and_the_path() {
    let env = env(CONFIG).await;
    std::fs::create_dir(env.ws_path("dir")).unwrap();
    std::fs::write(env.ws_path("bin.dat"), b"\x00\x01\x02").unwrap();
    let cases = [
        (
            "read_file",
            json!({"path": "missing.txt"}),
            "not_found",
            "missing.txt",
        ),
        ("read_file", json!({"path": "dir"}), "is_a_directory", "dir"),
        (
            "read_file",
            json!({"path": "../x"}),
            "path_outside_workspace",
            "../x",
        ),
        (
            "list_dir",
            json!({"path": "bin.dat"}),
            "not_a_directory",
            "bin.dat",
        ),
        (
            "write_file",
            json!({"path": "new/file.txt", "content": ""}),
            "not_found",
            "new/file.txt",
        ),
        (
            "write_file",
            json!({"path": "dir", "content": ""}),
            "is_a_directory",
            "dir",
        ),
        (
            "write_file",
            json!({"path": "big", "content": "x".repeat(10_485_761)}),
            "too_large",
            "core_tools.max_write_bytes",
        ),
        (
            "search_files",
            json!({"pattern": "a("}),
            "invalid_pattern",
            "a(",
        ),
    ];
    for (tool, arguments, code, named) in cases {
        let error = env.error(tool, arguments).await;
        assert_eq!(error["error"], code, "{tool}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("`{tool}` failed: ")) && !message.contains(code),
            "{message}"
        );
        assert!(message.contains(named), "{message}");
    }
    let binary = env
        .call("read_file", json!({"path": "bin.dat"}))
        .await
        .unwrap();
    assert_eq!(binary["binary"], true);
}

#[tokio::test]
async fn arguments_outside_the_schema_never_reach_the_tool() {
    let env = env(CONFIG).await;
    let cases = [
        ("read_file", json!({})),
        ("read_file", json!({"path": "a", "start_line": 0})),
        ("read_file", json!({"path": "a", "offset": 3})),
        ("write_file", json!({"path": "a"})),
        ("write_file", json!({"path": "a", "content": 5})),
        ("list_dir", json!({"depth": 17})),
        ("search_files", json!({"pattern": ""})),
        ("search_files", json!({"pattern": "a", "max_matches": 201})),
    ];
    for (tool, arguments) in cases {
        let error = env.error(tool, arguments.clone()).await;
        assert_eq!(
            error["error"], "invalid_arguments",
            "{tool} {arguments}: {error}"
        );
        assert!(error.get("input_schema").is_some(), "{error}");
    }
    assert!(!env.ws_path("a").exists());
}

#[tokio::test]
async fn the_tools_are_core_tools_sent_eagerly() {
    let env = env(CONFIG).await;
    let snapshot = env.daemon.registry().snapshot();
    let mut names = Vec::new();
    for tool in snapshot.tools() {
        assert_eq!(tool.source(), &ToolSource::Core);
        names.push(tool.name().to_owned());
    }
    assert_eq!(
        names,
        [
            "list_dir",
            "read_file",
            "run_command",
            "search_files",
            "write_file"
        ]
    );
    let assembly = env.daemon.assemble(&env.session, 200_000);
    let sent: Vec<&str> = assembly
        .tools()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        sent,
        [
            "list_dir",
            "read_file",
            "run_command",
            "search_files",
            "write_file"
        ]
    );
    let read = snapshot.get("read_file").unwrap();
    assert!(read.description().contains(&env.ws.display().to_string()));
}

#[test]
fn the_workspace_is_relative_to_the_config_file_and_must_exist() {
    let temp = tempfile::tempdir().unwrap();
    std::fs::create_dir(temp.path().join("conf")).unwrap();
    let file = temp.path().join("conf/quiver.yaml");
    std::fs::write(
        &file,
        "core_tools:\n  workspace: ../project\n  enabled: [list_dir, read_file]\n",
    )
    .unwrap();
    let config = load_file(&file).unwrap().config.core_tools;
    let error = CoreToolSet::new(&config).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("`core_tools.workspace`"), "{text}");
    assert!(
        text.contains("project") && text.contains("does not exist"),
        "{text}"
    );
    std::fs::create_dir(temp.path().join("project")).unwrap();
    let tools = CoreToolSet::new(&config).unwrap();
    assert_eq!(
        tools.workspace_root(),
        std::fs::canonicalize(temp.path().join("project")).unwrap()
    );
    let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["read_file", "list_dir"]);
}
