//! The socket's connection loop: every accepted connection is served with
//! hyper's HTTP/1 server directly (not `axum::serve`) so that connections
//! are bounded, in time and in number.
//!
//! In time: `axum::serve` sets no timer, so a client that connects and sends
//! nothing, or sends half a request line, holds a connection and its task
//! forever. Here hyper's header-read timeout runs whenever a connection waits
//! for a request: idle keep-alive connections and unfinished requests are
//! closed after [`IDLE`]. A request being answered is not waiting for a head,
//! so long polls (`wait`, `foreground`) and SSE follows stream as long as they
//! need. Request bodies are bounded by the router's `DefaultBodyLimit`.
//!
//! In number: each connection holds a file descriptor, and a process that
//! runs out of them can accept nothing, health checks included (the red
//! team's 19,990 idle connections). At most [`connection_cap`] connections
//! are served at once, well below the process's descriptor limit (jobs'
//! pipes, containers' streams, the store and MCP sessions need the rest).
//! A connection over the cap is still accepted (so the backlog drains and
//! the descriptor is ours to close), and then the longest-idle connection
//! (one waiting for a request, not one being answered) is closed to make
//! room, the loop waiting the microseconds until its socket is closed
//! (meanwhile new connections wait in the listen backlog, holding no
//! descriptor of ours); when every connection is busy answering, the new
//! one gets one clear `503` and is closed. An upgraded connection (an MCP session) leaves
//! the count: sessions have their own bound (`mcp/session.rs`).
//!
//! The `503` is followed by a lingering close, as web servers do: the
//! refused connection's write side is shut, and what the client sends is
//! read and dropped for up to [`LINGER`] before the socket is closed. Closed
//! at once, a client still writing its request would get `EPIPE` (or its
//! read `ECONNRESET`, the kernel's answer to a socket closed with unread
//! data) instead of the answer waiting in its buffer. At most [`LINGERING`]
//! refusals linger at once; beyond that they are closed at once.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

/// How long a connection may wait for (the rest of) a request head.
pub const IDLE: Duration = Duration::from_secs(60);
/// Most connections served at once, whatever the descriptor limit allows.
pub const MAX_CONNECTIONS: usize = 1024;
/// Fewest connections served at once, however low the descriptor limit.
const MIN_CONNECTIONS: usize = 16;
/// Most refused connections drained at once before they are closed.
const LINGERING: usize = 16;
/// How long a refused connection is drained: long enough for a client to
/// send its request and read the answer, short enough that refusals do
/// not hold descriptors.
const LINGER: Duration = Duration::from_secs(2);
/// Most bytes read from a refused connection before it is closed.
const LINGER_BYTES: usize = 64 * 1024;

/// How many connections are served at once: a quarter of the process's
/// descriptor limit (1024 by default on most systems: 256 connections),
/// between [`MIN_CONNECTIONS`] and [`MAX_CONNECTIONS`].
pub fn connection_cap() -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    usize::try_from(soft / 4)
        .unwrap_or(MAX_CONNECTIONS)
        .clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
}

/// What the accept loop knows of one connection.
struct Conn {
    /// A request is being answered (from its head until its body is sent).
    busy: AtomicBool,
    /// When it last became idle, in ms since the loop started.
    idle_since: AtomicU64,
    /// Closes the connection at once (it is the longest idle, and room is needed).
    evict: CancellationToken,
}

/// The connections being served, by number. A connection leaves the
/// table only once its socket is closed, so the table's size is the
/// descriptors connections hold.
struct Table {
    started: Instant,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    /// A connection left the table.
    left: tokio::sync::Notify,
}

/// What [`Table::make_room`] found.
#[derive(Debug, PartialEq, Eq)]
enum Room {
    Free,
    /// The longest-idle connection is being closed: wait for it to leave.
    Closing,
    /// Every connection is answering a request.
    AllBusy,
}

impl Table {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Room for one more connection: there is, or the longest-idle
    /// connection is (now) being closed for it, or all are busy.
    fn make_room(&self, cap: usize) -> Room {
        let conns = self.conns.lock().unwrap();
        if conns.len() < cap {
            return Room::Free;
        }
        if conns.values().any(|c| c.evict.is_cancelled()) {
            return Room::Closing;
        }
        let victim = conns
            .values()
            .filter(|c| !c.busy.load(Ordering::SeqCst))
            .min_by_key(|c| c.idle_since.load(Ordering::SeqCst));
        match victim {
            Some(c) => {
                c.evict.cancel();
                Room::Closing
            }
            None => Room::AllBusy,
        }
    }

    /// Wait until there is room for one more connection (false: all busy).
    async fn room(&self, cap: usize) -> bool {
        loop {
            let left = self.left.notified();
            let mut left = std::pin::pin!(left);
            left.as_mut().enable();
            match self.make_room(cap) {
                Room::Free => return true,
                Room::AllBusy => return false,
                Room::Closing => left.await,
            }
        }
    }
}

/// A connection's place in the table, given up when it is dropped: after
/// the connection's socket (declared before it, so dropped after it).
struct Place {
    n: u64,
    table: Arc<Table>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.table.conns.lock().unwrap().remove(&self.n);
        self.table.left.notify_waiters();
    }
}

/// Marks a connection busy while a request is answered; idle again (from
/// now) when the answer's body is done or dropped.
struct Busy {
    conn: Arc<Conn>,
    table: Arc<Table>,
}

impl Busy {
    fn enter(conn: &Arc<Conn>, table: &Arc<Table>) -> Busy {
        conn.busy.store(true, Ordering::SeqCst);
        Busy {
            conn: conn.clone(),
            table: table.clone(),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conn.idle_since.store(self.table.now_ms(), Ordering::SeqCst);
        self.conn.busy.store(false, Ordering::SeqCst);
    }
}

/// An answer's body that keeps its connection busy until it is sent.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = <Body as hyper::body::Body>::Data;
    type Error = <Body as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The one answer to a connection over the cap while every connection is busy.
fn refusal(cap: usize) -> Vec<u8> {
    let body = serde_json::json!({"error": {
        "code": "too_many_connections",
        "message": format!("berth: all {cap} connections this manager serves at once are busy answering; close some (log follows, waits) or try again"),
    }})
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serve `router` on `listener` until `closing` is cancelled; then let the
/// connections finish the request they are on and return when all are closed.
pub async fn serve(listener: UnixListener, router: Router, closing: CancellationToken) {
    tracing::debug!(cap = connection_cap(), "serving connections");
    let table = Arc::new(Table {
        started: Instant::now(),
        conns: Mutex::new(HashMap::new()),
        left: tokio::sync::Notify::new(),
    });
    let mut conns = JoinSet::new();
    let lingering = Arc::new(Semaphore::new(LINGERING));
    let mut next = 0u64;
    loop {
        tokio::select! {
            _ = closing.cancelled() => break,
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
                // Looked up each time: the descriptor limit can change under us.
                let cap = connection_cap();
                // Evictions take microseconds; meanwhile new connections
                // wait in the listen backlog, holding no descriptor of ours.
                if !table.room(cap).await {
                    tracing::warn!(cap, "connection refused: every connection is busy");
                    match lingering.clone().try_acquire_owned() {
                        Ok(permit) => {
                            conns.spawn(refuse(stream, cap, permit, closing.clone()));
                        }
                        Err(_) => refuse_now(stream, cap),
                    }
                    continue;
                }
                next += 1;
                let conn = Arc::new(Conn {
                    busy: AtomicBool::new(false),
                    idle_since: AtomicU64::new(table.now_ms()),
                    evict: CancellationToken::new(),
                });
                table.conns.lock().unwrap().insert(next, conn.clone());
                conns.spawn(serve_one(stream, next, conn, table.clone(), router.clone(), closing.clone()));
            }
            // Reap finished connection tasks as they end.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// Answer a connection over the cap with one line and close it at once
/// (too many refusals are lingering already). The socket is new, so its
/// buffer takes the few hundred bytes without waiting.
fn refuse_now(stream: UnixStream, cap: usize) {
    let _ = stream.try_write(&refusal(cap));
}

/// Answer a connection over the cap with one line, shut its write side,
/// and drain what the client sends (its request) until it closes, for at
/// most [`LINGER`] and [`LINGER_BYTES`]: the client can finish writing and
/// read the answer before the socket is closed.
async fn refuse(
    mut stream: UnixStream,
    cap: usize,
    _permit: OwnedSemaphorePermit,
    closing: CancellationToken,
) {
    if stream.write_all(&refusal(cap)).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let drain = async {
        let mut buf = [0u8; 4096];
        let mut read = 0;
        while read < LINGER_BYTES {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    };
    tokio::select! {
        _ = tokio::time::timeout(LINGER, drain) => {}
        _ = closing.cancelled() => {}
    }
}

/// Serve one connection until it closes, is evicted, or the server shuts down.
async fn serve_one(
    stream: UnixStream,
    n: u64,
    conn: Arc<Conn>,
    table: Arc<Table>,
    router: Router,
    closing: CancellationToken,
) {
    let _place = Place {
        n,
        table: table.clone(),
    };
    let evict = conn.evict.clone();
    let service = {
        let (conn, table) = (conn.clone(), table.clone());
        hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let busy = Busy::enter(&conn, &table);
            let mut router = router.clone();
            async move {
                let answer = router.call(req).await?;
                Ok::<_, Infallible>(answer.map(|body| Body::new(Tracked { body, _busy: busy })))
            }
        })
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE)
        .keep_alive(true);
    // Upgrades: `POST /v1/mcp` turns the connection into an MCP session.
    let served = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let mut served = std::pin::pin!(served);
    let graceful = tokio::select! {
        _ = served.as_mut() => false,
        // Dropping the connection closes it: it was the longest idle.
        _ = evict.cancelled() => false,
        _ = closing.cancelled() => true,
    };
    if graceful {
        served.as_mut().graceful_shutdown();
        let _ = served.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(busy: bool, idle_since: u64) -> Arc<Conn> {
        Arc::new(Conn {
            busy: AtomicBool::new(busy),
            idle_since: AtomicU64::new(idle_since),
            evict: CancellationToken::new(),
        })
    }

    /// At the cap, the longest-idle connection is closed for a new one;
    /// busy ones never are, and when all are busy there is no room.
    #[test]
    fn room_is_made_by_closing_the_longest_idle_connection() {
        let table = Table {
            started: Instant::now(),
            conns: Mutex::new(HashMap::new()),
            left: tokio::sync::Notify::new(),
        };
        let (old, newer, busy) = (conn(false, 5), conn(false, 9), conn(true, 1));
        for (n, c) in [(1, &old), (2, &newer), (3, &busy)] {
            table.conns.lock().unwrap().insert(n, c.clone());
        }
        assert_eq!(table.make_room(4), Room::Free, "under the cap");
        assert_eq!(table.make_room(3), Room::Closing);
        assert!(old.evict.is_cancelled() && !newer.evict.is_cancelled());
        assert_eq!(table.make_room(3), Room::Closing, "until it has left");
        assert!(!newer.evict.is_cancelled(), "one at a time");
        table.conns.lock().unwrap().remove(&1);
        assert_eq!(table.make_room(3), Room::Free);
        assert_eq!(table.make_room(2), Room::Closing);
        assert!(newer.evict.is_cancelled());
        table.conns.lock().unwrap().remove(&2);
        assert_eq!(table.make_room(1), Room::AllBusy, "the busy one stays");
        assert!(!busy.evict.is_cancelled());
        assert!(
            String::from_utf8(refusal(3))
                .unwrap()
                .starts_with("HTTP/1.1 503 ")
        );
    }

    #[test]
    fn the_cap_is_a_quarter_of_the_descriptor_limit_within_bounds() {
        let cap = connection_cap();
        assert!((MIN_CONNECTIONS..=MAX_CONNECTIONS).contains(&cap), "{cap}");
    }
}
