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
    let job = Launch {
        id,
        spec,
        cwd,
        output: &output,
        config: &project.config,
        on_denial: reporters::egress_reporter(inner, id, spec, project, cwd),
        layer: None,
    };
    let mut launched = match attempt(inner, job, kind, stop_rx).await {
        Ok(Attempt::Launched(l)) => *l,
        Ok(Attempt::Stopped(req)) => {
            output.release_events();
            finish(
                inner,
                id,
                JobStatus::Killed {
                    signal: None,
                    ended_by: req.ended_by,
                    reason: req.cause,
                },
            );
            return Ok(None);
        }
        Err(e) => {
            output.release_events();
            return Err(e);
        }
    };
    let engine = launched.engine.take();
    let recorded = record_started(inner, id, kind, &launched, engine.as_ref());
    // Watch hits of output that came during the launch follow `started`.
    output.release_events();
    recorded?;
    if let Some(engine) = engine {
        reporters::follow_refusals(project, id, spec, cwd, engine.refusals);
    }
    Ok(Some(launched))
}

/// How far a launch got.
enum Attempt {
    /// A stop came while the image was pulled.
    Stopped(StopRequest),
    Launched(Box<Launched>),
}

/// Prepare `job` (pull or build its image, a stop honoured meanwhile), take
/// its layer, and launch it with the image chosen for it.
async fn attempt(
    inner: &Arc<Inner>,
    job: Launch<'_>,
    kind: RunnerKind,
    stop_rx: &mut mpsc::UnboundedReceiver<StopRequest>,
) -> Result<Attempt> {
    let (id, spec) = (job.id, job.spec);
    let runner = inner.runner(kind);
    let progress = Progress {
        pull: reporters::pull_reporter(inner, id),
        build: reporters::build_reporter(inner, id),
    };
    let prepared = tokio::select! {
        // A runner with nothing to prepare launches even when a stop is
        // already waiting: its supervisor then ends the launched job.
        biased;
        r = runner.prepare(&job, progress) => r?,
        // Dropping `prepare` closed the pull's request: the engine stops it.
        req = stop_rx.recv() => return Ok(Attempt::Stopped(req.unwrap_or_else(|| shutdown_request(inner)))),
    };
    // The layer is taken once the image is there (a pull may be stopped).
    let layer = super::layers::take(inner, id, spec, &job.config.workspace).await?;
    // The spec as launched: the image chosen for it, when one was.
    let chosen = prepared.map(|choice| chosen_image(inner, id, spec, choice));
    let spec = chosen.as_ref().unwrap_or(spec);
    let launched = runner
        .launch(&Launch {
            spec,
            layer: layer.as_ref(),
            ..job
        })
        .await;
    let launched = launched.inspect_err(|_| {
        if let Some(l) = &layer {
            inner.layers.release(&l.meta.name, id);
        }
    })?;
    if kind == RunnerKind::Docker && layer.is_none() {
        spare_for(inner, spec, job.cwd, job.config);
    }
    Ok(Attempt::Launched(Box::new(launched)))
}

/// The launched job on its record (pid, container, ports, its control for
/// stops), then `started`.
fn record_started(
    inner: &Arc<Inner>,
    id: &JobId,
    kind: RunnerKind,
    launched: &Launched,
    engine: Option<&crate::runner::docker::EngineHandle>,
) -> Result<()> {
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
            live.children = engine.map(|h| h.children.clone());
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
    Ok(())
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
fn spare_for(inner: &Arc<Inner>, spec: &JobSpec, cwd: &Path, config: &crate::config::Config) {
    // The instance's key (the daemon's own config): a project's is not applied.
    if inner.config.warm_pool == 0 {
        return;
    }
    let (inner, spec, cwd) = (inner.clone(), spec.clone(), cwd.to_path_buf());
    let config = config.clone();
    tokio::spawn(async move { inner.engine.warm_fill(&spec, &cwd, &config).await });
}
