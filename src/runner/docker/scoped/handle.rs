//! One request to the scoped engine, end to end: routed, checked, resolved
//! against the job's own objects, forwarded, and its effect recorded
//! (a child made, started, stopped, removed). Containers and execs here;
//! networks and volumes in `objects.rs`.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::check::{self, Rules};
use super::proxy::{self, Body};
use super::relay::Relay;
use super::route::{self, ContainerOp, Endpoint, Routed};
use super::{Shared, logs, objects, requests, respond};
use crate::model::ChildState;

/// Where a child's network goes in a checked body until its slot is known.
const NETWORK_PLACEHOLDER: &str = "berth-child-network";
/// How long a killed child may take to stop before the next one leaves.
const STOP_SETTLE: Duration = Duration::from_secs(10);

impl Shared {
    /// Refuse (403) in one line, and log it.
    pub fn refuse(&self, line: &str, field: &str, reason: &str) -> Response<Body> {
        self.report(line, field, reason);
        let message = match field {
            "path" => format!("berth: {reason}"),
            _ => format!("berth: {field}: {reason}"),
        };
        proxy::error(StatusCode::FORBIDDEN, &message)
    }

    /// "No such" (404) for a reference that is not the job's: logged
    /// unless it named a child of the job that is gone now.
    pub fn not_found(&self, line: &str, what: &str, r: &str) -> Response<Body> {
        let was_ours = self.registry.lock().is_ok_and(|reg| reg.was_child(r));
        if !was_ours {
            self.report(line, what, &format!("`{r}` is not one of this job's"));
        }
        proxy::error(
            StatusCode::NOT_FOUND,
            &format!("No such {what}: {}", crate::inert::visible(r)),
        )
    }
}

/// Answer one request.
pub async fn handle(s: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let line = route::line(&method, &path);
    let routed = match route::route(&method, &path) {
        Ok(r) => r,
        Err(r) => return s.refuse(&line, "path", &r.reason),
    };
    let with_query = |p: String| match &query {
        Some(q) => format!("{p}?{q}"),
        None => p,
    };
    match routed.endpoint.clone() {
        Endpoint::Ping | Endpoint::Version | Endpoint::ImageList | Endpoint::ImageInspect => {
            forward(&s, req, &with_query(routed.path())).await
        }
        Endpoint::ImagePull => match requests::image_pull(query.as_deref()) {
            Ok(()) => forward(&s, req, &with_query(routed.path())).await,
            Err(r) => s.refuse(&line, &r.field, &r.reason),
        },
        Endpoint::Info => rewrite(&s, req, &with_query(routed.path()), respond::info).await,
        Endpoint::ContainerCreate => create(&s, req, &routed, &line, query.as_deref()).await,
        Endpoint::ContainerList => {
            let narrowed = match requests::narrowed(query.as_deref(), &s.label_filter()) {
                Ok(q) => q,
                Err(r) => return s.refuse(&line, &r.field, &r.reason),
            };
            let s2 = s.clone();
            rewrite(&s, req, &format!("{}?{narrowed}", routed.path()), move |v| {
                respond::container_list(v, |id| relayed(&s2, id))
            })
            .await
        }
        Endpoint::Container(r, op) => {
            let id = s
                .registry
                .lock()
                .ok()
                .and_then(|reg| reg.find(&r).map(|c| c.id.clone()));
            let Some(id) = id else {
                return s.not_found(&line, "container", &r);
            };
            container(&s, req, &line, &with_query(routed.path_with(1, &id)), &id, op).await
        }
        Endpoint::ExecInspect(id) | Endpoint::ExecStart(id) => {
            let ours = s.registry.lock().is_ok_and(|reg| reg.execs.contains(&id));
            if !ours {
                return s.not_found(&line, "exec instance", &id);
            }
            let upgrade = method == Method::POST;
            match upgrade {
                true => upgraded(&s, req, &with_query(routed.path())).await,
                false => forward(&s, req, &with_query(routed.path())).await,
            }
        }
        Endpoint::NetworkCreate
        | Endpoint::NetworkList
        | Endpoint::Network(..)
        | Endpoint::VolumeCreate
        | Endpoint::VolumeRemove(_) => objects::handle(&s, req, &routed, &line, query.as_deref()).await,
    }
}

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

/// An exchange that may take the connection over (attach, exec start).
async fn upgraded(s: &Shared, mut req: Request<Incoming>, path: &str) -> Response<Body> {
    let wants = req.headers().contains_key(hyper::header::UPGRADE);
    let job_side = hyper::upgrade::on(&mut req);
    let (parts, body) = req.into_parts();
    let body = http_body_util::BodyExt::boxed(body);
    match proxy::send(
        &s.upstream,
        parts.method,
        path,
        &parts.headers,
        body,
        wants,
        &s.tasks,
    )
    .await
    {
        Ok(resp) => proxy::spliced(resp, job_side, &s.tasks, s.stop.clone()),
        Err(e) => e,
    }
}

/// Where the job reaches child `id`'s ports.
fn relayed(s: &Shared, id: &str) -> Vec<(u16, std::net::SocketAddr)> {
    s.registry
        .lock()
        .ok()
        .and_then(|reg| {
            reg.find(id)
                .and_then(|c| c.relay.as_ref())
                .map(|r| r.ports().to_vec())
        })
        .unwrap_or_default()
}

/// A query parameter's value.
fn param(query: Option<&str>, key: &str) -> Option<String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or("")).ok()?;
    pairs.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// `POST /containers/create`: checked, given a network, copies of its
/// binds and its volumes, then made under berth's name for it.
async fn create(
    s: &Arc<Shared>,
    req: Request<Incoming>,
    routed: &Routed,
    line: &str,
    query: Option<&str>,
) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let bytes = match proxy::read_body(body).await {
        Ok(b) => b,
        Err(e) => return e,
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return s.refuse(line, "body", "the body is not JSON");
    };
    let image = value
        .as_object()
        .and_then(|o| o.iter().find(|(k, _)| k.eq_ignore_ascii_case("Image")))
        .and_then(|(_, v)| v.as_str())
        .unwrap_or_default()
        .to_string();
    let asked = param(query, "name");
    // Checked and reserved under the registry's lock: two creates at once
    // cannot pass the child limit or the budget together.
    let reserved = {
        let Ok(mut reg) = s.registry.lock() else {
            return proxy::error(StatusCode::INTERNAL_SERVER_ERROR, "berth's scoped engine failed");
        };
        if reg.count() >= reg.max_children {
            let reason = format!(
                "the job has {} children, the most `max_children` allows; remove one first (or raise max_children in your berth config)",
                reg.max_children
            );
            drop(reg);
            return s.refuse(line, "max_children", &reason);
        }
        match reg.name_for(asked.as_deref(), &image) {
            Err(why) => Err(("name".to_string(), why)),
            Ok(name) => {
                let labels = s.child_labels(&name);
                let rules = Rules {
                    workspace: &s.workspace,
                    budget: reg.budget(),
                    labels: &labels,
                    network: NETWORK_PLACEHOLDER,
                };
                match check::create(value, &rules, &*reg) {
                    Ok(plan) => {
                        reg.reserve(name.clone(), image.clone(), plan.memory, plan.pids, None);
                        Ok((name, plan))
                    }
                    Err(r) => Err((r.field, r.reason)),
                }
            }
        }
    };
    let (name, mut plan) = match reserved {
        Ok(r) => r,
        Err((field, why)) => return s.refuse(line, &field, &why),
    };
    let undo = || {
        let child = s.registry.lock().ok().and_then(|mut r| r.unreserve(&name));
        if let Some(slot) = child.and_then(|c| c.slot) {
            slot.vacate();
        }
    };
    // A network of its own, from the pool.
    if plan.own_network {
        match s
            .pool
            .acquire(&s.docker, &s.pool_prefix, &s.ownership, false)
            .await
        {
            Ok(slot) => {
                plan.body["HostConfig"]["NetworkMode"] = json!(slot.name.clone());
                if let Some(c) = s.registry.lock().ok().as_mut().and_then(|r| r.pending(&name)) {
                    c.slot = Some(slot);
                }
            }
            Err(e) => {
                undo();
                return proxy::error(StatusCode::INTERNAL_SERVER_ERROR, &format!("berth: {e}"));
            }
        }
    }
    // Workspace binds become read-only copies made now.
    let into = s.dir.join("copies").join(&name);
    for copy in plan.copies.clone() {
        let (root, rel, to) = (
            s.workspace.clone(),
            copy.rel.clone(),
            into.join(copy.index.to_string()),
        );
        let made = tokio::task::spawn_blocking(move || {
            crate::store::private::create_dir(to.parent().unwrap_or(&to)).map_err(|e| e.to_string())?;
            super::super::protect::copy_beneath(&root, &rel, &to).map(|()| to)
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        match made {
            Ok(to) => {
                plan.body["HostConfig"]["Mounts"][copy.index]["Source"] = json!(to.to_string_lossy());
            }
            Err(why) => {
                undo();
                let what = s.workspace.join(&copy.rel);
                return s.refuse(line, "HostConfig.Mounts", &format!("`{}`: {why}", what.display()));
            }
        }
    }
    // The job's volumes it names, made (labelled) if they are not yet.
    for (asked, real) in plan.volumes.clone() {
        if let Err(resp) = objects::ensure_volume(s, &asked, &real).await {
            undo();
            return resp;
        }
    }
    let engine_name = s
        .registry
        .lock()
        .ok()
        .and_then(|mut r| r.pending(&name).map(|c| c.engine_name.clone()))
        .unwrap_or_default();
    let mut q = vec![("name".to_string(), engine_name)];
    if let Some(p) = param(query, "platform") {
        q.push(("platform".into(), p));
    }
    let path = format!(
        "{}?{}",
        routed.path(),
        serde_urlencoded::to_string(&q).unwrap_or_default()
    );
    let resp = match send_json(s, Method::POST, &path, &parts.headers, &plan.body).await {
        Ok(r) => r,
        Err(e) => {
            undo();
            return e;
        }
    };
    if resp.status() != StatusCode::CREATED {
        undo();
        return proxy::passed(resp);
    }
    let (head, bytes) = match proxy::read_answer(resp).await {
        Ok(a) => a,
        Err(e) => {
            undo();
            return e;
        }
    };
    let id = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("Id").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default();
    if let Some(c) = s.registry.lock().ok().as_mut().and_then(|r| r.pending(&name)) {
        c.id = id.clone();
    }
    s.publish();
    // Networks of the job's the child was asked onto.
    for (net, settings) in &plan.connect {
        let body = json!({"Container": id, "EndpointConfig": settings});
        let path = format!("{}/networks/{net}/connect", routed.prefix);
        let ok = matches!(
            send_json(s, Method::POST, &path, &parts.headers, &body).await,
            Ok(r) if r.status().is_success()
        );
        if !ok {
            let removed = super::super::cleanup::remove_container(&s.docker, &id).await;
            s.forget_child(&id, removed);
            return proxy::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "berth: the child could not join the job's network it asked for; it was removed",
            );
        }
    }
    proxy::answer(head, bytes)
}

/// A request on one of the job's children (`id`, resolved).
async fn container(
    s: &Arc<Shared>,
    req: Request<Incoming>,
    line: &str,
    path: &str,
    id: &str,
    op: ContainerOp,
) -> Response<Body> {
    match op {
        ContainerOp::Inspect => {
            let relays = relayed(s, id);
            rewrite(s, req, path, move |v| respond::container(v, &relays)).await
        }
        ContainerOp::Wait | ContainerOp::Logs | ContainerOp::Archive => forward(s, req, path).await,
        ContainerOp::Attach => upgraded(s, req, path).await,
        ContainerOp::Start => {
            let resp = forward(s, req, path).await;
            if matches!(resp.status(), StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED) {
                started(s, id).await;
            }
            resp
        }
        ContainerOp::Stop | ContainerOp::Kill | ContainerOp::Remove => {
            let _one = s.leaving.lock().await;
            let resp = forward(s, req, path).await;
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
            let (parts, body) = req.into_parts();
            let bytes = match proxy::read_body(body).await {
                Ok(b) => b,
                Err(e) => return e,
            };
            let checked = serde_json::from_slice::<Value>(&bytes)
                .map_err(|_| check::Refusal::new("body", "the body is not JSON"))
                .and_then(requests::exec_create);
            let body = match checked {
                Ok(b) => b,
                Err(r) => return s.refuse(line, &r.field, &r.reason),
            };
            let resp = match send_json(s, Method::POST, path, &parts.headers, &body).await {
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
            if let Some(exec) = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v.get("Id").and_then(Value::as_str).map(str::to_string))
                && let Ok(mut reg) = s.registry.lock()
            {
                reg.execs.insert(exec);
            }
            proxy::answer(head, bytes)
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
        let mut reg = s.registry.lock().ok()?;
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
    let network = s.registry.lock().ok().and_then(|r| {
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
        let Ok(mut reg) = s.registry.lock() else { return };
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
