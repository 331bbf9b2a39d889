//! Sending a job's request on to the engine, for the handlers of every
//! endpoint (`handle`, `create`, `objects`): as it is, with its JSON answer
//! rewritten, or with a JSON body berth made. Kept apart from the dispatch
//! so the handlers can use them without depending on each other.

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;

use super::Shared;
use super::proxy::{self, Body};

/// Forward as it is, the answer streamed back.
pub async fn forward(s: &Shared, req: Request<Incoming>, path: &str) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let body = http_body_util::BodyExt::boxed(body);
    match proxy::send(
        &s.upstream,
        parts.method,
        path,
        &parts.headers,
        body,
        false,
        &s.tasks,
    )
    .await
    {
        Ok(resp) => proxy::passed(resp),
        Err(e) => e,
    }
}

/// Forward, and rewrite a successful JSON answer with `f`.
pub async fn rewrite(
    s: &Shared,
    req: Request<Incoming>,
    path: &str,
    f: impl FnOnce(Value) -> Value,
) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let body = http_body_util::BodyExt::boxed(body);
    let resp = match proxy::send(
        &s.upstream,
        parts.method,
        path,
        &parts.headers,
        body,
        false,
        &s.tasks,
    )
    .await
    {
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

/// A query parameter's value.
pub fn param(query: Option<&str>, key: &str) -> Option<String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or("")).ok()?;
    pairs.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}
