//! No core tool reaches outside the workspace root: not through `..`
//! chains, absolute paths, a symlink to a file or a directory outside
//! (relative or absolute), nor a directory swapped for a symlink to the
//! outside while the tools are using it. Symlinks that stay inside work.
//! Every call goes through the real dispatch chain on real files.

use quiver_tests::core_tools as core_tools_support;

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use core_tools_support::{Env, env, symlink};
use serde_json::{Value, json};

const SECRET: &str = "TOP SECRET outside the workspace";

/// `ws/` with an inside file, an inside symlink pair and four ways out;
/// `outside/` with a secret file and directory.
async fn escape_env() -> Env {
    let env =
        env("core_tools:\n  workspace: ws\n  run_command:\n    require_approval: false\n").await;
    fs::write(env.outside.join("secret.txt"), SECRET).unwrap();
    fs::create_dir(env.outside.join("dir")).unwrap();
    fs::write(env.outside.join("dir/secret.txt"), SECRET).unwrap();
    fs::create_dir(env.ws_path("sub")).unwrap();
    fs::write(env.ws_path("inside.txt"), "inside text\n").unwrap();
    symlink("../outside/secret.txt", env.ws_path("file_out_rel"));
    symlink(env.outside.join("secret.txt"), env.ws_path("file_out_abs"));
    symlink("../outside", env.ws_path("dir_out_rel"));
    symlink(&env.outside, env.ws_path("dir_out_abs"));
    symlink("../inside.txt", env.ws_path("sub/file_in"));
    symlink("sub", env.ws_path("dir_in"));
    env
}

fn outside_paths(env: &Env) -> Vec<String> {
    let absolute = env.outside.join("secret.txt").display().to_string();
    let ws_prefix_sibling = format!("{}-sibling/secret.txt", env.ws.display());
    vec![
        "../outside/secret.txt".into(),
        "sub/../../outside/secret.txt".into(),
        "./sub/./../../outside/secret.txt".into(),
        "../ws/../outside/secret.txt".into(),
        absolute,
        ws_prefix_sibling,
        "/etc/passwd".into(),
        "file_out_rel".into(),
        "file_out_abs".into(),
        "dir_out_rel/secret.txt".into(),
        "dir_out_abs/secret.txt".into(),
        "dir_out_rel/dir/secret.txt".into(),
        "dir_in/../dir_out_rel/secret.txt".into(),
    ]
}

fn assert_outside(error: &Value, what: &str) {
    // The code is a field of its own, not text inside the message.
    assert_eq!(error["error"], "path_outside_workspace", "{what}: {error}");
    assert!(!error.to_string().contains(SECRET), "{what}: {error}");
}

#[tokio::test]
async fn reads_through_dot_dot_absolute_paths_and_symlinks_are_refused() {
    let env = escape_env().await;
    for path in outside_paths(&env) {
        let error = env.error("read_file", json!({"path": path})).await;
        assert_outside(&error, &path);
        let error = env
            .error("search_files", json!({"pattern": "SECRET", "path": path}))
            .await;
        assert_outside(&error, &path);
    }
}

#[tokio::test]
async fn symlinks_that_stay_inside_are_followed() {
    let env = escape_env().await;
    for path in ["sub/file_in", "dir_in/file_in", "dir_in/../inside.txt"] {
        let result = env.call("read_file", json!({"path": path})).await.unwrap();
        assert_eq!(result["content"], "inside text\n", "{path}");
    }
    let absolute_inside = env.ws_path("inside.txt").display().to_string();
    let result = env
        .call("read_file", json!({"path": absolute_inside}))
        .await
        .unwrap();
    assert_eq!(result["path"], "inside.txt");
    let listing = env
        .call("list_dir", json!({"path": "dir_in"}))
        .await
        .unwrap();
    assert_eq!(listing["path"], "sub");
    assert_eq!(
        listing["entries"],
        json!([{"path": "sub/file_in", "type": "symlink"}])
    );
}

#[tokio::test]
async fn writes_never_land_outside() {
    let env = escape_env().await;
    let before = tree(&env.outside);
    for path in [
        "../outside/new.txt",
        "dir_out_rel/new.txt",
        "dir_out_abs/new.txt",
        "dir_out_rel/made/new.txt",
        "file_out_rel",
        "file_out_abs",
    ] {
        for create_dirs in [false, true] {
            let error = env
                .error(
                    "write_file",
                    json!({"path": path, "content": "pwned", "create_dirs": create_dirs}),
                )
                .await;
            assert_outside(&error, path);
        }
    }
    assert_eq!(tree(&env.outside), before);
    assert_eq!(
        fs::read_to_string(env.outside.join("secret.txt")).unwrap(),
        SECRET
    );
    // Writing through an inside symlink replaces its inside target.
    let result = env
        .call(
            "write_file",
            json!({"path": "sub/file_in", "content": "new inside\n"}),
        )
        .await
        .unwrap();
    assert_eq!(result["written_to"], "inside.txt");
    assert_eq!(
        fs::read_to_string(env.ws_path("inside.txt")).unwrap(),
        "new inside\n"
    );
    assert!(
        fs::symlink_metadata(env.ws_path("sub/file_in"))
            .unwrap()
            .is_symlink()
    );
}

#[tokio::test]
async fn listings_searches_and_working_directories_stay_inside() {
    let env = escape_env().await;
    for path in [
        "..",
        "../outside",
        "dir_out_rel",
        "dir_out_abs",
        "/",
        "/tmp",
    ] {
        let error = env.error("list_dir", json!({"path": path})).await;
        assert_outside(&error, path);
        let error = env
            .error(
                "run_command",
                json!({"command": "cat secret.txt", "cwd": path}),
            )
            .await;
        assert_outside(&error, path);
    }
    // The symlinks show as symlinks; nothing below them is listed or searched.
    let listing = env.call("list_dir", json!({"depth": 16})).await.unwrap();
    let text = listing.to_string();
    assert!(!text.contains("secret.txt"), "{text}");
    let types: Vec<(&str, &str)> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap(), e["type"].as_str().unwrap()))
        .collect();
    assert!(types.contains(&("dir_out_rel", "symlink")), "{types:?}");
    assert!(types.contains(&("dir_out_abs", "symlink")), "{types:?}");
    let found = env
        .call("search_files", json!({"pattern": "SECRET"}))
        .await
        .unwrap();
    assert_eq!(found["matches"], json!([]), "{found}");
    let found = env
        .call("search_files", json!({"pattern": "inside"}))
        .await
        .unwrap();
    assert_eq!(found["matches"][0]["path"], "inside.txt");
}

/// Every path under `root` with its content (for directories: nothing).
fn tree(root: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let content = if path.is_dir() {
                stack.push(path.clone());
                String::new()
            } else {
                fs::read_to_string(&path).unwrap_or_default()
            };
            out.push((path.display().to_string(), content));
        }
    }
    out.sort();
    out
}

/// While the calls run, a thread keeps swapping `ws/flip` between a real
/// directory and a symlink to `outside/dir` (both hold `secret.txt`; the
/// inside one says "inside"). A tool that checked the path and then used
/// it would sooner or later read, list, search or write outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_mid_use_never_leads_out() {
    let env = escape_env().await;
    fs::create_dir(env.ws_path("stage_dir")).unwrap();
    fs::write(env.ws_path("stage_dir/secret.txt"), "inside\n").unwrap();
    symlink(env.outside.join("dir"), env.ws_path("stage_link"));
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = {
        let (ws, stop) = (env.ws.clone(), stop.clone());
        std::thread::spawn(move || {
            let (flip, dir, link) = (ws.join("flip"), ws.join("stage_dir"), ws.join("stage_link"));
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                fs::rename(&dir, &flip).unwrap();
                fs::rename(&flip, &dir).unwrap();
                fs::rename(&link, &flip).unwrap();
                fs::rename(&flip, &link).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let outside_before = tree(&env.outside);
    let (mut inside_reads, mut refused) = (0, 0);
    for round in 0..300 {
        let calls = [
            ("read_file", json!({"path": "flip/secret.txt"})),
            ("list_dir", json!({"path": "flip"})),
            (
                "search_files",
                json!({"pattern": "SECRET|inside", "path": "flip"}),
            ),
            ("search_files", json!({"pattern": "SECRET"})),
            (
                "write_file",
                json!({"path": format!("flip/new{round}.txt"), "content": "pwned"}),
            ),
        ];
        for (tool, arguments) in calls {
            match env.call(tool, arguments.clone()).await {
                Ok(result) => {
                    let text = result.to_string();
                    assert!(!text.contains(SECRET), "{tool} {arguments} leaked: {text}");
                    if tool == "read_file" {
                        inside_reads += 1;
                    }
                }
                Err(error) => {
                    let error = error.to_json();
                    let code = error["error"].as_str().unwrap_or_default().to_owned();
                    assert!(
                        ["path_outside_workspace", "not_found", "not_a_directory"]
                            .contains(&code.as_str()),
                        "{tool} {arguments}: {error}"
                    );
                    assert!(!error.to_string().contains(SECRET), "{error}");
                    refused += 1;
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swaps.join().unwrap();
    assert!(
        swaps > 100,
        "the swapping thread barely ran ({swaps} swaps)"
    );
    assert!(
        inside_reads > 0 && refused > 0,
        "reads {inside_reads}, refused {refused}"
    );
    assert_eq!(
        tree(&env.outside),
        outside_before,
        "something was written outside"
    );
}
