//! The job's networks and volumes through its scoped engine: made under
//! names of the job's (the engine's names are shared by everyone on it),
//! labelled as the job's, listed and removed only when they are its own,
//! and at most [`MAX_NETWORKS`] and [`MAX_VOLUMES`] of each.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::exchange::{forward, rewrite, send_json};
use super::proxy::{self, Body};
use super::registry::JobNetwork;
use super::route::{Endpoint, NetworkOp, Routed};
use super::{MAX_NETWORKS, MAX_VOLUMES, Shared, requests, respond};

/// Networks and volumes.
pub async fn handle(
    s: &Arc<Shared>,
    req: Request<Incoming>,
    routed: &Routed,
    line: &str,
    query: Option<&str>,
) -> Response<Body> {
    let with_query = |p: String| match query {
        Some(q) => format!("{p}?{q}"),
        None => p,
    };
    let parent = s.labels.get(super::LABEL_PARENT).cloned().unwrap_or_default();
    let asked_of = {
        let s = s.clone();
        move |engine_name: &str| {
            s.registry
                .lock()
                .ok()?
                .networks
                .iter()
                .find(|n| n.engine_name == engine_name)
                .map(|n| n.asked.clone())
        }
    };
    match routed.endpoint.clone() {
        Endpoint::NetworkCreate => {
            if s.registry.lock().is_ok_and(|r| r.networks.len() >= MAX_NETWORKS) {
                return s.refuse(
                    line,
                    "Name",
                    &format!("a job makes at most {MAX_NETWORKS} networks"),
                );
            }
            let (parts, body) = req.into_parts();
            let bytes = match proxy::read_body(body).await {
                Ok(b) => b,
                Err(e) => return e,
            };
            let checked = serde_json::from_slice::<Value>(&bytes)
                .map_err(|_| super::check::Refusal::new("body", "the body is not JSON"))
                .and_then(|v| requests::network_create(v, &s.labels, &parent));
            let (body, asked) = match checked {
                Ok(c) => c,
                Err(r) => return s.refuse(line, &r.field, &r.reason),
            };
            if s.registry.lock().is_ok_and(|r| r.network_of(&asked).is_some()) {
                return proxy::error(
                    StatusCode::CONFLICT,
                    &format!("network with name {asked} already exists"),
                );
            }
            let engine_name = body["Name"].as_str().unwrap_or_default().to_string();
            let resp = match send_json(s, Method::POST, &routed.path(), &parts.headers, &body).await {
                Ok(r) => r,
                Err(e) => return e,
            };
            if resp.status() != StatusCode::CREATED {
                return proxy::passed(resp);
            }
            let (head, bytes) = match proxy::read_answer(resp).await {
                Ok(a) => a,
                Err(e) => return e,
            };
            let id = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v.get("Id").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default();
            if let Ok(mut r) = s.registry.lock() {
                r.networks.push(JobNetwork {
                    asked,
                    id,
                    engine_name,
                });
            }
            proxy::answer(head, bytes)
        }
        Endpoint::NetworkList => {
            let narrowed = match requests::narrowed(query, &s.label_filter()) {
                Ok(q) => q,
                Err(r) => return s.refuse(line, &r.field, &r.reason),
            };
            rewrite(s, req, &format!("{}?{narrowed}", routed.path()), move |v| {
                respond::networks(v, asked_of)
            })
            .await
        }
        Endpoint::Network(r, op) => {
            let id = s
                .registry
                .lock()
                .ok()
                .and_then(|reg| reg.network_of(&r).map(|n| n.id.clone()));
            let Some(id) = id else {
                return s.not_found(line, "network", &r);
            };
            let path = with_query(routed.path_with(1, &id));
            match op {
                NetworkOp::Inspect => rewrite(s, req, &path, move |v| respond::networks(v, asked_of)).await,
                NetworkOp::Remove => {
                    let resp = forward(s, req, &path).await;
                    if (resp.status().is_success() || resp.status() == StatusCode::NOT_FOUND)
                        && let Ok(mut reg) = s.registry.lock()
                    {
                        reg.networks.retain(|n| n.id != id);
                    }
                    resp
                }
                NetworkOp::Connect => {
                    let (parts, body) = req.into_parts();
                    let bytes = match proxy::read_body(body).await {
                        Ok(b) => b,
                        Err(e) => return e,
                    };
                    let checked = {
                        let reg = s.registry.lock();
                        match (serde_json::from_slice::<Value>(&bytes), reg) {
                            (Ok(v), Ok(reg)) => requests::network_connect(v, &*reg),
                            _ => Err(super::check::Refusal::new("body", "the body is not JSON")),
                        }
                    };
                    match checked {
                        Ok(body) => match send_json(s, Method::POST, &path, &parts.headers, &body).await {
                            Ok(resp) => proxy::passed(resp),
                            Err(e) => e,
                        },
                        Err(r) => s.refuse(line, &r.field, &r.reason),
                    }
                }
            }
        }
        Endpoint::VolumeCreate => {
            if s.registry.lock().is_ok_and(|r| r.volumes.len() >= MAX_VOLUMES) {
                return s.refuse(
                    line,
                    "Name",
                    &format!("a job makes at most {MAX_VOLUMES} volumes"),
                );
            }
            let (parts, body) = req.into_parts();
            let bytes = match proxy::read_body(body).await {
                Ok(b) => b,
                Err(e) => return e,
            };
            let checked = serde_json::from_slice::<Value>(&bytes)
                .map_err(|_| super::check::Refusal::new("body", "the body is not JSON"))
                .and_then(|v| requests::volume_create(v, &s.labels, &parent));
            let (body, asked) = match checked {
                Ok(c) => c,
                Err(r) => return s.refuse(line, &r.field, &r.reason),
            };
            let real = body["Name"].as_str().unwrap_or_default().to_string();
            let resp = match send_json(s, Method::POST, &routed.path(), &parts.headers, &body).await {
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
            if let Ok(mut reg) = s.registry.lock()
                && !reg.volumes.iter().any(|(_, r)| r == &real)
            {
                reg.volumes.push((asked.clone(), real));
            }
            // The job knows it by the name it gave.
            let mut v = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
            if let Some(o) = v.as_object_mut() {
                o.insert("Name".into(), json!(asked));
            }
            proxy::json(head.status, &v)
        }
        Endpoint::VolumeRemove(name) => {
            let real = s.registry.lock().ok().and_then(|reg| {
                reg.volumes
                    .iter()
                    .find(|(a, r)| a == &name || r == &name)
                    .map(|(_, r)| r.clone())
            });
            let Some(real) = real else {
                return s.not_found(line, "volume", &name);
            };
            let resp = forward(s, req, &with_query(routed.path_with(1, &real))).await;
            if (resp.status().is_success() || resp.status() == StatusCode::NOT_FOUND)
                && let Ok(mut reg) = s.registry.lock()
            {
                reg.volumes.retain(|(_, r)| r != &real);
            }
            resp
        }
        _ => proxy::error(StatusCode::INTERNAL_SERVER_ERROR, "berth: misrouted request"),
    }
}

/// Make the job's volume `real` (named `asked` by the job) if it is not
/// yet: a child naming a volume gets the job's, never a shared one.
pub async fn ensure_volume(s: &Shared, asked: &str, real: &str) -> Result<(), Response<Body>> {
    if s.registry
        .lock()
        .is_ok_and(|r| r.volumes.iter().any(|(_, r)| r == real))
    {
        return Ok(());
    }
    if s.registry.lock().is_ok_and(|r| r.volumes.len() >= MAX_VOLUMES) {
        return Err(proxy::error(
            StatusCode::FORBIDDEN,
            &format!("berth: a job makes at most {MAX_VOLUMES} volumes"),
        ));
    }
    let request = bollard::models::VolumeCreateRequest {
        name: Some(real.to_string()),
        driver: Some("local".into()),
        labels: Some(s.labels.clone()),
        ..Default::default()
    };
    match s.docker.create_volume(request).await {
        Ok(_) => {
            if let Ok(mut reg) = s.registry.lock() {
                reg.volumes.push((asked.to_string(), real.to_string()));
            }
            Ok(())
        }
        Err(e) => Err(proxy::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("berth: {e}"),
        )),
    }
}
