//! `berth mcp` as a client of the manager serving its instance: open an MCP
//! session on the instance socket (`POST /v1/mcp`, upgraded to `berth-mcp`)
//! and pipe stdin to it and its answers to stdout, byte for byte. The
//! request carries our context (cwd, `BERTH_*` variables): the session's jobs
//! run under our project, as they would with a manager we ran ourselves.
//!
//! All MCP logic runs in the serving manager (the daemon, or the `berth mcp`
//! that hosts the instance), so every client shares its cap, event log and
//! job list. The session is this connection: at the end of stdin the write
//! side is closed, the manager stops the session's jobs and closes the
//! connection once their answers are out, and we exit. SIGINT or SIGTERM
//! drops the connection, which ends the session the same way.

#![deny(clippy::print_stdout, clippy::print_stderr)]

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::header;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;

use super::ToolSet;
use super::session::Session;
use crate::api::{ErrorBody, MCP_UPGRADE, McpAttachQuery, socket_path};
use crate::config::Config;
use crate::error::{Error, Result};

/// Serve the MCP client on stdio through the manager on the instance socket,
/// until stdin ends (and the manager closed the session) or a signal arrives.
pub async fn run(config: &Config, tools: ToolSet, me: &Session) -> Result<()> {
    let upgraded = open(config, tools, me).await?;
    let (from_manager, to_manager) = tokio::io::split(TokioIo::new(upgraded));
    let mut upstream = tokio::spawn(async move {
        let mut to_manager = to_manager;
        pump(tokio::io::stdin(), &mut to_manager).await;
        // The manager reads the end of our input as the end of the session.
        let _ = to_manager.shutdown().await;
        // Keep the connection's write half alive until the manager closes it.
        std::future::pending::<()>().await;
    });
    let mut stdout = tokio::io::stdout();
    tokio::select! {
        _ = pump(from_manager, &mut stdout) => tracing::info!("the manager closed the MCP session"),
        _ = crate::teardown::signals() => tracing::info!("signal received; leaving the MCP session"),
        _ = &mut upstream => {}
    }
    upstream.abort();
    Ok(())
}

/// Copy `from` to `to` until `from` ends or either side fails, flushing each chunk.
async fn pump<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(mut from: R, to: &mut W) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).await.is_err() || to.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Ask the manager on the instance socket for an MCP session.
async fn open(config: &Config, tools: ToolSet, me: &Session) -> Result<hyper::upgrade::Upgraded> {
    let socket = socket_path(config);
    let fail = |message: String| Error::McpAttach {
        socket: socket.clone(),
        message,
    };
    let stream = UnixStream::connect(&socket)
        .await
        .map_err(|e| fail(format!("cannot connect ({e}); is it still running?")))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| fail(format!("handshake failed ({e})")))?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    let query = McpAttachQuery {
        cwd: me.cwd.clone(),
        env: (!me.env.is_empty())
            .then(|| serde_json::to_string(&me.env).expect("a map of strings serializes")),
        tools: Some(tools.name().into()),
    };
    let query = serde_urlencoded::to_string(&query).map_err(|e| fail(format!("bad query ({e})")))?;
    let req = Request::post(format!("/v1/mcp?{query}"))
        .header(header::HOST, "berth")
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, MCP_UPGRADE)
        .body(Empty::<Bytes>::new())
        .expect("request parts are valid");
    let res = sender
        .send_request(req)
        .await
        .map_err(|e| fail(format!("the request failed ({e}); is it shutting down?")))?;
    if res.status() != StatusCode::SWITCHING_PROTOCOLS {
        let status = res.status();
        if status == StatusCode::NOT_FOUND {
            return Err(fail(
                "this manager cannot host MCP sessions (an older berth?): restart it with `berth down` and `berth up`"
                    .into(),
            ));
        }
        let body = res
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Err(match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => fail(e.error.message),
            Err(_) => fail(format!("{status}: {}", String::from_utf8_lossy(&body).trim())),
        });
    }
    hyper::upgrade::on(res)
        .await
        .map_err(|e| fail(format!("the upgrade failed ({e})")))
}
