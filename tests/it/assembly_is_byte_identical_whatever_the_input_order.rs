//! Checks that `quiver catalog assemble` prints byte-identical output, and
//! in particular a byte-identical `tools` array, for the same servers and
//! tools given in a different order: servers shuffled, each server's tools
//! shuffled, and the servers split over two catalog files given in either
//! order.

use std::path::{Path, PathBuf};

use quiver_tests::{arg, catalog, quiver, read_json};
use serde_json::{Value, json};

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

fn servers(document: &Value) -> Vec<Value> {
    document["servers"].as_array().unwrap().clone()
}

fn order(servers: &[Value]) -> Vec<(String, String)> {
    servers
        .iter()
        .flat_map(|s| {
            s["tools"].as_array().unwrap().iter().map(|t| {
                (
                    s["name"].as_str().unwrap().to_owned(),
                    t["name"].as_str().unwrap().to_owned(),
                )
            })
        })
        .collect()
}

fn write(dir: &Path, name: &str, servers: Vec<Value>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, json!({"servers": servers}).to_string()).unwrap();
    path
}

/// Raw stdout of `quiver catalog assemble --json`.
fn assemble_raw(catalogs: &[&Path], context_tokens: u64) -> Vec<u8> {
    let context = context_tokens.to_string();
    let mut args = vec!["catalog", "assemble"];
    for catalog in catalogs {
        args.extend(["--catalog", arg(catalog)]);
    }
    args.extend(["--context-tokens", &context, "--json"]);
    let output = quiver(&args);
    assert!(
        output.status.success(),
        "quiver {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// The `tools` array, serialised again (serde_json writes object keys in
/// sorted order, as quiver does, so equal bytes here mean equal arrays).
fn tools_json(raw: &[u8]) -> String {
    let value: Value = serde_json::from_slice(raw).unwrap();
    assert!(value["tools"].as_array().is_some_and(|t| !t.is_empty()));
    serde_json::to_string(&value["tools"]).unwrap()
}

fn check(name: &str, context_tokens: u64) {
    let original_path = catalog(name);
    let original = servers(&read_json(&original_path));
    let dir = tempfile::tempdir().unwrap();

    // Servers and tools shuffled.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ context_tokens);
    let mut shuffled = original.clone();
    rng.shuffle(&mut shuffled);
    for server in &mut shuffled {
        rng.shuffle(server["tools"].as_array_mut().unwrap());
    }
    assert_ne!(
        order(&shuffled),
        order(&original),
        "the shuffle changed nothing"
    );
    let shuffled_path = write(dir.path(), "shuffled.json", shuffled);

    // Servers reversed, tools reversed, split over two files given last first.
    let mut reversed = original.clone();
    reversed.reverse();
    for server in &mut reversed {
        server["tools"].as_array_mut().unwrap().reverse();
    }
    let second = reversed.split_off(reversed.len() / 2);
    let first_path = write(dir.path(), "first.json", reversed);
    let second_path = write(dir.path(), "second.json", second);

    let expected = assemble_raw(&[&original_path], context_tokens);
    let expected_tools = tools_json(&expected);
    for (what, catalogs) in [
        ("shuffled", vec![shuffled_path.as_path()]),
        (
            "reversed and split",
            vec![second_path.as_path(), first_path.as_path()],
        ),
    ] {
        let got = assemble_raw(&catalogs, context_tokens);
        assert_eq!(
            tools_json(&got),
            expected_tools,
            "{name}, {what}: the tools array differs at {context_tokens} tokens of context"
        );
        assert!(
            got == expected,
            "{name}, {what}: the output differs at {context_tokens} tokens of context"
        );
    }
}

/// Some servers full, the others summarised.
#[test]
fn mcp_popular_mixed_listing() {
    check("mcp-popular.json", 200_000);
}

/// Full, names-only and summarised servers.
#[test]
fn livemcpbench_mixed_listing() {
    check("livemcpbench.json", 200_000);
}

/// Summary lines for the first servers, then `and N more servers`.
#[test]
fn livemcpbench_truncated_listing() {
    check("livemcpbench.json", 2_000);
}
