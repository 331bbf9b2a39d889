//! The stdio framing in front of rmcp: one JSON-RPC message per line.
//!
//! Why this exists: rmcp silently drops a line that is not JSON (so that two
//! peers cannot answer each other's garbage forever). JSON-RPC 2.0 asks for a
//! parse error (-32700, `id: null`), and a client that sent a broken line
//! deserves to hear why its request will never be answered. So stdin is read
//! here line by line (bounded), lines that are not JSON get that answer, and
//! the rest go on to rmcp through an in-memory pipe. rmcp's own answers come
//! back through a second pipe and are written to stdout whole, so a parse
//! error can never land in the middle of another message.

use serde_json::json;
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Longest message line accepted (rmcp's own limit).
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// Buffer of each in-memory pipe.
const PIPE: usize = 256 * 1024;

/// The pipe ends rmcp reads from and writes to, a flag that turns true
/// when the input ended (or failed), when the input last sent a line, and a
/// way to write a line of our own (a notice) between rmcp's answers.
pub struct Framed {
    pub to_rmcp: DuplexStream,
    pub from_rmcp: DuplexStream,
    pub eof: watch::Receiver<bool>,
    pub input_at: watch::Receiver<Instant>,
    pub notices: mpsc::UnboundedSender<String>,
}

/// Start the pump between `input`/`output` and rmcp.
pub fn spawn<R, W>(input: R, output: W, max_line: usize) -> Framed
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_in, mut feed) = tokio::io::duplex(PIPE);
    let (rmcp_out, answers) = tokio::io::duplex(PIPE);
    let (eof_tx, eof) = watch::channel(false);
    let (err_tx, err_rx) = mpsc::unbounded_channel::<String>();
    let (input_tx, input_at) = watch::channel(Instant::now());
    let notices = err_tx.clone();
    tokio::spawn(async move {
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = read_line(&mut input, &mut line, max_line).await;
            input_tx.send_replace(Instant::now());
            match read {
                Ok(Line::Eof) | Err(_) => break,
                Ok(Line::TooLong) => {
                    let _ = err_tx.send(error_line(
                        -32700,
                        &format!("Parse error: message longer than {max_line} bytes; it was dropped"),
                    ));
                }
                Ok(Line::Full) => {
                    let text = trim(&line);
                    if text.is_empty() {
                        continue;
                    }
                    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(text) {
                        let _ = err_tx.send(error_line(
                            -32700,
                            &format!("Parse error: not JSON ({e}); send one JSON-RPC message per line"),
                        ));
                        continue;
                    }
                    if feed.write_all(text).await.is_err() || feed.write_all(b"\n").await.is_err() {
                        break;
                    }
                }
            }
        }
        eof_tx.send_replace(true);
        // Dropping `feed` is rmcp's end of input.
    });
    tokio::spawn(write_out(answers, err_rx, output));
    Framed {
        to_rmcp: rmcp_in,
        from_rmcp: rmcp_out,
        eof,
        input_at,
        notices,
    }
}

enum Line {
    Full,
    TooLong,
    Eof,
}

/// Read one line into `buf` (without its newline), at most `max` bytes; a
/// longer line is skipped to its end.
async fn read_line<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    let n = (&mut *r).take(max as u64 + 1).read_until(b'\n', buf).await?;
    if n == 0 {
        return Ok(Line::Eof);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Line::Full);
    }
    if buf.len() <= max {
        // The last line, without a newline.
        return Ok(Line::Full);
    }
    // Skip to the end of the oversized line.
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(Line::TooLong);
        }
        match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Ok(Line::TooLong);
            }
            None => {
                let len = chunk.len();
                r.consume(len);
            }
        }
    }
}

fn trim(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(line)
}

/// A JSON-RPC error answer with no id, as one line.
fn error_line(code: i32, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}}).to_string()
}

/// Copy rmcp's answers and our parse errors to `output`, whole lines at a
/// time, until rmcp is gone; then close `output` (for a socket, the peer
/// reads the end even while our reading half still waits for input).
async fn write_out<W: AsyncWrite + Unpin>(
    answers: DuplexStream,
    mut errors: mpsc::UnboundedReceiver<String>,
    mut output: W,
) {
    let mut answers = BufReader::new(answers);
    let mut line = Vec::new();
    let (mut answers_open, mut errors_open) = (true, true);
    while answers_open && errors_open {
        tokio::select! {
            r = answers.read_until(b'\n', &mut line), if answers_open => {
                match r {
                    Ok(0) | Err(_) => answers_open = false,
                    Ok(_) => {
                        if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                            return;
                        }
                        line.clear();
                    }
                }
            }
            e = errors.recv(), if errors_open => {
                let Some(e) = e else {
                    errors_open = false;
                    continue;
                };
                if output.write_all(format!("{e}\n").as_bytes()).await.is_err() || output.flush().await.is_err() {
                    return;
                }
            }
        }
    }
    // One side is done: what the other already has still goes out.
    if answers_open {
        while answers.read_until(b'\n', &mut line).await.is_ok_and(|n| n > 0) {
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                return;
            }
            line.clear();
        }
    }
    while let Ok(e) = errors.try_recv() {
        if output.write_all(format!("{e}\n").as_bytes()).await.is_err() {
            return;
        }
    }
    let _ = output.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_lines_get_parse_errors_and_good_lines_pass_through() {
        let input: &[u8] = b"{\"a\":1}\nnot json\n\n{\"b\":2}\r\n";
        let (out_w, mut out_r) = tokio::io::duplex(4096);
        let mut f = spawn(input, out_w, 64);
        let mut got = String::new();
        f.to_rmcp.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "{\"a\":1}\n{\"b\":2}\n");
        assert!(*f.eof.wait_for(|e| *e).await.unwrap());
        drop(f.from_rmcp);
        let mut out = String::new();
        out_r.read_to_string(&mut out).await.unwrap();
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["error"]["code"], -32700);
        assert!(v["id"].is_null());
    }

    #[tokio::test]
    async fn an_oversized_line_is_refused_and_the_next_one_served() {
        let long = format!("[{}]\n{{\"ok\":true}}\n", "1,".repeat(100) + "1");
        let (out_w, mut out_r) = tokio::io::duplex(4096);
        let mut f = spawn(std::io::Cursor::new(long.into_bytes()), out_w, 64);
        let mut got = String::new();
        f.to_rmcp.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "{\"ok\":true}\n");
        drop(f.from_rmcp);
        let mut out = String::new();
        out_r.read_to_string(&mut out).await.unwrap();
        assert!(
            out.contains("-32700") && out.contains("longer than 64 bytes"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn the_output_closes_once_rmcp_is_gone_even_while_input_stays_open() {
        let (_keep_input_open, input) = tokio::io::duplex(64);
        let (out_w, mut out_r) = tokio::io::duplex(4096);
        let f = spawn(input, out_w, 64);
        let mut from_rmcp = f.from_rmcp;
        from_rmcp.write_all(b"{\"answer\":1}\n").await.unwrap();
        drop(from_rmcp);
        let mut out = String::new();
        tokio::time::timeout(std::time::Duration::from_secs(5), out_r.read_to_string(&mut out))
            .await
            .expect("output closed")
            .unwrap();
        assert_eq!(out, "{\"answer\":1}\n");
    }
}
