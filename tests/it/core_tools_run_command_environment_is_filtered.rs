//! `run_command` does not hand the daemon's environment to commands: by
//! default they get only the variables programs need (`PATH`, `HOME`,
//! `LANG`, `LC_*`, ...), never a secret such as a model API key;
//! `run_command.env_inherit` widens or narrows that and
//! `run_command.env` sets variables of its own.

use quiver_tests::core_tools as core_tools_support;

use core_tools_support::env;
use serde_json::json;

const PRINT: &str = "echo \"secret=${QUIVER_TEST_API_KEY:-unset} lc=${LC_QUIVER_TEST:-unset} \
                     path=${PATH:+set} ci=${CI_MODE:-unset}\"";

async fn printed(yaml: &str) -> String {
    let env = env(yaml);
    let result = env
        .call("run_command", json!({"command": PRINT}))
        .await
        .unwrap();
    assert_eq!(result["exit_code"], 0, "{result}");
    result["stdout"].as_str().unwrap().trim().to_owned()
}

// One test in this file: it sets variables of its own process before any
// other thread starts, so nothing reads the environment while it changes.
#[test]
fn commands_get_only_the_configured_environment() {
    // SAFETY: the only thread of this test binary that touches the
    // environment, and no runtime has started yet.
    unsafe {
        std::env::set_var("QUIVER_TEST_API_KEY", "sk-do-not-leak");
        std::env::set_var("LC_QUIVER_TEST", "kept");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let base = "core_tools:\n  workspace: ws\n  run_command:\n    require_approval: false\n";

    // The default list: PATH and LC_* come through, the key does not.
    assert_eq!(
        runtime.block_on(printed(base)),
        "secret=unset lc=kept path=set ci=unset"
    );

    // Set variables, and a narrower inherit list.
    let narrow = format!("{base}    env_inherit: [PATH]\n    env: {{CI_MODE: \"1\"}}\n");
    assert_eq!(
        runtime.block_on(printed(&narrow)),
        "secret=unset lc=unset path=set ci=1"
    );

    // `*` inherits everything, as an operator may choose to.
    let all = format!("{base}    env_inherit: [\"*\"]\n");
    assert_eq!(
        runtime.block_on(printed(&all)),
        "secret=sk-do-not-leak lc=kept path=set ci=unset"
    );
}
