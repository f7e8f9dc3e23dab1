//! `quiver chat`: an interactive conversation with a configured model,
//! through the daemon running on the state directory when there is one
//! (see `chat_remote`), else in this process (the same tools, chain and
//! state directory as the daemon).
//! The model's text is printed as it streams in, the activity feed shown
//! as it happens, with the real tool names, and
//! calls that need approval are asked on the terminal. Sessions are stored
//! like the daemon's: `--session ID` resumes one.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use clap::Args;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use quiver_daemon::{Daemon, DaemonOptions, NewSession};
use quiver_dispatch::approval::terminal::TerminalApprover;

/// `quiver chat` arguments.
#[derive(Args)]
pub(crate) struct ChatArgs {
    /// Config file (default: ./quiver.yaml, else the user config directory's, else the embedded default).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Resume this stored session instead of starting a new one.
    #[arg(long)]
    session: Option<String>,
    /// The model (a name under `models`; default: `default_model`).
    #[arg(long)]
    model: Option<String>,
    /// Toolsets or tool globs granted to the new session (default: everything).
    #[arg(long = "grant")]
    grants: Vec<String>,
    /// State directory, overriding `serve.state_dir`.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Relax the plugin trust checks, for local development.
    #[arg(long)]
    dev: bool,
}

pub(crate) const HELP: &str = "/help: this list; /tools: what the model is sent now; /session: the session id; /quit (or end of input): leave";

/// Runs the conversation until `/quit` or the end of input.
pub(crate) fn run(args: ChatArgs) -> Result<ExitCode> {
    let origin = quiver_daemon::config::discover(args.config.as_deref());
    let mut config = crate::load_config_from(&origin)?.config;
    if let Some(dir) = &args.state_dir {
        config.serve.state_dir = Some(dir.clone());
    }
    // One reader of the terminal: between turns its lines are messages;
    // during a turn they answer approval prompts (through a pipe).
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let (approval_input, approval_writer) =
        std::io::pipe().context("cannot make a pipe for approval answers")?;
    let approver =
        TerminalApprover::new(std::io::BufReader::new(approval_input), std::io::stderr());
    let asking = approver.asking();
    // At a terminal, a line typed while no prompt waits answers nothing (a
    // `y` typed ahead must not approve the next command); piped input is a
    // script, and its lines answer the prompts in order.
    let interactive = std::io::stdin().is_terminal();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let state_dir = config.serve.state_dir();
    runtime.block_on(async move {
        // A daemon already serving this state directory runs the
        // conversation: its tools and MCP servers are not started twice.
        if let Some(attached) = crate::chat_remote::Attached::find(&state_dir).await {
            return crate::chat_remote::run(
                attached,
                args.session,
                args.model,
                args.grants,
                &mut lines,
                interactive,
            )
            .await;
        }
        if crate::serve_cli::DaemonFile::read(&state_dir).is_some() {
            eprintln!(
                "(the daemon {} names does not answer: running in this process)",
                crate::serve_cli::DaemonFile::path(&state_dir).display()
            );
        }
        let daemon = Daemon::start(
            config,
            DaemonOptions {
                dev: args.dev,
                approver: Some(Arc::new(approver)),
                watch_plugins: true,
                config_file: origin.file().map(std::path::Path::to_path_buf),
                overrides: Default::default(),
                primary: false,
            },
        )
        .await?;
        let id = match args.session {
            Some(id) => {
                daemon.session(&id).await?;
                id
            }
            None => {
                daemon
                    .create_session(NewSession {
                        grants: (!args.grants.is_empty()).then_some(args.grants),
                        model: args.model,
                        ..NewSession::default()
                    }).await?
                    .id
            }
        };
        let live = daemon.session(&id).await?;
        eprintln!(
            "session {id} with model {}; {HELP}",
            live.record.model.as_deref().unwrap_or("(none)")
        );
        let mut events = live.session.subscribe();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => eprintln!("  · {}", event.render()),
                    Err(RecvError::Lagged(skipped)) => {
                        eprintln!(
                            "  · ({skipped} activity events not shown: the terminal fell behind)"
                        );
                    }
                    Err(RecvError::Closed) => break,
                }
            }
        });
        let mut approval_writer = Some(approval_writer);
        let mut items = daemon.subscribe_turns();
        loop {
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
                // Answered here: the model never sees a slash command.
                "/help" | "/?" => {
                    eprintln!("{HELP}");
                    continue;
                }
                "/tools" => {
                    show_tools(&daemon, &id).await?;
                    continue;
                }
                _ => {}
            }
            let turn = daemon.run_turn(&id, text.to_owned());
            tokio::pin!(turn);
            // Items of earlier turns (or other sessions) are not this turn's.
            while !matches!(
                items.try_recv(),
                Err(TryRecvError::Empty | TryRecvError::Closed)
            ) {}
            let mut printer = StreamPrinter::default();
            let outcome = loop {
                tokio::select! {
                    biased;
                    item = items.recv() => match item {
                        Ok(item) if item.session == id => printer.show(item.event, &item.data),
                        Ok(_) => {}
                        Err(RecvError::Lagged(skipped)) => {
                            eprintln!("({skipped} pieces of the answer not shown: the terminal fell behind)");
                        }
                        Err(RecvError::Closed) => {}
                    },
                    outcome = &mut turn => break outcome,
                    line = lines.recv(), if approval_writer.is_some() => match line {
                        Some(answer) if interactive && !asking.load(Ordering::SeqCst) => {
                            eprintln!("(no approval is waiting; ignored: {answer})");
                        }
                        // A line typed during a turn answers the pending prompt.
                        Some(answer) => {
                            if let Some(writer) = approval_writer.as_mut() {
                                let _ = writeln!(writer, "{answer}");
                            }
                        }
                        // End of input: a waiting prompt reads its end too
                        // (and denies) instead of waiting out its timeout.
                        None => approval_writer = None,
                    },
                }
            };
            // The turn's task sent everything before it ended.
            while let Ok(item) = items.try_recv() {
                if item.session == id {
                    printer.show(item.event, &item.data);
                }
            }
            printer.end_line();
            match outcome {
                Ok(outcome) => {
                    // A model that does not stream: the answer comes whole.
                    if !printer.streamed_last {
                        println!("{}", outcome.reply);
                    }
                    if outcome.stop != quiver_agent::StopReason::Answer {
                        eprintln!("(turn ended: {:?})", outcome.stop);
                    }
                }
                Err(error) => eprintln!("error: {error}"),
            }
        }
        daemon.shutdown().await;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Prints a turn's answers on stdout as they stream in.
#[derive(Default)]
pub(crate) struct StreamPrinter {
    /// Text was printed since the last line end.
    open_line: bool,
    /// The last whole answer was printed as it streamed.
    pub(crate) streamed_last: bool,
    /// Text pieces of the answer being streamed.
    pieces: usize,
}

impl StreamPrinter {
    /// Shows a turn item (`message.delta`, `message.done`; others are not
    /// its business).
    pub(crate) fn show(&mut self, event: &str, data: &serde_json::Value) {
        use quiver_daemon::turn_stream::{MESSAGE_DELTA, MESSAGE_DONE};
        match event {
            MESSAGE_DELTA => {
                if let Some(text) = data["text"].as_str() {
                    print!("{text}");
                    let _ = std::io::stdout().flush();
                    self.open_line = true;
                    self.pieces += 1;
                }
            }
            MESSAGE_DONE => {
                self.end_line();
                self.streamed_last = self.pieces > 0;
                self.pieces = 0;
            }
            _ => {}
        }
    }

    /// Ends the line of text being streamed, if one is open.
    pub(crate) fn end_line(&mut self) {
        if self.open_line {
            println!();
            self.open_line = false;
        }
    }
}

async fn show_tools(daemon: &Daemon, id: &str) -> Result<()> {
    let live = daemon.session(id).await?;
    let assembly = daemon.assemble(&live.session, live.record.context_tokens);
    eprintln!(
        "tier {}: {} tools sent, {} deferred",
        assembly.tier() as u8,
        assembly.tools().len(),
        assembly.catalog().deferred_count()
    );
    for tool in assembly.tools() {
        if let Some(name) = tool["function"]["name"].as_str() {
            eprintln!("  {name}");
        }
    }
    Ok(())
}
