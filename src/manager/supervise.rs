//! One job's life: taking a slot (or waiting in the queue), launching through
//! its runner, and the supervisor task that owns the live job until it ends.
//!
//! The supervisor is the only place that awaits a job's exit, so every way a
//! job can end (on its own, a kill, keep-alive expiry, a foreground budget
//! with `on_timeout = kill`, shutdown) is decided in one `select!` and recorded
//! once, in [`finish`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};

use super::admit::{Admitted, DefaultBudget, admit};
use super::project::Project;
use super::{Entry, Inner, KillOutcome, KillRequest, KillResult, Live, Registry, number};
use crate::error::{Error, Result};
use crate::events::EventKind;
use crate::model::{
    EndedBy, JobId, JobInfo, JobSpec, JobStatus, OnTimeout, RunnerKind, StartMode, StopCause,
};
use crate::runner::{self, Control, Exit, Launched};

/// A stop the supervisor must carry out.
#[derive(Debug, Clone)]
pub struct StopRequest {
    pub ended_by: EndedBy,
    pub cause: StopCause,
    pub signal: i32,
    pub grace: Duration,
}

pub(super) async fn start(
    inner: &Arc<Inner>,
    spec: JobSpec,
    client: &str,
    budget: DefaultBudget,
) -> Result<JobId> {
    if inner.shutting_down.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(Error::ShuttingDown);
    }
    // Defaults, validation, the working directory, the safety checks and
    // the runner: once, in `admit.rs`.
    let Admitted {
        spec,
        project,
        kind,
        runner_note,
        cwd,
        watchers,
    } = admit(inner, spec, client, budget).await?;
    let workspace = &project.config.workspace;
    let (stop_tx, mut stop_rx) = mpsc::unbounded_channel();
    // The cap is looked at before anything is made for the job (a refused
    // start leaves no id used), and again when it is registered: its id
    // (a file lock and fsync) and its directory are made outside the
    // registry lock, which readers share.
    cap_check(inner, &spec)?;
    let id = inner.ids.next()?;
    let dir = inner.job_dir(&id);
    let output = inner.job_output(&id, watchers, 1)?;
    let (id, queued) = {
        let order = inner.record_order.lock().unwrap();
        let mut reg = inner.registry.lock().unwrap();
        let queued = match cap_check_in(inner, &reg, &spec) {
            Ok(queued) => queued,
            Err(e) => {
                drop(reg);
                // Lost a race for the last slot: nothing of the job stays.
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        output.hold_events();
        let status = if queued {
            JobStatus::Queued
        } else {
            JobStatus::Starting
        };
        let start_mode = if spec.background {
            StartMode::Background
        } else {
            StartMode::Foreground
        };
        let info = JobInfo {
            id: id.clone(),
            label: spec.label.clone().unwrap_or_else(|| spec.display_command()),
            command: spec.display_command(),
            spec: spec.clone(),
            runner: Some(kind),
            runner_note: runner_note.clone(),
            workspace: Some(workspace.clone()),
            project_note: project.note.clone(),
            status: status.clone(),
            start_mode,
            created_at: Inner::now(),
            started_at: None,
            ended_at: None,
            exit_code: None,
            ended_by: None,
            reason: None,
            promotion_reason: None,
            pid: None,
            container_id: None,
            ports: Vec::new(),
            limits: Default::default(),
            usage: None,
            logs: output.paths(),
            last_seq: 0,
            queue_position: None,
            image: None,
            pulling: None,
            building: None,
            recovered: false,
        };
        let n = number(&id).expect("allocated ids are job-N");
        reg.jobs.insert(
            n,
            Entry {
                info,
                pid_start: None,
                output,
                status_tx: watch::channel(status).0,
                mode_tx: watch::channel(start_mode).0,
                live: Some(Live {
                    stop_tx,
                    control: None,
                    internal_ip: None,
                }),
                ready_seen: false,
            },
        );
        if queued {
            reg.queue.push_back(id.clone());
            // A start that launches now is recorded once it runs: a refused
            // launch must leave nothing behind, in memory or on disk.
            let row = inner.record(reg.get(&id).expect("just inserted"));
            drop(reg);
            inner.store.put_run(row);
        }
        drop(order);
        (id, queued)
    };
    let fallback_event = |note: &Option<String>| {
        if let Some(note) = note {
            inner
                .events
                .emit(id.clone(), EventKind::Fallback { note: note.clone() });
        }
    };
    if queued {
        fallback_event(&runner_note);
        inner.events.emit(id.clone(), EventKind::Queued);
        spawn_guarded(
            inner,
            &id,
            run_queued(inner.clone(), id.clone(), spec, kind, project, cwd, stop_rx),
        );
        return Ok(id);
    }
    match launch(inner, &id, &spec, kind, &project, &cwd, &mut stop_rx).await {
        Ok(Some(launched)) => {
            fallback_event(&runner_note);
            spawn_guarded(
                inner,
                &id,
                supervise(inner.clone(), id.clone(), spec, launched, stop_rx),
            );
            Ok(id)
        }
        // Stopped while its image was pulled: it ended, recorded as killed.
        Ok(None) => Ok(id),
        Err(e) => {
            // Refused at the door: leave no record behind.
            let removed = {
                let mut reg = inner.registry.lock().unwrap();
                number(&id).and_then(|n| reg.jobs.remove(&n))
            };
            if let Some(dir) = removed.as_ref().and_then(|e| e.info.logs.stdout.parent()) {
                let _ = std::fs::remove_dir_all(dir);
            }
            Err(e)
        }
    }
}

/// Wait in line for a background slot, then launch (or end if stopped first).
async fn run_queued(
    inner: Arc<Inner>,
    id: JobId,
    spec: JobSpec,
    kind: RunnerKind,
    project: Arc<Project>,
    cwd: PathBuf,
    mut stop_rx: mpsc::UnboundedReceiver<StopRequest>,
) {
    loop {
        let notified = inner.slot_freed.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        {
            let order = inner.record_order.lock().unwrap();
            let mut reg = inner.registry.lock().unwrap();
            let first = reg.queue.front() == Some(&id);
            if first && reg.holding_slots().len() < inner.config.max_jobs {
                reg.queue.pop_front();
                let row = reg.get_mut(&id).ok().map(|e| {
                    e.info.status = JobStatus::Starting;
                    e.status_tx.send_replace(JobStatus::Starting);
                    inner.record(e)
                });
                drop(reg);
                if let Some(row) = row {
                    inner.store.put_run(row);
                }
                drop(order);
                break;
            }
        }
        tokio::select! {
            _ = notified => {}
            req = stop_rx.recv() => {
                let req = req.unwrap_or_else(|| shutdown_request(&inner));
                inner.registry.lock().unwrap().queue.retain(|q| q != &id);
                finish(&inner, &id, JobStatus::Killed { signal: None, ended_by: req.ended_by, reason: req.cause });
                // The line moved: let the next one look.
                inner.slot_freed.notify_waiters();
                return;
            }
        }
    }
    // Others in line may fit too (several slots can free at once).
    inner.slot_freed.notify_waiters();
    match launch(&inner, &id, &spec, kind, &project, &cwd, &mut stop_rx).await {
        Ok(Some(launched)) => supervise(inner, id, spec, launched, stop_rx).await,
        Ok(None) => {}
        Err(e) => finish(&inner, &id, JobStatus::StartFailed { error: e.to_string() }),
    }
}

/// Whether `spec` may start now (`Ok(false)`), must wait in the queue
/// (`Ok(true)`), or is refused because the cap is reached.
fn cap_check(inner: &Inner, spec: &JobSpec) -> Result<bool> {
    let reg = inner.registry.lock().unwrap();
    cap_check_in(inner, &reg, spec)
}

fn cap_check_in(inner: &Inner, reg: &Registry, spec: &JobSpec) -> Result<bool> {
    // The cap counts every running job, foreground or background, from any
    // client; queued jobs are ahead of a new start in line for a slot.
    let running = reg.holding_slots();
    if running.len() + reg.queue.len() < inner.config.max_jobs {
        return Ok(false);
    }
    if spec.queue {
        return Ok(true);
    }
    let names = running
        .iter()
        .map(|i| format!("{} `{}`", i.id, i.command))
        .collect::<Vec<_>>()
        .join(", ");
    Err(Error::CapReached {
        max: inner.config.max_jobs,
        running: names,
    })
}

fn shutdown_request(inner: &Inner) -> StopRequest {
    StopRequest {
        ended_by: EndedBy::System,
        cause: StopCause::Shutdown,
        signal: Signal::SIGTERM as i32,
        grace: inner.config.grace(),
    }
}

/// Launch through the runner. `Ok(None)`: a stop came while the image was
/// pulled; the pull was cancelled and the job ended as killed.
async fn launch(
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
    let launched = match kind {
        #[cfg(test)]
        _ if inner.fake.get().is_some() => {
            let fake = inner.fake.get().expect("checked by the guard");
            fake.launch(id, spec, &output).await
        }
        RunnerKind::Host => runner::host::launch(spec, cwd, &output).await,
        RunnerKind::Docker => {
            let prepared = tokio::select! {
                r = inner.runners.prepare(id, spec, &project.config, pull_reporter(inner, id), build_reporter(inner, id)) => r,
                req = stop_rx.recv() => {
                    // Dropping `prepare` closed the pull's request: the engine stops it.
                    let req = req.unwrap_or_else(|| shutdown_request(inner));
                    output.release_events();
                    finish(inner, id, JobStatus::Killed { signal: None, ended_by: req.ended_by, reason: req.cause });
                    return Ok(None);
                }
            };
            match prepared {
                Ok(choice) => {
                    let spec = JobSpec {
                        image: Some(choice.name.clone()),
                        ..spec.clone()
                    };
                    if let Ok(e) = inner.registry.lock().unwrap().get_mut(id) {
                        e.info.pulling = None;
                        e.info.building = None;
                        e.info.image = Some(choice);
                    }
                    inner
                        .runners
                        .launch_in(id, &spec, cwd, &output, &project.config)
                        .await
                }
                Err(e) => Err(e),
            }
        }
    };
    let launched = match launched {
        Ok(l) => l,
        Err(e) => {
            output.release_events();
            return Err(e);
        }
    };
    let start_mode = {
        let order = inner.record_order.lock().unwrap();
        let mut reg = inner.registry.lock().unwrap();
        let e = reg.get_mut(id)?;
        e.info.status = JobStatus::Running;
        e.info.started_at = Some(Inner::now());
        e.info.pid = launched.pid;
        e.info.container_id = launched.container_id.clone();
        e.info.ports = launched.ports.clone();
        e.info.limits = launched.limits.clone();
        if let Some(live) = e.live.as_mut() {
            live.control = Some(launched.control.clone());
            live.internal_ip = launched.internal_ip;
        }
        e.pid_start = launched.pid.and_then(crate::procinfo::start_time);
        e.status_tx.send_replace(JobStatus::Running);
        let (row, mode) = (inner.record(e), e.info.start_mode);
        drop(reg);
        inner.store.put_run(row);
        drop(order);
        mode
    };
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
    Ok(Some(launched))
}

/// Pull progress of job `id`: kept on its record (`starting (pulling)`) and
/// emitted as a `pulling` event (the pull throttles how often).
fn pull_reporter(inner: &Arc<Inner>, id: &JobId) -> crate::runner::docker::ProgressFn {
    let inner = Arc::downgrade(inner);
    let id = id.clone();
    Arc::new(move |p: crate::images::PullProgress| {
        let Some(inner) = inner.upgrade() else { return };
        if let Ok(e) = inner.registry.lock().unwrap().get_mut(&id) {
            e.info.pulling = Some(p.clone());
        }
        inner.events.emit(id.clone(), EventKind::Pulling(p));
    })
}

/// Build progress of job `id`'s project image: kept on its record
/// (`starting (building)`) and emitted as a `building` event.
fn build_reporter(inner: &Arc<Inner>, id: &JobId) -> crate::runner::docker::BuildProgressFn {
    let inner = Arc::downgrade(inner);
    let id = id.clone();
    Arc::new(move |p: crate::images::BuildProgress| {
        let Some(inner) = inner.upgrade() else { return };
        if let Ok(e) = inner.registry.lock().unwrap().get_mut(&id) {
            e.info.building = Some(p.clone());
        }
        inner.events.emit(id.clone(), EventKind::Building(p));
    })
}

/// Run a job's supervising task on the manager's tracker, so that a bug in
/// it cannot strand the job: were the task to panic, the job would stay
/// `running` forever (its end never recorded, its slot never freed, shutdown
/// waiting on it). Instead the job is killed and recorded `lost`, with the
/// reason, and the manager keeps serving.
pub(super) fn spawn_guarded(
    inner: &Arc<Inner>,
    id: &JobId,
    task: impl std::future::Future<Output = ()> + Send + 'static,
) {
    use futures_util::FutureExt;
    let (inner, id) = (inner.clone(), id.clone());
    inner.clone().tasks.spawn(async move {
        let Err(panic) = std::panic::AssertUnwindSafe(task).catch_unwind().await else {
            return;
        };
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        tracing::error!(job = %id, panic = %what, "the job's supervisor failed; killing the job and recording it lost");
        let control = {
            let reg = inner.registry.lock().unwrap();
            reg.get(&id).ok().and_then(|e| e.live.as_ref()?.control.clone())
        };
        if let Some(control) = control {
            control.kill().await;
            control.cleanup();
        }
        inner.registry.lock().unwrap().queue.retain(|q| q != &id);
        let live = {
            let reg = inner.registry.lock().unwrap();
            reg.get(&id).is_ok_and(|e| e.live.is_some())
        };
        if live {
            let reason = format!("berth's supervisor of this job failed ({what}); the job was killed");
            finish(&inner, &id, JobStatus::Lost { reason });
        }
    });
}

/// Own the live job until it ends.
pub(super) async fn supervise(
    inner: Arc<Inner>,
    id: JobId,
    spec: JobSpec,
    launched: Launched,
    mut stop_rx: mpsc::UnboundedReceiver<StopRequest>,
) {
    let Launched {
        control, mut exit, ..
    } = launched;
    let far = Duration::from_secs(60 * 60 * 24 * 365);
    let secs = |s: Option<f64>| s.map(Duration::from_secs_f64);
    let keep_alive = secs(spec.keep_alive);
    let budget = if spec.background { None } else { secs(spec.timeout) };
    let keep_alive_timer = tokio::time::sleep(keep_alive.unwrap_or(far));
    let budget_timer = tokio::time::sleep(budget.unwrap_or(far));
    let mut keep_alive_timer = std::pin::pin!(keep_alive_timer);
    let mut budget_timer = std::pin::pin!(budget_timer);
    let mut budget_armed = budget.is_some();
    let mut stop: Option<StopRequest> = None;

    let exit = loop {
        tokio::select! {
            biased;
            e = &mut exit => break e,
            req = stop_rx.recv() => {
                // A closed channel means the manager is gone: stop as at shutdown.
                let req = req.unwrap_or_else(|| shutdown_request(&inner));
                let e = stop_job(&control, &mut exit, req.signal, req.grace).await;
                stop = Some(req);
                break e;
            }
            _ = &mut keep_alive_timer, if keep_alive.is_some() => {
                let req = StopRequest {
                    ended_by: EndedBy::System,
                    cause: StopCause::KeepAliveExpired { secs: spec.keep_alive.unwrap_or_default() },
                    signal: Signal::SIGTERM as i32,
                    grace: inner.config.grace(),
                };
                let e = stop_job(&control, &mut exit, req.signal, req.grace).await;
                stop = Some(req);
                break e;
            }
            _ = &mut budget_timer, if budget_armed => {
                budget_armed = false;
                let secs = spec.timeout.unwrap_or_default();
                match spec.on_timeout {
                    OnTimeout::Kill => {
                        let req = StopRequest {
                            ended_by: EndedBy::System,
                            cause: StopCause::TimedOut { secs },
                            signal: Signal::SIGTERM as i32,
                            grace: inner.config.grace().min(Duration::from_millis(500)),
                        };
                        let e = stop_job(&control, &mut exit, req.signal, req.grace).await;
                        stop = Some(req);
                        break e;
                    }
                    OnTimeout::Background => {
                        // Already promoted by a user is fine: nothing to do.
                        let _ = inner.promote(&id, EndedBy::System, format!("auto background ({secs}s budget exceeded)"));
                    }
                }
            }
        }
    };
    // The container goes in the background (the engine's removals list it
    // until it is gone, for teardown and the watchdog): the job is answered
    // as soon as it exited and its output was drained.
    control.cleanup();
    let status = match (stop, exit) {
        (
            Some(StopRequest {
                cause: StopCause::TimedOut { .. },
                ..
            }),
            _,
        ) => JobStatus::TimedOut,
        (Some(req), exit) => JobStatus::Killed {
            signal: match exit {
                Exit::Signal(s) => Some(s),
                _ => None,
            },
            ended_by: req.ended_by,
            reason: req.cause,
        },
        (None, Exit::Code(code)) => JobStatus::Exited { code },
        (None, Exit::Signal(signal)) => JobStatus::Signaled { signal },
        (None, Exit::Oom) => JobStatus::Killed {
            signal: Some(Signal::SIGKILL as i32),
            ended_by: EndedBy::System,
            reason: StopCause::Oom,
        },
        (None, Exit::Lost(reason)) => JobStatus::Lost { reason },
    };
    finish(&inner, &id, status);
}

/// Polite signal, grace, then SIGKILL; returns once the job has ended and drained.
async fn stop_job(
    control: &Control,
    exit: &mut BoxFuture<'static, Exit>,
    signal: i32,
    grace: Duration,
) -> Exit {
    control.signal(signal).await;
    match tokio::time::timeout(grace, &mut *exit).await {
        Ok(e) => e,
        Err(_) => {
            control.kill().await;
            exit.await
        }
    }
}

/// Record the end of a job once: record, event, then the status watchers.
pub(super) fn finish(inner: &Arc<Inner>, id: &JobId, status: JobStatus) {
    let (ended, last_seq) = {
        let order = inner.record_order.lock().unwrap();
        let mut reg = inner.registry.lock().unwrap();
        let Ok(e) = reg.get_mut(id) else { return };
        let ended = e.info.end(status.clone(), Inner::now());
        e.info.last_seq = e.output.progress().last_seq;
        e.live = None;
        let (row, last_seq) = (inner.record(e), e.info.last_seq);
        drop(reg);
        inner.store.put_run(row);
        drop(order);
        (ended, last_seq)
    };
    tracing::debug!(job = %id, status = status.name(), last_seq, "job ended");
    inner.events.emit(id.clone(), ended);
    {
        let reg = inner.registry.lock().unwrap();
        if let Ok(e) = reg.get(id) {
            e.status_tx.send_replace(status);
        }
    }
    inner.slot_freed.notify_waiters();
}

pub(super) async fn kill(inner: &Arc<Inner>, id: &JobId, req: KillRequest) -> Result<KillOutcome> {
    let signal = req.signal.unwrap_or(Signal::SIGTERM as i32);
    if Signal::try_from(signal).is_err() {
        return Err(Error::InvalidValue {
            what: "signal",
            input: signal.to_string(),
            message: "not a signal number (15 = TERM, 9 = KILL, 2 = INT)".into(),
        });
    }
    let grace = match req.grace {
        Some(g) if g.is_finite() && g >= 0.0 => Duration::from_secs_f64(g),
        Some(g) => {
            return Err(Error::InvalidValue {
                what: "grace",
                input: g.to_string(),
                message: "must be zero or more seconds".into(),
            });
        }
        None => inner.config.grace(),
    };
    let ended_by = req.ended_by.unwrap_or(EndedBy::Agent);
    let (tx, mut status_rx) = {
        let reg = inner.registry.lock().unwrap();
        let e = reg.get(id)?;
        match (&e.live, e.info.status.is_terminal()) {
            (Some(live), false) => (live.stop_tx.clone(), e.status_tx.subscribe()),
            _ => return Ok(outcome(KillResult::AlreadyFinished, &e.info)),
        }
    };
    let stop = StopRequest {
        ended_by,
        cause: req.cause.unwrap_or_else(|| {
            StopCause::requested(req.reason.unwrap_or_else(|| format!("killed by {ended_by}")))
        }),
        signal,
        grace,
    };
    let _ = tx.send(stop);
    while !status_rx.borrow_and_update().is_terminal() {
        if status_rx.changed().await.is_err() {
            break;
        }
    }
    let reg = inner.registry.lock().unwrap();
    let info = &reg.get(id)?.info;
    let result = match info.status {
        JobStatus::Killed { .. } | JobStatus::TimedOut => KillResult::Killed,
        _ => KillResult::AlreadyFinished,
    };
    Ok(outcome(result, info))
}

fn outcome(result: KillResult, info: &JobInfo) -> KillOutcome {
    KillOutcome {
        result,
        job: info.id.clone(),
        status: info.status.clone(),
        ended_by: info.ended_by,
        reason: info.reason.clone(),
        exit_code: info.exit_code,
    }
}
