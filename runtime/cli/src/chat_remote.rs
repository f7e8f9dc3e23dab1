//! `quiver chat` attached to the daemon already running on the state
//! directory (its `daemon.json` says where it listens, its token file is
//! beside it): the conversation goes through the daemon's API, so the
//! daemon's own tools, MCP servers and sessions serve it and nothing is
//! started twice. Each message is one `POST .../messages?stream=true`,
//! whose events show the text as it streams, the activity as it happens and
//! the approvals the turn waits for; those are answered on the terminal and
//! sent back with `POST /v1/approvals/ID` (with the digest shown, so an
//! answer never approves other arguments).

use std::collections::{HashSet, VecDeque};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::chat_cli::{HELP, StreamPrinter};
use crate::serve_cli::DaemonFile;

/// Longest the daemon may take to answer whether it is there.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The daemon of `state_dir`, when one runs and answers.
pub(crate) struct Attached {
    url: String,
    token: String,
    client: reqwest::Client,
}

impl Attached {
    /// The daemon `daemon.json` of `state_dir` names, if it answers
    /// `/v1/health` with its token; `None` when none runs (no file, a
    /// stale one, no answer).
    pub(crate) async fn find(state_dir: &Path) -> Option<Attached> {
        let file = DaemonFile::read(state_dir)?;
        if file.url.is_empty() || file.token_file.is_empty() {
            return None;
        }
        let token = std::fs::read_to_string(&file.token_file).ok()?;
        let client = reqwest::Client::builder()
            .connect_timeout(PROBE_TIMEOUT)
            .build()
            .ok()?;
        let attached = Attached {
            url: file.url,
            token: token.trim().to_owned(),
            client,
        };
        let health = attached
            .request(reqwest::Method::GET, "/v1/health")
            .timeout(PROBE_TIMEOUT)
            .send()
            .await
            .ok()?;
        health.status().is_success().then_some(attached)
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token)
    }

    /// A JSON request; a JSON error answer is an error with its message.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let mut request = self
            .request(method.clone(), path)
            .timeout(Duration::from_secs(30));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("{method} {}{path}", self.url))?;
        let status = response.status();
        let answer: Value = response
            .json()
            .await
            .with_context(|| format!("{method} {}{path} ({status})", self.url))?;
        if !status.is_success() {
            bail!(
                "{}: {}",
                answer["error"].as_str().unwrap_or("error"),
                answer["message"].as_str().unwrap_or_default()
            );
        }
        Ok(answer)
    }
}

/// Where a turn's approval prompt stands.
struct Prompt {
    approval: Value,
}

/// Runs the conversation through `daemon` until `/quit` or the end of
/// input.
pub(crate) async fn run(
    daemon: Attached,
    session: Option<String>,
    model: Option<String>,
    grants: Vec<String>,
    lines: &mut UnboundedReceiver<String>,
    interactive: bool,
) -> Result<()> {
    let record = match session {
        Some(id) => daemon
            .call(reqwest::Method::GET, &format!("/v1/sessions/{id}"), None)
            .await?["session"]
            .clone(),
        None => {
            let mut body = json!({});
            if !grants.is_empty() {
                body["grants"] = json!(grants);
            }
            if let Some(model) = model {
                body["model"] = json!(model);
            }
            daemon
                .call(reqwest::Method::POST, "/v1/sessions", Some(body))
                .await?
        }
    };
    let id = record["id"]
        .as_str()
        .context("the daemon answered a session without an id")?
        .to_owned();
    eprintln!(
        "session {id} with model {} (attached to the daemon at {}); {HELP}",
        record["model"].as_str().unwrap_or("(none)"),
        daemon.url
    );
    let mut input_ended = false;
    while !input_ended {
        eprint!("> ");
        let _ = std::io::stderr().flush();
        let Some(line) = lines.recv().await else {
            break;
        };
        let text = line.trim();
        match text {
            "" => continue,
            "/quit" | "/exit" => break,
            "/session" => {
                eprintln!("{id}");
                continue;
            }
            "/help" | "/?" => {
                eprintln!("{HELP}");
                continue;
            }
            "/tools" => {
                let catalog = daemon
                    .call(
                        reqwest::Method::GET,
                        &format!("/v1/sessions/{id}/catalog"),
                        None,
                    )
                    .await?;
                let tools = catalog["tools"].as_array().cloned().unwrap_or_default();
                eprintln!("tier {}: {} tools sent", catalog["tier"], tools.len());
                for tool in tools {
                    if let Some(name) = tool["function"]["name"].as_str() {
                        eprintln!("  {name}");
                    }
                }
                continue;
            }
            _ => {}
        }
        match turn(&daemon, &id, text, lines, interactive).await {
            Ok(ended) => input_ended = ended,
            Err(error) => eprintln!("error: {error:#}"),
        }
    }
    Ok(())
}

/// One turn: its stream shown, its approvals asked. `Ok(true)` when the
/// input ended during it.
async fn turn(
    daemon: &Attached,
    id: &str,
    text: &str,
    lines: &mut UnboundedReceiver<String>,
    interactive: bool,
) -> Result<bool> {
    let response = daemon
        .request(
            reqwest::Method::POST,
            &format!("/v1/sessions/{id}/messages?stream=true"),
        )
        .json(&json!({"content": text}))
        .send()
        .await
        .context("cannot send the message to the daemon")?;
    if !response.status().is_success() {
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or_default();
        bail!(
            "{} ({status}): {}",
            answer["error"].as_str().unwrap_or("error"),
            answer["message"].as_str().unwrap_or_default()
        );
    }
    let mut events = response.bytes_stream().eventsource();
    let mut printer = StreamPrinter::default();
    let mut prompt: Option<Prompt> = None;
    let mut asked: HashSet<u64> = HashSet::new();
    // Piped input is a script: lines read during the turn answer its
    // prompts in order, even one that came before its prompt.
    let mut ahead: VecDeque<String> = VecDeque::new();
    let mut input_ended = false;
    loop {
        if let Some(waiting) = &prompt {
            // A line read ahead answers it; with none and no more to
            // come, it is denied rather than left to its timeout.
            match ahead.pop_front() {
                Some(answer) => {
                    answer_approval(daemon, &waiting.approval, &answer).await;
                    prompt = None;
                }
                None if input_ended => {
                    answer_approval(daemon, &waiting.approval, "").await;
                    prompt = None;
                }
                None => {}
            }
        }
        tokio::select! {
            event = events.next() => {
                let event = match event {
                    Some(Ok(event)) => event,
                    Some(Err(error)) => bail!("the daemon's stream broke off: {error}"),
                    None => bail!("the daemon's stream ended before the turn did"),
                };
                let data: Value = serde_json::from_str(&event.data).unwrap_or_default();
                match event.event.as_str() {
                    "message.delta" | "message.done" => printer.show(&event.event, &data),
                    "activity" => {
                        printer.end_line();
                        if let Some(line) = data["line"].as_str() {
                            eprintln!("  · {line}");
                        }
                        let call = data["call_id"].as_u64().unwrap_or(0);
                        if data["status"] == "awaiting_approval" && asked.insert(call) {
                            match pending_approval(daemon, id, call).await {
                                Some(approval) => {
                                    ask(&approval);
                                    prompt = Some(Prompt { approval });
                                }
                                None => eprintln!("(the approval was answered elsewhere)"),
                            }
                        } else if prompt.as_ref().is_some_and(|p| p.approval["call_id"] == call) {
                            // Answered elsewhere, or timed out.
                            eprintln!("(the approval is no longer waiting)");
                            prompt = None;
                        }
                    }
                    "turn.done" => {
                        printer.end_line();
                        if !printer.streamed_last {
                            println!("{}", data["reply"].as_str().unwrap_or_default());
                        }
                        if data["stop"] != "answer" {
                            eprintln!("(turn ended: {})", data["stop"]);
                        }
                        return Ok(input_ended);
                    }
                    "error" => {
                        printer.end_line();
                        bail!("{}", data["message"].as_str().unwrap_or("the turn failed"));
                    }
                    _ => {}
                }
            }
            line = lines.recv(), if !input_ended => match line {
                Some(answer) => match &prompt {
                    Some(waiting) => {
                        answer_approval(daemon, &waiting.approval, &answer).await;
                        prompt = None;
                    }
                    None if interactive => eprintln!("(no approval is waiting; ignored: {answer})"),
                    None => ahead.push_back(answer),
                },
                // End of input: a waiting prompt is denied rather than left
                // to its timeout.
                None => input_ended = true,
            },
        }
    }
}

/// Tries at finding a call's approval in the daemon's queue, and the pause
/// between two: the `awaiting approval` event is recorded just before the
/// call is queued, so it may come first.
const APPROVAL_LOOKUPS: (u32, Duration) = (200, Duration::from_millis(25));

/// The daemon's pending approval of call `call` of session `id`; `None`
/// when it is not (or no longer) queued.
async fn pending_approval(daemon: &Attached, id: &str, call: u64) -> Option<Value> {
    let (tries, pause) = APPROVAL_LOOKUPS;
    for _ in 0..tries {
        let answer = daemon
            .call(
                reqwest::Method::GET,
                &format!("/v1/approvals?session={id}"),
                None,
            )
            .await
            .ok()?;
        let found = answer["approvals"]
            .as_array()
            .and_then(|pending| pending.iter().find(|a| a["call_id"].as_u64() == Some(call)))
            .cloned();
        if found.is_some() {
            return found;
        }
        tokio::time::sleep(pause).await;
    }
    None
}

/// Shows the approval prompt (the terminal approver's wording).
fn ask(approval: &Value) {
    let via = if approval["via_bridge"] == true {
        " via tool_call"
    } else {
        ""
    };
    eprintln!(
        "approve `{}`{via} for session {}?\n  arguments: {}\n  digest: {}\n[y] yes  [s] yes for this session  [N] no: ",
        approval["tool"].as_str().unwrap_or_default(),
        approval["session"].as_str().unwrap_or_default(),
        approval["arguments"],
        approval["digest"].as_str().unwrap_or_default()
    );
}

/// Sends the terminal's `answer` to `approval` (anything but yes or
/// session denies), bound to the digest that was shown.
async fn answer_approval(daemon: &Attached, approval: &Value, answer: &str) {
    let decision = match answer.trim() {
        "y" | "Y" | "yes" => json!({"decision": "approve"}),
        "s" | "S" | "session" => json!({"decision": "approve_for_session"}),
        _ => json!({"decision": "deny", "reason": "denied at the terminal"}),
    };
    let mut body = decision;
    body["digest"] = approval["digest"].clone();
    // The daemon records who answered; the console shows it.
    body["client"] = json!("quiver chat");
    let path = format!("/v1/approvals/{}", approval["id"]);
    if let Err(error) = daemon.call(reqwest::Method::POST, &path, Some(body)).await {
        eprintln!("(the answer was not taken: {error:#})");
    }
}
