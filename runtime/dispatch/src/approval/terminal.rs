//! An interactive approver: prints the request on a terminal and reads
//! `y` (approve), `s` (approve this tool for the session) or anything else
//! (deny). Prompts are asked one at a time on tokio's blocking pool, so a
//! call waiting at the prompt blocks no other call; calls of other tools
//! and sessions keep running.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{ApprovalRequest, Approver, Decision};
use crate::BoxFuture;

/// How often a waiting prompt checks whether its call stopped waiting.
const CANCEL_POLL: Duration = Duration::from_millis(50);

struct Terminal {
    /// Lines read from the input by a reader thread of their own, so that a
    /// prompt whose call stopped waiting (approval timeout) can stop reading.
    lines: Receiver<String>,
    output: Box<dyn Write + Send>,
    /// A prompt was abandoned: lines typed since answer it, not the next one.
    abandoned: bool,
}

/// Asks on a terminal (or any reader and writer).
#[derive(Clone)]
pub struct TerminalApprover {
    terminal: Arc<Mutex<Terminal>>,
    asking: Arc<AtomicBool>,
}

impl std::fmt::Debug for TerminalApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalApprover").finish_non_exhaustive()
    }
}

impl TerminalApprover {
    /// Reads answers from `input` and writes prompts to `output`.
    pub fn new(
        input: impl BufRead + Send + 'static,
        output: impl Write + Send + 'static,
    ) -> TerminalApprover {
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in input.lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        TerminalApprover {
            terminal: Arc::new(Mutex::new(Terminal {
                lines,
                output: Box::new(output),
                abandoned: false,
            })),
            asking: Arc::new(AtomicBool::new(false)),
        }
    }

    /// True while a prompt is shown and waiting for its answer: a reader
    /// sharing the terminal with other input (`quiver chat`) forwards lines
    /// to the approver only then, so a line typed ahead answers nothing.
    pub fn asking(&self) -> Arc<AtomicBool> {
        self.asking.clone()
    }

    /// Prompts on stderr and reads stdin.
    pub fn stdio() -> TerminalApprover {
        TerminalApprover::new(std::io::BufReader::new(std::io::stdin()), std::io::stderr())
    }
}

/// Reads one answer; end of input denies, and so does the call giving up
/// waiting (`cancelled`), which also discards any late answer to it.
fn ask(
    terminal: &Mutex<Terminal>,
    request: &ApprovalRequest,
    cancelled: &AtomicBool,
    asking: &AtomicBool,
) -> Decision {
    let mut terminal = terminal.lock().unwrap_or_else(PoisonError::into_inner);
    if terminal.abandoned {
        while terminal.lines.try_recv().is_ok() {}
        terminal.abandoned = false;
    }
    let via = if request.via_bridge {
        " via tool_call"
    } else {
        ""
    };
    let prompt = writeln!(
        terminal.output,
        "approve `{}`{via} for session {}?\n  arguments: {}\n  digest: {}\n[y] yes  [s] yes for this session  [N] no: ",
        request.tool, request.session, request.arguments, request.digest
    )
    .and_then(|()| terminal.output.flush());
    if prompt.is_err() {
        return Decision::Deny {
            reason: "the approval prompt could not be shown".to_owned(),
        };
    }
    asking.store(true, Ordering::SeqCst);
    let _answered = ClearOnDrop(asking);
    loop {
        match terminal.lines.recv_timeout(CANCEL_POLL) {
            Ok(line) => {
                return match line.trim() {
                    "y" | "Y" | "yes" => Decision::Approve,
                    "s" | "S" | "session" => Decision::ApproveForSession,
                    _ => Decision::Deny {
                        reason: "denied at the terminal".to_owned(),
                    },
                };
            }
            Err(RecvTimeoutError::Timeout) if cancelled.load(Ordering::SeqCst) => {
                terminal.abandoned = true;
                let _ = writeln!(
                    terminal.output,
                    "(no answer in time: `{}` was not approved)",
                    request.tool
                );
                return Decision::Deny {
                    reason: "no answer before the approval timed out".to_owned(),
                };
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Decision::Deny {
                    reason: "no answer at the terminal".to_owned(),
                };
            }
        }
    }
}

/// Clears its flag when dropped: the prompt got its answer or gave up.
struct ClearOnDrop<'a>(&'a AtomicBool);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Sets its flag when dropped: the approval future was dropped (timed out).
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Approver for TerminalApprover {
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        let terminal = self.terminal.clone();
        let asking = self.asking.clone();
        Box::pin(async move {
            let cancelled = Arc::new(AtomicBool::new(false));
            let _guard = CancelOnDrop(cancelled.clone());
            tokio::task::spawn_blocking(move || ask(&terminal, &request, &cancelled, &asking))
                .await
                .unwrap_or(Decision::Deny {
                    reason: "the approval prompt failed".to_owned(),
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn answers_are_read_in_order() {
        let out = Shared::default();
        let approver =
            TerminalApprover::new(std::io::Cursor::new(b"y\ns\nno\n".to_vec()), out.clone());
        let request = ApprovalRequest {
            call_id: 1,
            session: "s1".into(),
            tool: "mcp_github_create_issue".into(),
            via_bridge: true,
            arguments: json!({"title": "t"}),
            digest: "d".into(),
        };
        assert_eq!(approver.decide(request.clone()).await, Decision::Approve);
        assert_eq!(
            approver.decide(request.clone()).await,
            Decision::ApproveForSession
        );
        assert!(matches!(
            approver.decide(request.clone()).await,
            Decision::Deny { .. }
        ));
        assert!(matches!(
            approver.decide(request).await,
            Decision::Deny { .. }
        ));
        let shown = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(
            shown.contains("approve `mcp_github_create_issue` via tool_call for session s1?"),
            "{shown}"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn asking_is_true_only_while_a_prompt_waits() {
        let (input, mut writer) = std::io::pipe().unwrap();
        let approver = TerminalApprover::new(std::io::BufReader::new(input), Shared::default());
        let asking = approver.asking();
        assert!(!asking.load(Ordering::SeqCst));
        let pending = tokio::spawn({
            let approver = approver.clone();
            async move { approver.decide(request()).await }
        });
        while !asking.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        writeln!(writer, "y").unwrap();
        assert_eq!(pending.await.unwrap(), Decision::Approve);
        assert!(!asking.load(Ordering::SeqCst));
    }

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            call_id: 1,
            session: "s1".into(),
            tool: "mcp_github_create_issue".into(),
            via_bridge: false,
            arguments: json!({}),
            digest: "d".into(),
        }
    }

    #[tokio::test]
    async fn after_a_timeout_the_next_answer_reaches_the_next_prompt() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let approver = TerminalApprover::new(std::io::BufReader::new(reader), Shared::default());
        let first =
            tokio::time::timeout(Duration::from_millis(100), approver.decide(request())).await;
        assert!(first.is_err(), "nobody answered the first prompt");
        let second = tokio::spawn({
            let approver = approver.clone();
            async move { approver.decide(request()).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        writer.write_all(b"y\n").unwrap();
        let decided = tokio::time::timeout(Duration::from_secs(5), second).await;
        assert_eq!(decided.unwrap().unwrap(), Decision::Approve);
    }

    #[tokio::test]
    async fn a_late_answer_does_not_answer_the_next_prompt() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let approver = TerminalApprover::new(std::io::BufReader::new(reader), Shared::default());
        let first =
            tokio::time::timeout(Duration::from_millis(100), approver.decide(request())).await;
        assert!(first.is_err());
        // A late "y" meant for the first prompt must not approve the next one.
        writer.write_all(b"y\n").unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let second = tokio::spawn({
            let approver = approver.clone();
            async move { approver.decide(request()).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        writer.write_all(b"no\n").unwrap();
        let decided = tokio::time::timeout(Duration::from_secs(5), second).await;
        assert!(matches!(decided.unwrap().unwrap(), Decision::Deny { .. }));
    }
}
