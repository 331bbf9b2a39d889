//! `POST /containers/create` through a job's scoped engine: the body
//! checked (`check.rs`) and the child reserved under the registry's lock
//! (limit and budget), then given a pool network of its own, copies of its
//! workspace binds and its volumes, made under berth's name for it, and
//! joined to the job's networks it asked for. Anything that fails on the
//! way gives the reservation and the network back.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hyper::{Method, Response, StatusCode};
use serde_json::json;

use super::check::{self, Rules};
use super::exchange::{created, send_json};
use super::intake::Intake;
use super::proxy::{self, Body};
use super::{Shared, objects};

/// Where a child's network goes in a checked body until its slot is known.
const NETWORK_PLACEHOLDER: &str = "berth-child-network";

/// `POST /containers/create`: checked, given a network, copies of its
/// binds and its volumes, then made under berth's name for it.
pub async fn create(s: &Arc<Shared>, mut req: Intake) -> Response<Body> {
    let line = req.line.clone();
    let line = line.as_str();
    let value = req.take_json();
    let image = value
        .as_object()
        .and_then(|o| o.iter().find(|(k, _)| k.eq_ignore_ascii_case("Image")))
        .and_then(|(_, v)| v.as_str())
        .unwrap_or_default()
        .to_string();
    let asked = req.param("name").map(str::to_string);
    let (name, mut plan) = match reserve(s, line, value, &image, asked.as_deref()) {
        Ok(r) => r,
        Err(refused) => return *refused,
    };
    let undo = || {
        let child = Some(s.registry()).and_then(|mut r| r.unreserve(&name));
        if let Some(slot) = child.and_then(|c| c.slot) {
            slot.vacate();
        }
    };
    if let Err(failed) = own_network(s, &name, &mut plan, &undo).await {
        return failed;
    }
    if let Err(refused) = copy_binds(s, line, &name, &mut plan, &undo).await {
        return refused;
    }
    // The job's volumes it names, made (labelled) if they are not yet.
    for (asked, real) in plan.volumes.clone() {
        if let Err(resp) = objects::ensure_volume(s, &asked, &real).await {
            undo();
            return resp;
        }
    }
    let engine_name = Some(s.registry())
        .and_then(|mut r| r.pending(&name).map(|c| c.engine_name.clone()))
        .unwrap_or_default();
    // The engine's name for it, and the platform asked: nothing else of the query.
    req.set_param("name", engine_name);
    let path = req.target(req.routed.path());
    let resp = match send_json(s, Method::POST, &path, &req.headers, &plan.body).await {
        Ok(r) => r,
        Err(e) => {
            undo();
            return e;
        }
    };
    let (answer, id) = match created(resp).await {
        Ok(a) => a,
        Err(answer) => {
            undo();
            return answer;
        }
    };
    if let Some(c) = s.registry().pending(&name) {
        c.id = id.clone();
    }
    s.publish();
    match join_networks(s, &req, &plan, &id).await {
        Ok(()) => answer,
        Err(failed) => failed,
    }
}

/// The body checked and the child reserved (its name, its share of the
/// budget) under the registry's lock: two creates at once cannot pass the
/// child limit or the budget together. `Err`: the answer refusing it
/// (boxed: an answer is large, and this returns it by value).
fn reserve(
    s: &Arc<Shared>,
    line: &str,
    value: serde_json::Value,
    image: &str,
    asked: Option<&str>,
) -> Result<(String, check::Plan), Box<Response<Body>>> {
    let reserved = {
        let mut reg = s.registry();
        if reg.count() >= reg.max_children {
            let reason = format!(
                "the job has {} children, the most `max_children` allows; remove one first (or raise max_children in your berth config)",
                reg.max_children
            );
            drop(reg);
            return Err(Box::new(s.refuse(line, "max_children", &reason)));
        }
        match reg.name_for(asked, image) {
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
                        reg.reserve(name.clone(), image.to_string(), plan.memory, plan.pids, None);
                        Ok((name, plan))
                    }
                    Err(r) => Err((r.field, r.reason)),
                }
            }
        }
    };
    reserved.map_err(|(field, why)| Box::new(s.refuse(line, &field, &why)))
}

/// A network of its own, from the pool, when the plan asks for one (held
/// by the pending child). `Err`: the answer, after `undo`.
async fn own_network(
    s: &Arc<Shared>,
    name: &str,
    plan: &mut check::Plan,
    undo: &(dyn Fn() + Sync),
) -> Result<(), Response<Body>> {
    if !plan.own_network {
        return Ok(());
    }
    match s.pool.acquire(&s.docker, &s.ownership, false).await {
        Ok(slot) => {
            plan.body["HostConfig"]["NetworkMode"] = json!(slot.name.clone());
            if let Some(c) = s.registry().pending(name) {
                c.slot = Some(slot);
            }
            Ok(())
        }
        Err(e) => {
            undo();
            Err(proxy::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("berth: {e}"),
            ))
        }
    }
}

/// Workspace binds become read-only copies made now, each one's source in
/// the body set to its copy. `Err`: the refusal, after `undo`.
async fn copy_binds(
    s: &Arc<Shared>,
    line: &str,
    name: &str,
    plan: &mut check::Plan,
    undo: &(dyn Fn() + Sync),
) -> Result<(), Response<Body>> {
    let into = s.dir.join("copies").join(name);
    for copy in plan.copies.clone() {
        let (root, rel, to, upper) = (
            s.workspace.clone(),
            copy.rel.clone(),
            into.join(copy.index.to_string()),
            s.layer_upper.clone(),
        );
        let made = tokio::task::spawn_blocking(move || copy_bind(&root, &rel, to, upper))
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
        match made {
            Ok(to) => {
                plan.body["HostConfig"]["Mounts"][copy.index]["Source"] = json!(to.to_string_lossy());
            }
            Err(why) => {
                undo();
                let what = s.workspace.join(&copy.rel);
                return Err(s.refuse(line, "HostConfig.Mounts", &format!("`{}`: {why}", what.display())));
            }
        }
    }
    Ok(())
}

/// Copy `rel` of the workspace `root` to `to` (blocking), with what a
/// `layer` job wrote there (its `upper`) on top: its children see it.
fn copy_bind(root: &Path, rel: &Path, to: PathBuf, upper: Option<PathBuf>) -> Result<PathBuf, String> {
    crate::store::private::create_dir(to.parent().unwrap_or(&to)).map_err(|e| e.to_string())?;
    match super::super::protect::copy_beneath(root, rel, &to) {
        Ok(()) => {}
        // A path only the job's layer has (it made it).
        Err(e) if upper.is_some() && e.contains("no such file") => {}
        Err(e) => return Err(e),
    }
    // A `layer` job's children see what the job wrote.
    if let Some(upper) = upper {
        crate::layers::merge::overlay_onto(&upper, rel, &to).map_err(|e| e.to_string())?;
    }
    Ok(to)
}

/// The child made as `id` joins the job's networks it was asked onto; one
/// it cannot join removes it. `Err`: the answer saying so.
async fn join_networks(
    s: &Arc<Shared>,
    req: &Intake,
    plan: &check::Plan,
    id: &str,
) -> Result<(), Response<Body>> {
    for (net, settings) in &plan.connect {
        let body = json!({"Container": id, "EndpointConfig": settings});
        let path = format!("{}/networks/{net}/connect", req.routed.prefix);
        let ok = matches!(
            send_json(s, Method::POST, &path, &req.headers, &body).await,
            Ok(r) if r.status().is_success()
        );
        if !ok {
            let removed = super::super::cleanup::remove_container(&s.docker, id).await;
            s.forget_child(id, removed);
            return Err(proxy::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "berth: the child could not join the job's network it asked for; it was removed",
            ));
        }
    }
    Ok(())
}
