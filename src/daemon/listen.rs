//! The socket's connection loop: every accepted connection is served with
//! hyper's HTTP/1 server directly (not `axum::serve`) so that idle
//! connections are bounded.
//!
//! Why: `axum::serve` sets no timer, so a client that connects and sends
//! nothing, or sends half a request line, holds a connection and its task
//! forever. Here hyper's header-read timeout runs whenever a connection waits
//! for a request: idle keep-alive connections and unfinished requests are
//! closed after [`IDLE`]. A request being answered is not waiting for a head,
//! so long polls (`wait`, `foreground`) and SSE follows stream as long as they
//! need. Request bodies are bounded by the router's `DefaultBodyLimit`.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::UnixListener;
use tokio::task::JoinSet;

/// How long a connection may wait for (the rest of) a request head.
pub const IDLE: Duration = Duration::from_secs(60);

/// Serve `router` on `listener` until `shutdown` completes; then let the
/// connections finish the request they are on and return when all are closed.
pub async fn serve(listener: UnixListener, router: Router, shutdown: impl Future<Output = ()>) {
    let (closing_tx, closing_rx) = tokio::sync::watch::channel(false);
    let mut conns = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((s, _)) => s,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let service = TowerToHyperService::new(router.clone());
                let mut closing = closing_rx.clone();
                conns.spawn(async move {
                    let mut builder = http1::Builder::new();
                    builder.timer(TokioTimer::new()).header_read_timeout(IDLE).keep_alive(true);
                    // Upgrades: `POST /v1/mcp` turns the connection into an MCP session.
                    let conn = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
                    let mut conn = std::pin::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => return,
                        _ = closing.wait_for(|c| *c) => conn.as_mut().graceful_shutdown(),
                    }
                    let _ = conn.await;
                });
            }
            // Reap finished connection tasks as they end.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let _ = closing_tx.send(true);
    while conns.join_next().await.is_some() {}
}
