//! Sending a job's request on to the engine, for the handlers of every
//! endpoint (`handle`, `create`, `objects`): as berth read it (`intake.rs`:
//! the checked query, the kept headers, the parsed body), with its JSON
//! answer rewritten, or with a JSON body berth made. Kept apart from the
//! dispatch so the handlers can use them without depending on each other.

use hyper::body::Incoming;
use hyper::{Method, Response, StatusCode};
use serde_json::Value;

use super::Shared;
use super::intake::{Intake, Payload};
use super::proxy::{self, Body};

/// What of `req` goes to the engine: its method, the kept headers (a JSON
/// body's length and type set) and the body as berth read it.
pub fn outgoing(req: Intake) -> (Method, hyper::HeaderMap, Body) {
    match req.payload {
        Payload::Empty => (req.method, req.headers, proxy::full("")),
        Payload::Stream(b) => (req.method, req.headers, http_body_util::BodyExt::boxed(b)),
        Payload::Json(v) => {
            let bytes = v.to_string();
            let headers = proxy::json_headers(&req.headers, bytes.len());
            (req.method, headers, proxy::full(bytes))
        }
    }
}

/// Send `req` to `target` (path and query, as berth wrote them).
async fn send(s: &Shared, req: Intake, target: &str) -> Result<Response<Incoming>, Response<Body>> {
    let (method, headers, body) = outgoing(req);
    proxy::send(&s.upstream, method, target, &headers, body, false, &s.tasks).await
}

/// Forward as berth read it, the answer streamed back.
pub async fn forward(s: &Shared, req: Intake, target: &str) -> Response<Body> {
    match send(s, req, target).await {
        Ok(resp) => proxy::passed(resp),
        Err(e) => e,
    }
}

/// Forward, and rewrite a successful JSON answer with `f`.
pub async fn rewrite(
    s: &Shared,
    req: Intake,
    target: &str,
    f: impl FnOnce(Value) -> Value,
) -> Response<Body> {
    let resp = match send(s, req, target).await {
        Ok(r) => r,
        Err(e) => return e,
    };
    if !resp.status().is_success() {
        return proxy::passed(resp);
    }
    let (head, bytes) = match proxy::read_answer(resp).await {
        Ok(a) => a,
        Err(e) => return e,
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => proxy::json(head.status, &f(v)),
        Err(_) => proxy::error(StatusCode::BAD_GATEWAY, "the engine's answer was not JSON"),
    }
}

/// Send a JSON `body` made here.
pub async fn send_json(
    s: &Shared,
    method: Method,
    path: &str,
    headers: &hyper::HeaderMap,
    body: &Value,
) -> Result<Response<Incoming>, Response<Body>> {
    let bytes = body.to_string();
    let headers = proxy::json_headers(headers, bytes.len());
    proxy::send(
        &s.upstream,
        method,
        path,
        &headers,
        proxy::full(bytes),
        false,
        &s.tasks,
    )
    .await
}

/// The engine's answer to a create (a `201` with an `Id`): the answer
/// passed on and the id, or the answer as it came.
pub async fn created(resp: Response<Incoming>) -> Result<(Response<Body>, String), Response<Body>> {
    if resp.status() != StatusCode::CREATED {
        return Err(proxy::passed(resp));
    }
    let (head, bytes) = proxy::read_answer(resp).await?;
    let id = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("Id").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default();
    Ok((proxy::answer(head, bytes), id))
}
