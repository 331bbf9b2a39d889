//! The scoped engine's HTTP plumbing (the job's socket is served in
//! `handle.rs`, upgrades on: attach and exec hand the connection over):
//! each forwarded request sent to the engine's own socket on a
//! connection of its own, streaming both ways (a pull's progress, a
//! follow of logs, an archive) or, for attach and exec, splicing the two
//! upgraded connections together.
//!
//! Bounds: [`MAX_CONNECTIONS`] connections at once (more are closed at
//! once), a header must arrive within [`HEADER_LIMIT`], and a body berth
//! reads to check is at most [`MAX_BODY`]. Everything a connection runs is
//! tracked by the scope and ends when the job does.

use std::convert::Infallible;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST, UPGRADE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

/// Most connections one job may hold on its engine socket.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a request's head may take to arrive.
pub const HEADER_LIMIT: Duration = Duration::from_secs(30);
/// How long an upgraded stream waits after its `101` head (see [`spliced`]).
const HEAD_FIRST: Duration = Duration::from_millis(100);
/// Most bytes of a body berth reads to check or rewrite (creates, lists, inspects).
pub const MAX_BODY: usize = 4 << 20;

/// The body of an answer (or of a forwarded request).
pub type Body = BoxBody<Bytes, hyper::Error>;

/// A body made here.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// An engine-style JSON error answer (`{"message": …}`): what client
/// libraries print.
pub fn error(status: StatusCode, message: &str) -> Response<Body> {
    let body = serde_json::json!({ "message": message }).to_string();
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(full(body))
        .unwrap_or_else(|_| Response::new(full("")))
}

/// A JSON answer with `status`.
pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(full(value.to_string()))
        .unwrap_or_else(|_| Response::new(full("")))
}

/// Read a request's body for a check: at most [`MAX_BODY`].
pub async fn read_body(body: Incoming) -> Result<Bytes, Response<Body>> {
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(_) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "berth's scoped engine reads bodies of at most {} MiB",
                MAX_BODY >> 20
            ),
        )),
    }
}

/// Read an engine answer's body to rewrite it: at most [`MAX_BODY`].
pub async fn read_answer(
    resp: Response<Incoming>,
) -> Result<(hyper::http::response::Parts, Bytes), Response<Body>> {
    let (parts, body) = resp.into_parts();
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => Ok((parts, b.to_bytes())),
        Err(_) => Err(error(
            StatusCode::BAD_GATEWAY,
            "the engine's answer was too large to check",
        )),
    }
}

/// Headers passed on from the job's request (the rest are the connection's).
fn kept(name: &hyper::header::HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
    )
}

/// Send `method path_and_query` with the job's `headers` and `body` to the
/// engine at `upstream`. `upgrade`: ask for the connection (attach, exec).
pub async fn send(
    upstream: &Path,
    method: hyper::Method,
    path_and_query: &str,
    headers: &hyper::HeaderMap,
    body: Body,
    upgrade: bool,
    tasks: &tokio_util::task::TaskTracker,
) -> Result<Response<Incoming>, Response<Body>> {
    let unreachable = |e: &dyn std::fmt::Display| {
        error(
            StatusCode::BAD_GATEWAY,
            &format!("berth's scoped engine could not reach the engine: {e}"),
        )
    };
    let stream = UnixStream::connect(upstream).await.map_err(|e| unreachable(&e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable(&e))?;
    tasks.spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    let mut req = Request::builder().method(method).uri(path_and_query);
    for (name, value) in headers.iter().filter(|(n, _)| kept(n)) {
        req = req.header(name, value);
    }
    req = req.header(HOST, "docker");
    if upgrade {
        req = req.header(CONNECTION, "Upgrade").header(UPGRADE, "tcp");
    }
    let req = req.body(body).map_err(|e| unreachable(&e))?;
    sender.send_request(req).await.map_err(|e| unreachable(&e))
}

/// A request with a body made here: its length set, its type JSON.
pub fn json_headers(headers: &hyper::HeaderMap, len: usize) -> hyper::HeaderMap {
    let mut h = headers.clone();
    h.remove(CONTENT_LENGTH);
    h.insert(CONTENT_LENGTH, len.into());
    h.insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    h
}

/// An answer read here (to check or record it) passed on as the engine gave it.
pub fn answer(head: hyper::http::response::Parts, bytes: Bytes) -> Response<Body> {
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = head.status;
    for (name, value) in head.headers.iter() {
        if !matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            resp.headers_mut().append(name, value.clone());
        }
    }
    resp
}

/// Pass the engine's answer to the job as it comes (streams included).
pub fn passed(resp: Response<Incoming>) -> Response<Body> {
    resp.map(|b| b.boxed())
}

/// An upgraded exchange (attach, exec start): answer the job with the
/// engine's `101` and splice the two connections once both are handed over.
pub fn spliced(
    mut resp: Response<Incoming>,
    job_side: hyper::upgrade::OnUpgrade,
    tasks: &tokio_util::task::TaskTracker,
    stop: CancellationToken,
) -> Response<Body> {
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        return passed(resp);
    }
    let engine_side = hyper::upgrade::on(&mut resp);
    tasks.spawn(async move {
        let (Ok(job), Ok(engine)) = tokio::join!(job_side, engine_side) else {
            return;
        };
        let (mut job, mut engine) = (TokioIo::new(job), TokioIo::new(engine));
        // docker-py reads the `101` head through a buffered reader, then the
        // stream from the raw socket: bytes that arrive with the head are
        // lost to it. The engine's own first bytes come a moment after its
        // head; so do berth's.
        tokio::time::sleep(HEAD_FIRST).await;
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut job, &mut engine) => {}
            _ = stop.cancelled() => {}
        }
    });
    let (parts, _) = resp.into_parts();
    Response::from_parts(parts, full(""))
}
