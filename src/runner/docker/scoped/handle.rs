//! The job's engine socket served (hyper's HTTP/1 server, upgrades on, at
//! most [`proxy::MAX_CONNECTIONS`] connections), and one request to the
//! scoped engine, end to end: read as the engine would read it and routed
//! (`intake.rs`), checked, resolved against the job's own objects,
//! forwarded as berth read it, and its effect recorded (a child made,
//! started, stopped, removed). Containers and execs here; networks and
//! volumes in `objects.rs`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::net::UnixListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::exchange::{created, forward, outgoing, rewrite, send_json};
use super::intake::{self, Intake, Payload};
use super::proxy::{self, Body};
use super::relay::Relay;
use super::route::{ContainerOp, Endpoint};
use super::{Shared, logs, objects, requests, respond};
use crate::model::ChildState;

/// How long a killed child may take to stop before the next one leaves.
const STOP_SETTLE: Duration = Duration::from_secs(10);

/// Serve the job's socket until `stop`.
pub async fn serve(listener: UnixListener, shared: Arc<Shared>, stop: CancellationToken) {
    let room = Arc::new(Semaphore::new(proxy::MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(permit) = room.clone().try_acquire_owned() else {
            tracing::warn!(job = %shared.job, "scoped engine: every connection is busy; one closed");
            continue;
        };
        let (shared, stop) = (shared.clone(), stop.clone());
        let tasks = shared.tasks.clone();
        tasks.spawn(async move {
            let _permit = permit;
            let service = {
                let shared = shared.clone();
                hyper::service::service_fn(move |req: Request<Incoming>| {
                    let shared = shared.clone();
                    async move { Ok::<_, Infallible>(handle(shared, req).await) }
                })
            };
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(proxy::HEADER_LIMIT);
            let served = builder
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::select! {
                _ = served => {}
                _ = stop.cancelled() => {}
            }
        });
    }
}

/// Answer one request: read as the engine would read it (`intake.rs`),
/// then handled by what it asks.
pub async fn handle(s: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let mut req = match intake::read(&s, req).await {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    let line = req.line.clone();
    let routed = req.routed.clone();
    match routed.endpoint.clone() {
        Endpoint::Ping | Endpoint::Version | Endpoint::ImageList | Endpoint::ImageInspect => {
            let target = req.target(routed.path());
            forward(&s, req, &target).await
        }
        Endpoint::ImagePull => {
            if req.param("fromImage").is_none_or(str::is_empty) {
                return s.refuse(&line, "fromImage", "name the image to pull");
            }
            let target = req.target(routed.path());
            forward(&s, req, &target).await
        }
        Endpoint::Info => {
            let target = req.target(routed.path());
            rewrite(&s, req, &target, respond::info).await
        }
        Endpoint::ContainerCreate => super::create::create(&s, req).await,
        Endpoint::ContainerList => {
            match requests::narrowed(req.param("filters"), &s.label_filter()) {
                Ok(f) => req.set_param("filters", f),
                Err(r) => return s.refuse(&line, &r.field, &r.reason),
            }
            let target = req.target(routed.path());
            let s2 = s.clone();
            // The engine's answer narrowed again, by what the job made.
            rewrite(&s, req, &target, move |v| {
                respond::container_list(v, |id| {
                    let reg = s2.registry();
                    let c = reg.find(id).filter(|c| c.id == id)?;
                    let relays = c.relay.as_ref().map(|r| r.ports().to_vec()).unwrap_or_default();
                    Some((relays, c.name.clone()))
                })
            })
            .await
        }
        Endpoint::Container(r, op) => {
            let id = Some(s.registry()).and_then(|reg| reg.find(&r).map(|c| c.id.clone()));
            let Some(id) = id else {
                return s.not_found(&line, "container", &r);
            };
            let target = req.target(routed.path_with(1, &id));
            container(&s, req, &target, &id, op).await
        }
        Endpoint::ExecInspect(id) | Endpoint::ExecStart(id) => {
            let ours = s.registry().execs.contains(&id);
            if !ours {
                return s.not_found(&line, "exec instance", &id);
            }
            let target = req.target(routed.path());
            match req.method == Method::POST {
                true => match requests::exec_start(req.take_json()) {
                    Ok(body) => {
                        req.payload = Payload::Json(body);
                        upgraded(&s, req, &target).await
                    }
                    Err(r) => s.refuse(&line, &r.field, &r.reason),
                },
                false => forward(&s, req, &target).await,
            }
        }
        Endpoint::NetworkCreate
        | Endpoint::NetworkList
        | Endpoint::Network(..)
        | Endpoint::VolumeCreate
        | Endpoint::VolumeRemove(_) => objects::handle(&s, req).await,
    }
}

/// An exchange that may take the connection over (attach, exec start),
/// when the job asked for that.
async fn upgraded(s: &Shared, mut req: Intake, target: &str) -> Response<Body> {
    let job_side = req.upgrade.take();
    let (method, headers, body) = outgoing(req);
    let wants = job_side.is_some();
    match proxy::send(&s.upstream, method, target, &headers, body, wants, &s.tasks).await {
        Ok(resp) => match job_side {
            Some(job_side) => proxy::spliced(resp, job_side, &s.tasks, s.stop.clone()),
            None => proxy::passed(resp),
        },
        Err(e) => e,
    }
}

/// The name the job knows child `id` by.
fn name_of(s: &Shared, id: &str) -> Option<String> {
    s.registry().find(id).map(|c| c.name.clone())
}

/// Where the job reaches child `id`'s ports.
fn relayed(s: &Shared, id: &str) -> Vec<(u16, std::net::SocketAddr)> {
    Some(s.registry())
        .and_then(|reg| {
            reg.find(id)
                .and_then(|c| c.relay.as_ref())
                .map(|r| r.ports().to_vec())
        })
        .unwrap_or_default()
}

/// A request on one of the job's children (`id`, resolved; `target` its path and query).
async fn container(
    s: &Arc<Shared>,
    mut req: Intake,
    target: &str,
    id: &str,
    op: ContainerOp,
) -> Response<Body> {
    match op {
        ContainerOp::Inspect => {
            let relays = relayed(s, id);
            let name = name_of(s, id);
            rewrite(s, req, target, move |v| {
                respond::container(v, &relays, name.as_deref())
            })
            .await
        }
        ContainerOp::Wait | ContainerOp::Logs | ContainerOp::Archive => forward(s, req, target).await,
        ContainerOp::Attach => upgraded(s, req, target).await,
        ContainerOp::Start => {
            let resp = forward(s, req, target).await;
            if matches!(resp.status(), StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED) {
                started(s, id).await;
            }
            resp
        }
        ContainerOp::Stop | ContainerOp::Kill | ContainerOp::Remove => {
            let _one = s.leaving.lock().await;
            let resp = forward(s, req, target).await;
            let status = resp.status();
            match op {
                ContainerOp::Remove if status.is_success() || status == StatusCode::NOT_FOUND => {
                    s.forget_child(id, true);
                }
                ContainerOp::Kill if status.is_success() => {
                    // Let it leave its network before another may.
                    let deadline = tokio::time::Instant::now() + STOP_SETTLE;
                    while settle(s, id).await == Some(ChildState::Running)
                        && tokio::time::Instant::now() < deadline
                    {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                ContainerOp::Stop if status.is_success() => {
                    settle(s, id).await;
                }
                _ => {}
            }
            resp
        }
        ContainerOp::ExecCreate => {
            let body = match requests::exec_create(req.take_json()) {
                Ok(b) => b,
                Err(r) => return s.refuse(&req.line, &r.field, &r.reason),
            };
            let resp = match send_json(s, Method::POST, target, &req.headers, &body).await {
                Ok(r) => r,
                Err(e) => return e,
            };
            match created(resp).await {
                Ok((answer, exec)) => {
                    {
                        let mut reg = s.registry();
                        reg.execs.insert(exec);
                    }
                    answer
                }
                Err(answer) => answer,
            }
        }
    }
}

/// The engine's view of child `id` (raw JSON), or `None` when it is gone.
async fn inspect(s: &Shared, id: &str) -> Option<Value> {
    let path = format!("/containers/{id}/json");
    let resp = proxy::send(
        &s.upstream,
        Method::GET,
        &path,
        &hyper::HeaderMap::new(),
        proxy::full(""),
        false,
        &s.tasks,
    )
    .await
    .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let (_, bytes) = proxy::read_answer(resp).await.ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Read child `id`'s state back into the registry; the state now.
async fn settle(s: &Shared, id: &str) -> Option<ChildState> {
    let Some(v) = inspect(s, id).await else {
        // Gone (auto-removed, or removed by the engine).
        s.forget_child(id, true);
        return Some(ChildState::Removed);
    };
    let state = {
        let mut reg = s.registry();
        let child = reg.find_mut(id)?;
        if v["State"]["Running"].as_bool() == Some(true) {
            child.state = ChildState::Running;
        } else {
            child.state = ChildState::Exited;
            child.exit_code = v["State"]["ExitCode"].as_i64();
        }
        child.state
    };
    s.publish();
    Some(state)
}

/// Child `id` started: relay its ports from the job's gateway, keep its output.
async fn started(s: &Arc<Shared>, id: &str) {
    let Some(v) = inspect(s, id).await else { return };
    let network = Some(s.registry()).and_then(|r| {
        r.find(id)
            .and_then(|c| c.slot.as_ref().map(|slot| slot.name.clone()))
    });
    let ip = network
        .and_then(|n| {
            v["NetworkSettings"]["Networks"][n.as_str()]["IPAddress"]
                .as_str()
                .map(str::to_string)
        })
        .and_then(|ip| ip.parse().ok());
    let ports: Vec<u16> = v["Config"]["ExposedPorts"]
        .as_object()
        .map(|p| {
            p.keys()
                .filter_map(|k| k.strip_suffix("/tcp").and_then(|n| n.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    let net = s.net.lock().ok().and_then(|n| *n);
    let relay = match (ip, net) {
        (Some(ip), Some((gateway, subnet))) if !ports.is_empty() => {
            match Relay::open(gateway, subnet, ip, &ports, &s.tasks).await {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(job = %s.job, error = %e, "a child's ports are not relayed");
                    None
                }
            }
        }
        _ => None,
    };
    let name = {
        let mut reg = s.registry();
        let Some(child) = reg.find_mut(id) else { return };
        child.state = ChildState::Running;
        child.ip = ip;
        if let Some(r) = relay
            && let Some(old) = child.relay.replace(r)
        {
            old.close();
        }
        child.name.clone()
    };
    s.publish();
    let since = chrono::Utc::now().timestamp() - 1;
    let file = logs::path(&s.job_dir, &name);
    let (shared, id) = (s.clone(), id.to_string());
    s.tasks.spawn(async move {
        logs::follow(shared.docker.clone(), id.clone(), file, since).await;
        if !shared.closing.load(std::sync::atomic::Ordering::SeqCst) {
            settle(&shared, &id).await;
        }
    });
}
