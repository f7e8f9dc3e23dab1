//! The gateway's stdio transport: rmcp's line transport behind a reader
//! that answers a line that is not JSON with a `-32700` parse error (rmcp
//! drops such lines without a word, leaving the client waiting), and a
//! writer that puts rmcp's messages and those answers on stdout whole
//! lines at a time, one flush per message.

use std::sync::Arc;

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinHandle;

use crate::jsonrpc;

/// The longest line read, as rmcp's line transport takes it; a longer one
/// is dropped with an error in the log (there is no id to answer).
pub const MAX_LINE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// Room in the pipes between the filter and rmcp.
const PIPE_BYTES: usize = 256 * 1024;

/// A running stdio transport: hand [`StdioTransport::rmcp`] to rmcp's
/// `serve`, and await [`StdioTransport::finish`] after the session ends so
/// the last answers reach stdout.
#[derive(Debug)]
pub struct StdioTransport {
    rmcp: Option<(DuplexStream, DuplexStream)>,
    writer: JoinHandle<()>,
    reader: JoinHandle<()>,
}

impl StdioTransport {
    /// Filters `input` into rmcp and rmcp's output onto `output`.
    pub fn new<R, W>(input: R, output: W) -> StdioTransport
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (rmcp_in, filter_out) = tokio::io::duplex(PIPE_BYTES);
        let (rmcp_out, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
        let (errors, error_lines) = mpsc::channel::<String>(64);
        let output = Arc::new(Mutex::new(output));
        let reader = tokio::spawn(filter_input(input, filter_out, errors));
        let writer = tokio::spawn(write_output(from_rmcp, error_lines, output));
        StdioTransport {
            rmcp: Some((rmcp_in, rmcp_out)),
            writer,
            reader,
        }
    }

    /// The process's stdin and stdout.
    pub fn stdio() -> StdioTransport {
        StdioTransport::new(tokio::io::stdin(), tokio::io::stdout())
    }

    /// The (read, write) pair rmcp serves on; `None` after the first call.
    pub fn rmcp(&mut self) -> Option<(DuplexStream, DuplexStream)> {
        self.rmcp.take()
    }

    /// Waits (at most `wait`) for what rmcp wrote to reach the output.
    pub async fn finish(self, wait: std::time::Duration) {
        self.reader.abort();
        let _ = tokio::time::timeout(wait, self.writer).await;
    }
}

/// Copies `input` to rmcp line by line; a line that is not JSON is
/// answered on `errors` instead. Ends at end of input (rmcp then sees its
/// end too) or when rmcp stops reading.
async fn filter_input<R>(input: R, mut to_rmcp: DuplexStream, errors: mpsc::Sender<String>)
where
    R: AsyncRead + Unpin,
{
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut input)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => {
                tracing::error!(%error, "cannot read stdin");
                break;
            }
        }
        if line.len() > MAX_LINE_BYTES && line.last() != Some(&b'\n') {
            tracing::error!(
                max_line_bytes = MAX_LINE_BYTES,
                "a message on stdin is longer than the longest line taken; dropping it"
            );
            if skip_line(&mut input).await.is_err() {
                break;
            }
            continue;
        }
        let text = trim_line(&line);
        if text.is_empty() {
            continue;
        }
        if jsonrpc::is_not_json(text) {
            let answer = jsonrpc::unreadable_message(text)
                .map(|(id, error)| jsonrpc::error_response(id, &error));
            if let Some(answer) = answer {
                tracing::debug!(%answer, "a line on stdin is not JSON");
                if errors.send(answer).await.is_err() {
                    break;
                }
            }
            continue;
        }
        if !line.ends_with(b"\n") {
            line.push(b'\n');
        }
        if to_rmcp.write_all(&line).await.is_err() {
            break;
        }
    }
    let _ = to_rmcp.shutdown().await;
}

/// Reads to the end of an overlong line.
async fn skip_line<R: AsyncRead + Unpin>(input: &mut BufReader<R>) -> std::io::Result<()> {
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        if let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            input.consume(end + 1);
            return Ok(());
        }
        let all = buffer.len();
        input.consume(all);
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        &[]
    } else {
        line
    }
}

/// Writes rmcp's output and the filter's answers to `output`, whole lines
/// only, flushing after each (a client waits on each answer).
async fn write_output<W>(
    from_rmcp: DuplexStream,
    mut errors: mpsc::Receiver<String>,
    output: Arc<Mutex<W>>,
) where
    W: AsyncWrite + Unpin,
{
    let mut from_rmcp = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    let mut errors_open = true;
    loop {
        line.clear();
        tokio::select! {
            read = from_rmcp.read_until(b'\n', &mut line) => {
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            answer = errors.recv(), if errors_open => {
                match answer {
                    Some(answer) => {
                        line.extend_from_slice(answer.as_bytes());
                        line.push(b'\n');
                    }
                    None => {
                        errors_open = false;
                        continue;
                    }
                }
            }
        }
        let mut output = output.lock().await;
        if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::ServiceExt;
    use serde_json::{Value, json};

    #[derive(Clone)]
    struct Quiet;
    impl rmcp::ServerHandler for Quiet {}

    #[tokio::test]
    async fn lines_that_are_not_json_get_a_parse_error_and_the_session_goes_on() {
        let (mut client, server_side) = tokio::io::duplex(64 * 1024);
        let (server_in, server_out) = tokio::io::split(server_side);
        let mut transport = StdioTransport::new(server_in, server_out);
        let running = Quiet.serve(transport.rmcp().unwrap());
        let input = concat!(
            "{not json\n",
            "\n",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n",
        );
        client.write_all(input.as_bytes()).await.unwrap();
        let _running = running.await.unwrap();
        let mut seen = Vec::new();
        let mut buffer = vec![0u8; 64 * 1024];
        while seen.iter().filter(|b| **b == b'\n').count() < 2 {
            let n = client.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the transport ended early");
            seen.extend_from_slice(&buffer[..n]);
        }
        let lines: Vec<Value> = String::from_utf8(seen)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["error"]["code"], json!(-32700), "{lines:?}");
        assert_eq!(lines[0]["id"], Value::Null);
        assert_eq!(lines[1]["id"], json!(1), "{lines:?}");
        assert!(lines[1]["result"]["protocolVersion"].is_string());
    }
}
