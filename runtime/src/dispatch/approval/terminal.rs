//! An interactive approver: prints the request on a terminal and reads
//! `y` (approve), `s` (approve this tool for the session) or anything else
//! (deny). Prompts are asked one at a time on tokio's blocking pool, so a
//! call waiting at the prompt blocks no other call; calls of other tools
//! and sessions keep running.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex, PoisonError};

use super::{ApprovalRequest, Approver, Decision};
use crate::dispatch::BoxFuture;

type Terminal = (Box<dyn BufRead + Send>, Box<dyn Write + Send>);

/// Asks on a terminal (or any reader and writer).
#[derive(Clone)]
pub struct TerminalApprover {
    terminal: Arc<Mutex<Terminal>>,
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
        TerminalApprover {
            terminal: Arc::new(Mutex::new((Box::new(input), Box::new(output)))),
        }
    }

    /// Prompts on stderr and reads stdin.
    pub fn stdio() -> TerminalApprover {
        TerminalApprover::new(std::io::BufReader::new(std::io::stdin()), std::io::stderr())
    }
}

/// Reads one answer; a read error or end of input denies.
fn ask(terminal: &Mutex<Terminal>, request: &ApprovalRequest) -> Decision {
    let mut guard = terminal.lock().unwrap_or_else(PoisonError::into_inner);
    let (input, output) = &mut *guard;
    let via = if request.via_bridge {
        " via tool_call"
    } else {
        ""
    };
    let prompt = writeln!(
        output,
        "approve `{}`{via} for session {}?\n  arguments: {}\n  digest: {}\n[y] yes  [s] yes for this session  [N] no: ",
        request.tool, request.session, request.arguments, request.digest
    )
    .and_then(|()| output.flush());
    if prompt.is_err() {
        return Decision::Deny {
            reason: "the approval prompt could not be shown".to_owned(),
        };
    }
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(n) if n > 0 => match line.trim() {
            "y" | "Y" | "yes" => Decision::Approve,
            "s" | "S" | "session" => Decision::ApproveForSession,
            _ => Decision::Deny {
                reason: "denied at the terminal".to_owned(),
            },
        },
        _ => Decision::Deny {
            reason: "no answer at the terminal".to_owned(),
        },
    }
}

impl Approver for TerminalApprover {
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        let terminal = self.terminal.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || ask(&terminal, &request))
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
}
