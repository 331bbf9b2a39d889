//! The job's networks and volumes through its scoped engine: made under
//! names of the job's (the engine's names are shared by everyone on it),
//! labelled as the job's, listed and removed only when they are its own,
//! and at most [`MAX_NETWORKS`] and [`MAX_VOLUMES`] of each.

use std::sync::Arc;

use hyper::{Method, Response, StatusCode};
use serde_json::{Value, json};

use super::exchange::{created, forward, rewrite, send_json};
use super::intake::Intake;
use super::proxy::{self, Body};
use super::registry::JobNetwork;
use super::route::{Endpoint, NetworkOp};
use super::{MAX_NETWORKS, MAX_VOLUMES, Shared, requests, respond};

/// Networks or volumes, the two kinds of object a job makes by name.
#[derive(Clone, Copy)]
enum Kind {
    Network = 0,
    Volume = 1,
}

/// One object of `kind` being made: counted against its limit from the
/// check until the engine answered (dropped, it counts no more).
struct Making<'a> {
    s: &'a Shared,
    kind: Kind,
}

impl<'a> Making<'a> {
    /// Room for one more object of `kind`, taken under the registry's lock;
    /// `None` at the limit.
    fn take(s: &'a Shared, kind: Kind) -> Option<Making<'a>> {
        let mut reg = s.registry();
        let held = match kind {
            Kind::Network => reg.networks.len(),
            Kind::Volume => reg.volumes.len(),
        };
        let max = match kind {
            Kind::Network => MAX_NETWORKS,
            Kind::Volume => MAX_VOLUMES,
        };
        if held + reg.making[kind as usize] >= max {
            return None;
        }
        reg.making[kind as usize] += 1;
        Some(Making { s, kind })
    }
}

impl Drop for Making<'_> {
    fn drop(&mut self) {
        self.s.registry().making[self.kind as usize] -= 1;
    }
}

/// Networks and volumes.
pub async fn handle(s: &Arc<Shared>, mut req: Intake) -> Response<Body> {
    let routed = req.routed.clone();
    let line = req.line.clone();
    let line = line.as_str();
    let parent = s.labels.get(super::LABEL_PARENT).cloned().unwrap_or_default();
    // The name the job gave its network `id`; `None`: not the job's.
    let asked_of = {
        let s = s.clone();
        move |id: &str| {
            s.registry()
                .networks
                .iter()
                .find(|n| n.id == id)
                .map(|n| n.asked.clone())
        }
    };
    match routed.endpoint.clone() {
        Endpoint::NetworkCreate => network_create(s, req, &parent).await,
        Endpoint::NetworkList => {
            match requests::narrowed(req.param("filters"), &s.label_filter()) {
                Ok(f) => req.set_param("filters", f),
                Err(r) => return s.refuse(line, &r.field, &r.reason),
            }
            let target = req.target(routed.path());
            // The engine's answer narrowed again, by what the job made.
            rewrite(s, req, &target, move |v| respond::networks(v, asked_of)).await
        }
        Endpoint::Network(r, op) => network(s, req, &r, op, asked_of).await,
        Endpoint::VolumeCreate => volume_create(s, req, &parent).await,
        Endpoint::VolumeRemove(name) => {
            let real = Some(s.registry()).and_then(|reg| {
                reg.volumes
                    .iter()
                    .find(|(a, r)| a == &name || r == &name)
                    .map(|(_, r)| r.clone())
            });
            let Some(real) = real else {
                return s.not_found(line, "volume", &name);
            };
            let target = req.target(routed.path_with(1, &real));
            let resp = forward(s, req, &target).await;
            if resp.status().is_success() || resp.status() == StatusCode::NOT_FOUND {
                s.registry().volumes.retain(|(_, r)| r != &real);
            }
            resp
        }
        _ => proxy::error(StatusCode::INTERNAL_SERVER_ERROR, "berth: misrouted request"),
    }
}

/// A network of the job's, made under a name of its own (at most
/// [`MAX_NETWORKS`], counted from the check until the engine answered).
async fn network_create(s: &Arc<Shared>, mut req: Intake, parent: &str) -> Response<Body> {
    let line = req.line.clone();
    let line = line.as_str();
    let Some(_making) = Making::take(s, Kind::Network) else {
        return s.refuse(
            line,
            "Name",
            &format!("a job makes at most {MAX_NETWORKS} networks"),
        );
    };
    let (body, asked) = match requests::network_create(req.take_json(), &s.labels, parent) {
        Ok(c) => c,
        Err(r) => return s.refuse(line, &r.field, &r.reason),
    };
    if s.registry().network_of(&asked).is_some() {
        return proxy::error(
            StatusCode::CONFLICT,
            &format!("network with name {asked} already exists"),
        );
    }
    let engine_name = body["Name"].as_str().unwrap_or_default().to_string();
    let path = req.routed.path();
    let resp = match send_json(s, Method::POST, &path, &req.headers, &body).await {
        Ok(r) => r,
        Err(e) => return e,
    };
    match created(resp).await {
        Ok((answer, id)) => {
            s.registry().networks.push(JobNetwork {
                asked,
                id,
                engine_name,
            });
            answer
        }
        Err(answer) => answer,
    }
}

/// A request on one of the job's networks (`r`, as the job named it).
async fn network(
    s: &Arc<Shared>,
    mut req: Intake,
    r: &str,
    op: NetworkOp,
    asked_of: impl Fn(&str) -> Option<String> + Send + 'static,
) -> Response<Body> {
    let line = req.line.clone();
    let id = Some(s.registry()).and_then(|reg| reg.network_of(r).map(|n| n.id.clone()));
    let Some(id) = id else {
        return s.not_found(&line, "network", r);
    };
    let target = req.target(req.routed.path_with(1, &id));
    match op {
        NetworkOp::Inspect => rewrite(s, req, &target, move |v| respond::networks(v, asked_of)).await,
        NetworkOp::Remove => {
            let resp = forward(s, req, &target).await;
            if resp.status().is_success() || resp.status() == StatusCode::NOT_FOUND {
                s.registry().networks.retain(|n| n.id != id);
            }
            resp
        }
        NetworkOp::Connect => {
            let body = req.take_json();
            let checked = requests::network_connect(body, &*s.registry());
            match checked {
                Ok(body) => match send_json(s, Method::POST, &target, &req.headers, &body).await {
                    Ok(resp) => proxy::passed(resp),
                    Err(e) => e,
                },
                Err(r) => s.refuse(&line, &r.field, &r.reason),
            }
        }
    }
}

/// `POST /volumes/create`: checked, made under the job's name for it.
async fn volume_create(s: &Arc<Shared>, mut req: Intake, parent: &str) -> Response<Body> {
    let line = req.line.clone();
    let Some(_making) = Making::take(s, Kind::Volume) else {
        return s.refuse(
            &line,
            "Name",
            &format!("a job makes at most {MAX_VOLUMES} volumes"),
        );
    };
    let (body, asked) = match requests::volume_create(req.take_json(), &s.labels, parent) {
        Ok(c) => c,
        Err(r) => return s.refuse(&line, &r.field, &r.reason),
    };
    let real = body["Name"].as_str().unwrap_or_default().to_string();
    let path = req.routed.path();
    let resp = match send_json(s, Method::POST, &path, &req.headers, &body).await {
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
    {
        let mut reg = s.registry();
        if !reg.volumes.iter().any(|(_, r)| r == &real) {
            reg.volumes.push((asked.clone(), real));
        }
    }
    // The job knows it by the name it gave.
    let mut v = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("Name".into(), json!(asked));
    }
    proxy::json(head.status, &v)
}

/// Make the job's volume `real` (named `asked` by the job) if it is not
/// yet: a child naming a volume gets the job's, never a shared one.
pub async fn ensure_volume(s: &Shared, asked: &str, real: &str) -> Result<(), Response<Body>> {
    if s.registry().volumes.iter().any(|(_, r)| r == real) {
        return Ok(());
    }
    let Some(_making) = Making::take(s, Kind::Volume) else {
        return Err(proxy::error(
            StatusCode::FORBIDDEN,
            &format!("berth: a job makes at most {MAX_VOLUMES} volumes"),
        ));
    };
    let request = bollard::models::VolumeCreateRequest {
        name: Some(real.to_string()),
        driver: Some("local".into()),
        labels: Some(s.labels.clone()),
        ..Default::default()
    };
    match s.docker.create_volume(request).await {
        Ok(_) => {
            {
                let mut reg = s.registry();
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
