//! A job's launch through its runner (`start.rs` calls it, at once or once
//! a queued job has its slot): its image pulled or built first, with
//! progress on its record and as events, a stop while pulling honoured,
//! its layer taken, and the launched job's pid, container and ports
//! recorded before `started` is emitted.

use std::path::Path;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::Inner;
use super::project::Project;
use super::reporters;
use super::supervise::{StopRequest, finish, shutdown_request};
use crate::error::Result;
use crate::events::EventKind;
use crate::model::{JobId, JobSpec, JobStatus, RunnerKind};
use crate::runner::{Launch, Launched, Progress};

/// Launch through the runner. `Ok(None)`: a stop came while the image was
/// pulled; the pull was cancelled and the job ended as killed.
pub(super) async fn launch(
    inner: &Arc<Inner>,
    id: &JobId,
    spec: &JobSpec,
    kind: RunnerKind,
    project: &Project,
    cwd: &Path,
    stop_rx: &mut mpsc::UnboundedReceiver<StopRequest>,
) -> Result<Option<Launched>> {
    let output = {
        let reg = inner.registry.lock().unwrap();
        reg.get(id)?.output.clone()
    };
    let runner = inner.runner(kind);
    let job = Launch {
        id,
        spec,
        cwd,
        output: &output,
        config: &project.config,
        on_denial: reporters::egress_reporter(inner, id, spec, project, cwd),
        layer: None,
    };
    let progress = Progress {
        pull: reporters::pull_reporter(inner, id),
        build: reporters::build_reporter(inner, id),
    };
    let prepared = tokio::select! {
        // A runner with nothing to prepare launches even when a stop is
        // already waiting: its supervisor then ends the launched job.
        biased;
        r = runner.prepare(&job, progress) => r,
        req = stop_rx.recv() => {
            // Dropping `prepare` closed the pull's request: the engine stops it.
            let req = req.unwrap_or_else(|| shutdown_request(inner));
            output.release_events();
            finish(inner, id, JobStatus::Killed { signal: None, ended_by: req.ended_by, reason: req.cause });
            return Ok(None);
        }
    };
    // The layer is taken once the image is there (a pull may be stopped).
    let layer = match &prepared {
        Ok(_) => match super::layers::take(inner, id, spec, &project.config.workspace).await {
            Ok(l) => l,
            Err(e) => {
                output.release_events();
                return Err(e);
            }
        },
        Err(_) => None,
    };
    let job = Launch {
        layer: layer.as_ref(),
        ..job
    };
    // The spec as launched: the image chosen for it, when one was.
    let chosen = match prepared {
        Ok(Some(choice)) => Some(chosen_image(inner, id, spec, choice)),
        Ok(None) => None,
        Err(e) => {
            output.release_events();
            return Err(e);
        }
    };
    let launched = runner
        .launch(&Launch {
            spec: chosen.as_ref().unwrap_or(spec),
            ..job
        })
        .await;
    let mut launched = match launched {
        Ok(l) => l,
        Err(e) => {
            output.release_events();
            if let Some(l) = &layer {
                inner.layers.release(&l.meta.name, id);
            }
            return Err(e);
        }
    };
    if kind == RunnerKind::Docker && layer.is_none() {
        spare_for(inner, chosen.as_ref().unwrap_or(spec), cwd, project);
    }
    let engine = launched.engine.take();
    let start_mode = inner.commit(id, |e| {
        e.set_status(JobStatus::Running);
        e.info.started_at = Some(Inner::now());
        e.info.pid = launched.pid;
        e.info.container_id = launched.container_id.clone();
        e.info.node = launched.node.clone();
        e.info.ports = launched.ports.clone();
        e.info.limits = launched.limits.clone();
        if let Some(live) = e.live.as_mut() {
            live.control = Some(launched.control.clone());
            live.internal_ip = launched.internal_ip;
            live.children = engine.as_ref().map(|h| h.children.clone());
        }
        e.pid_start = launched.pid.and_then(crate::procinfo::start_time);
        Ok(e.info.start_mode)
    })?;
    inner.events.emit(
        id.clone(),
        EventKind::Started {
            runner: kind,
            start_mode,
            ports: launched.ports.clone(),
        },
    );
    // Watch hits of output that came during the launch follow `started`.
    output.release_events();
    if let Some(engine) = engine {
        reporters::follow_refusals(project, id, spec, cwd, engine.refusals);
    }
    Ok(Some(launched))
}

/// The image chosen for a job, on its record; the spec it is launched with.
fn chosen_image(
    inner: &Arc<Inner>,
    id: &JobId,
    spec: &JobSpec,
    choice: crate::images::ImageChoice,
) -> JobSpec {
    let spec = JobSpec {
        image: Some(choice.name.clone()),
        ..spec.clone()
    };
    if let Ok(e) = inner.registry.lock().unwrap().get_mut(id) {
        e.info.pulling = None;
        e.info.building = None;
        e.info.image = Some(choice);
    }
    spec
}

/// A container job started: a long-lived manager with `warm_pool` makes a
/// spare container for the next job of its shape (`runner/docker/launch/spare.rs`).
fn spare_for(inner: &Arc<Inner>, spec: &JobSpec, cwd: &Path, project: &Project) {
    // The instance's key (the daemon's own config): a project's is not applied.
    if inner.config.warm_pool == 0 {
        return;
    }
    let (inner, spec, cwd) = (inner.clone(), spec.clone(), cwd.to_path_buf());
    let config = project.config.clone();
    tokio::spawn(async move { inner.engine.warm_fill(&spec, &cwd, &config).await });
}
