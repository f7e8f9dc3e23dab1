//! A gateway client sees the resources, resource templates and prompts of
//! the MCP servers its grant holds, under names that say which server they
//! come from (`quiver://mcp/SERVER/URI`, `mcp_SERVER_PROMPT`), reads and
//! renders them through Quiver, and sees nothing of a server outside its
//! grant. Prompt and template arguments complete upstream. Driven with an
//! rmcp client over `quiver serve --stdio`.

use quiver_tests::daemon::Fixture;
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

async fn gateway(
    fixture: &Fixture,
    config: &std::path::Path,
    grant: &str,
) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::from(quiver_tests::quiver_command());
    command
        .args(["serve", "--stdio", "--grant", grant, "--config"])
        .arg(config)
        .arg("--state-dir")
        .arg(fixture.state().join(grant.replace('*', "all")));
    ().serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

/// Until `server` is connected (bounded): before then the gateway has
/// none of its resources to show. Its `echo` tool is described once it is.
async fn wait_for_server(client: &RunningService<RoleClient, ()>, server: &str) {
    for _ in 0..300 {
        let mut describe = rmcp::model::CallToolRequestParams::new("tool_describe");
        describe.arguments = json!({"name": format!("mcp_{server}_echo")})
            .as_object()
            .cloned();
        let described = client.call_tool(describe).await.unwrap();
        if described.is_error != Some(true) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{server} never connected");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_granted_servers_resources_and_prompts_pass_through() {
    let fixture = Fixture::new();
    let config = fixture.notes_config();
    let client = gateway(&fixture, &config, "*").await;
    let capabilities = &client.peer_info().unwrap().capabilities;
    assert!(capabilities.resources.is_some() && capabilities.prompts.is_some());
    wait_for_server(&client, "notes").await;
    wait_for_server(&client, "plain").await;

    // Only `notes` has resources; the URIs name it.
    let mut uris: Vec<String> = client
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .collect();
    uris.sort();
    assert_eq!(
        uris,
        [
            "quiver://mcp/notes/test://notes/first",
            "quiver://mcp/notes/test://notes/second"
        ]
    );
    let templates = client.list_all_resource_templates().await.unwrap();
    let templates: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(templates, ["quiver://mcp/notes/test://notes/{name}"]);

    // Reading goes to the server by its own URI; the contents come back
    // under the gateway's name, so the client can read them again.
    let read = client
        .read_resource(ReadResourceRequestParams::new(
            "quiver://mcp/notes/test://notes/first",
        ))
        .await
        .unwrap();
    let read = serde_json::to_value(&read).unwrap();
    assert_eq!(read["contents"][0]["text"], "note first", "{read}");
    assert_eq!(
        read["contents"][0]["uri"],
        "quiver://mcp/notes/test://notes/first"
    );
    // A URI filled in from the template reads too.
    let filled = client
        .read_resource(ReadResourceRequestParams::new(
            "quiver://mcp/notes/test://notes/third",
        ))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&filled).unwrap()["contents"][0]["text"],
        "note third"
    );

    // A tool's result links and embeds resources by the gateway's names,
    // whether the tool is called directly or through `tool_call`: the
    // client can read what it was given.
    let mut call = rmcp::model::CallToolRequestParams::new("tool_call");
    call.arguments = json!({"name": "mcp_notes_link_note", "arguments": {}})
        .as_object()
        .cloned();
    let linked = serde_json::to_value(client.call_tool(call).await.unwrap()).unwrap();
    let content = linked["content"].to_string();
    assert!(
        content.contains("quiver://mcp/notes/test://notes/first")
            && content.contains("quiver://mcp/notes/test://notes/second"),
        "{linked}"
    );

    // The server's own refusal keeps its code and message.
    let refused = client
        .read_resource(ReadResourceRequestParams::new(
            "quiver://mcp/notes/other://x",
        ))
        .await
        .unwrap_err();
    let refused = error_of(refused);
    assert_eq!(refused["code"], -32002, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("other://x"),
        "{refused}"
    );
    // A URI that is not the gateway's says how its URIs look.
    let foreign = error_of(
        client
            .read_resource(ReadResourceRequestParams::new("test://notes/first"))
            .await
            .unwrap_err(),
    );
    assert!(
        foreign["message"]
            .as_str()
            .unwrap()
            .contains("quiver://mcp/SERVER/URI"),
        "{foreign}"
    );
    // A server that offers no resources has nothing to read.
    let plain = error_of(
        client
            .read_resource(ReadResourceRequestParams::new(
                "quiver://mcp/plain/test://notes/first",
            ))
            .await
            .unwrap_err(),
    );
    assert_eq!(plain["code"], -32601, "{plain}");

    // Prompts are named as its tools are, and render upstream.
    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["mcp_notes_greet"]);
    assert_eq!(
        prompts[0].arguments.as_ref().unwrap()[0].name,
        "name",
        "the prompt's arguments are the server's"
    );
    let mut get = GetPromptRequestParams::new("mcp_notes_greet");
    get.arguments = json!({"name": "Ada"}).as_object().cloned();
    let rendered = serde_json::to_value(client.get_prompt(get).await.unwrap()).unwrap();
    assert_eq!(
        rendered["messages"][0]["content"]["text"], "Say hello to Ada.",
        "{rendered}"
    );
    let missing = error_of(
        client
            .get_prompt(GetPromptRequestParams::new("mcp_notes_greet"))
            .await
            .unwrap_err(),
    );
    assert_eq!(missing["code"], -32602, "{missing}");
    assert!(
        missing["message"].as_str().unwrap().contains("name"),
        "{missing}"
    );
    let unknown = error_of(
        client
            .get_prompt(GetPromptRequestParams::new("mcp_notes_nothing"))
            .await
            .unwrap_err(),
    );
    assert_eq!(unknown["code"], -32602, "{unknown}");

    // Arguments complete upstream, by the gateway's names for prompt and
    // template.
    let names = client
        .complete_prompt_simple("mcp_notes_greet", "name", "A")
        .await
        .unwrap();
    assert_eq!(names, ["Ada", "Alan"]);
    let notes = client
        .complete_resource_simple("quiver://mcp/notes/test://notes/{name}", "name", "s")
        .await
        .unwrap();
    assert_eq!(notes, ["second"]);
    // A server without completions has none to give.
    let none = client
        .complete_resource_simple("quiver://mcp/plain/test://x/{y}", "y", "")
        .await
        .unwrap();
    assert!(none.is_empty(), "{none:?}");
    let unknown = error_of(
        client
            .complete_prompt_simple("mcp_notes_nothing", "name", "A")
            .await
            .unwrap_err(),
    );
    assert_eq!(unknown["code"], -32602, "{unknown}");

    // The gateway lists everything at once: a cursor is not its own.
    let cursor = error_of(
        client
            .list_resources(Some(
                rmcp::model::PaginatedRequestParams::default()
                    .with_cursor(Some("page-2".to_owned())),
            ))
            .await
            .unwrap_err(),
    );
    assert_eq!(cursor["code"], -32602, "{cursor}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_outside_the_grant_shows_nothing() {
    let fixture = Fixture::new();
    let config = fixture.notes_config();
    let client = gateway(&fixture, &config, "mcp-plain").await;
    wait_for_server(&client, "plain").await;

    assert!(client.list_all_resources().await.unwrap().is_empty());
    assert!(
        client
            .list_all_resource_templates()
            .await
            .unwrap()
            .is_empty()
    );
    assert!(client.list_all_prompts().await.unwrap().is_empty());
    let refused = error_of(
        client
            .read_resource(ReadResourceRequestParams::new(
                "quiver://mcp/notes/test://notes/first",
            ))
            .await
            .unwrap_err(),
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("no MCP server `notes` in this client's grant"),
        "{refused}"
    );
    let mut get = GetPromptRequestParams::new("mcp_notes_greet");
    get.arguments = json!({"name": "Ada"}).as_object().cloned();
    let refused = error_of(client.get_prompt(get).await.unwrap_err());
    assert_eq!(refused["code"], -32602, "{refused}");
    let refused = error_of(
        client
            .complete_resource_simple("quiver://mcp/notes/test://notes/{name}", "name", "f")
            .await
            .unwrap_err(),
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("no MCP server `notes` in this client's grant"),
        "{refused}"
    );
    client.cancel().await.unwrap();
}

/// The JSON-RPC error a request was answered with.
fn error_of(error: rmcp::ServiceError) -> Value {
    match error {
        rmcp::ServiceError::McpError(error) => serde_json::to_value(error).unwrap(),
        other => panic!("not an error answer: {other}"),
    }
}
