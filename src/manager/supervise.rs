//! One live job's life after its launch (`start.rs`): the supervisor task
//! that owns it until it ends, kills, and recording the end.
//!
//! The supervisor is the only place that awaits a job's exit, so every way a
//! job can end (on its own, a kill, keep-alive expiry, a foreground budget
//! with `on_timeout = kill`, shutdown) is decided in one `select!` and recorded
//! once, in [`finish`].

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use nix::sys::signal::Signal;
use tokio::sync::mpsc;

use super::{Inner, KillOutcome, KillRequest, KillResult};
use crate::error::{Error, Result};
use crate::model::{EndedBy, EventKind, JobId, JobInfo, JobSpec, JobStatus, OnTimeout, StopCause};
use crate::runner::{Control, Exit, Launched};

/// A stop the supervisor must carry out.
#[derive(Debug, Clone)]
pub struct StopRequest {
    pub ended_by: EndedBy,
    pub cause: StopCause,
    pub signal: i32,
    pub grace: Duration,
}

pub(super) fn shutdown_request(inner: &Inner) -> StopRequest {
    StopRequest {
        ended_by: EndedBy::System,
        cause: StopCause::Shutdown,
        signal: Signal::SIGTERM as i32,
        grace: inner.config.grace(),
    }
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
        control,
        mut exit,
        sweep,
        ..
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
    // A `layer` job's layer is measured now and then: past `layer_size` the
    // job is stopped rather than fill berth's disk.
    let layer = spec
        .layer
        .clone()
        .filter(|_| spec.write == Some(crate::model::WriteMode::Layer));
    let mut size_check = tokio::time::interval_at(
        tokio::time::Instant::now() + super::layers::SIZE_CHECK,
        super::layers::SIZE_CHECK,
    );

    // Wait for the end, or for a reason to stop the job; then stop it.
    let (exit, stop) = loop {
        let req = tokio::select! {
            biased;
            e = &mut exit => break (e, None),
            // A closed channel means the manager is gone: stop as at shutdown.
            req = stop_rx.recv() => req.unwrap_or_else(|| shutdown_request(&inner)),
            _ = &mut keep_alive_timer, if keep_alive.is_some() => {
                system_stop(&inner, StopCause::KeepAliveExpired { secs: spec.keep_alive.unwrap_or_default() })
            }
            _ = size_check.tick(), if layer.is_some() => {
                let limit = inner.config.layer_bytes;
                let name = layer.as_deref().unwrap_or_default();
                let Some(cause) = super::layers::over_size(&inner, name, limit).await else {
                    continue;
                };
                tracing::warn!(job = %id, layer = name, limit, "the job's layer outgrew layer_size; stopping it");
                system_stop(&inner, cause)
            }
            _ = &mut budget_timer, if budget_armed => {
                budget_armed = false;
                let secs = spec.timeout.unwrap_or_default();
                match spec.on_timeout {
                    OnTimeout::Kill => StopRequest {
                        grace: inner.config.grace().min(Duration::from_millis(500)),
                        ..system_stop(&inner, StopCause::TimedOut { secs })
                    },
                    OnTimeout::Background => {
                        // Already promoted by a user is fine: nothing to do.
                        let _ = inner.promote(&id, EndedBy::System, format!("auto background ({secs}s budget exceeded)"));
                        continue;
                    }
                }
            }
        };
        let e = stop_job(&control, &mut exit, req.signal, req.grace).await;
        break (e, Some(req));
    };
    wind_down(&inner, &id, &control).await;
    if matches!(exit, Exit::Stranded(_)) {
        hold_slot(&inner, &id);
    }
    let status = end_status(&inner, stop, exit);
    finish(&inner, &id, status);
    if let Some(sweep) = sweep {
        sweep_after(&inner, &id, sweep).await;
    }
}

/// Clear the set-uid/set-gid bits the ended job left in its workspace
/// (`runner/setuid.rs`), then put the count on its record and say it in a
/// `swept` event. It runs once the end is recorded and answered, not
/// before: a walk of a large workspace (a `node_modules`) no longer holds
/// the end, and no such file stays reachable longer than before, as the
/// walk starts at the same point (the job's processes gone, its children
/// ended) and runs under the manager's tracker (a shutdown waits for it).
async fn sweep_after(inner: &Arc<Inner>, id: &JobId, sweep: crate::runner::setuid::Sweep) {
    let swept = tokio::task::spawn_blocking(move || sweep.run())
        .await
        .unwrap_or_default();
    if swept.incomplete {
        tracing::warn!(job = %id, entries = swept.entries, "set-uid sweep of the workspace stopped at its bound");
    }
    let _ = inner.commit(id, |e| {
        e.info.setid_cleared = Some(swept.cleared);
        Ok(())
    });
    inner.events.emit(
        id.clone(),
        EventKind::Swept {
            cleared: swept.cleared,
            entries: swept.entries,
            incomplete: swept.incomplete,
        },
    );
}

/// A stop berth itself decides (keep-alive, a layer outgrown): SIGTERM,
/// then the configured grace.
fn system_stop(inner: &Inner, cause: StopCause) -> StopRequest {
    StopRequest {
        ended_by: EndedBy::System,
        cause,
        signal: Signal::SIGTERM as i32,
        grace: inner.config.grace(),
    }
}

/// What an exited job leaves, cleared before it counts as ended: children
/// of its scoped engine, a remote layer's changes, its container, and its
/// layer's count (set-uid bits in the workspace go just after: `sweep_after`).
async fn wind_down(inner: &Arc<Inner>, id: &JobId, control: &Control) {
    // What it started through its scoped engine goes before the job counts
    // as ended (children, one at a time; see runner/docker/scoped/).
    control.end_children().await;
    // A remote `layer` job's changes come back into its layer first.
    let lost = control.collect().await;
    // The container goes in the background (the engine's removals list it
    // until it is gone, for teardown and the watchdog): the job is answered
    // as soon as it exited and its output was drained.
    control.cleanup();
    // What it left in its layer, on its record (`layers.rs`).
    super::layers::settle(inner, id, lost).await;
}

/// The status a job ended with: how it `exit`ed, or the `stop` that ended
/// it; lost when its output could not all be kept.
fn end_status(inner: &Inner, stop: Option<StopRequest>, exit: Exit) -> JobStatus {
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
        (None, Exit::Lost(reason) | Exit::Stranded(reason)) => JobStatus::Lost { reason },
    };
    // Its process is gone, but its output could not all be kept: said as
    // lost, with what the process did, rather than a clean end.
    match inner.store.unavailable() {
        Some(why) => JobStatus::Lost {
            reason: format!(
                "store unavailable ({why}): its output could not all be kept; the process had ended ({})",
                status.name()
            ),
        },
        None => status,
    }
}

/// Polite signal, grace, then SIGKILL; returns once the job has ended and drained.
async fn stop_job(
    control: &Control,
    exit: &mut BoxFuture<'static, Exit>,
    signal: i32,
    grace: Duration,
) -> Exit {
    control.signal(signal).await;
    if let Ok(e) = tokio::time::timeout(grace, &mut *exit).await {
        return e;
    }
    // Asked again until the job ended: an engine that did not answer (a
    // blip) never heard the kill, and the job is followed again once it
    // answers (`runner/docker/follow.rs`).
    loop {
        control.kill().await;
        if let Ok(e) = tokio::time::timeout(KILL_AGAIN, &mut *exit).await {
            return e;
        }
    }
}

/// How long after a SIGKILL it is sent again while the job has not ended.
const KILL_AGAIN: Duration = Duration::from_secs(5);

/// A job given up while the engine did not answer leaves its container
/// behind, maybe still running: its slot of the cap stays taken (the cap
/// counts every container berth may still own) until the engine confirmed
/// the container removed, asked again with a growing pause.
fn hold_slot(inner: &Arc<Inner>, id: &JobId) {
    let (slot, container) = {
        let mut reg = inner.registry.lock().unwrap();
        let Ok(e) = reg.get_mut(id) else { return };
        let slot = e.live.as_mut().and_then(|l| l.slot.take());
        (slot, e.info.container_id.clone())
    };
    let (Some(slot), Some(container)) = (slot, container) else {
        return;
    };
    tracing::warn!(job = %id, container = %container, "the job's slot stays taken until its container is removed");
    let weak = Arc::downgrade(inner);
    tokio::spawn(async move {
        let mut pause = Duration::from_secs(1);
        while let Some(inner) = weak.upgrade() {
            if inner.shutting_down.load(std::sync::atomic::Ordering::SeqCst)
                || inner.engine.remove_if_owned(&container).await
            {
                break;
            }
            drop(inner);
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(30));
        }
        drop(slot);
    });
}

/// Record the end of a job once: record, event, then the status watchers.
pub(super) fn finish(inner: &Arc<Inner>, id: &JobId, status: JobStatus) {
    let Ok((ended, last_seq)) = inner.commit(id, |e| {
        let ended = e.info.end(status.clone(), Inner::now());
        e.info.last_seq = e.output.progress().last_seq;
        // The children as they were left (removed, once the engine closed).
        if let Some(children) = e.live.as_ref().and_then(|l| l.children.as_ref()) {
            e.info.children = children.borrow().clone();
        }
        // Its slot of the cap goes with it, under the lock that makes the
        // status terminal: whoever sees the job ended finds the slot free.
        e.live = None;
        Ok((ended, e.info.last_seq))
    }) else {
        return;
    };
    tracing::debug!(job = %id, status = status.name(), last_seq, "job ended");
    // Its layer is let go (a launched job took it; `layers.rs`).
    let layer = {
        let reg = inner.registry.lock().unwrap();
        reg.get(id)
            .ok()
            .and_then(|e| e.info.writes.as_ref()?.layer.clone())
    };
    if let Some(name) = layer {
        inner.layers.release(&name, id);
    }
    inner.events.emit(id.clone(), ended);
    {
        let reg = inner.registry.lock().unwrap();
        if let Ok(e) = reg.get(id) {
            e.status_tx.send_replace(status);
        }
    }
    super::finished::trim(inner);
}

pub(super) async fn kill(inner: &Arc<Inner>, id: &JobId, req: KillRequest) -> Result<KillOutcome> {
    crate::job::check_reason(req.reason.as_deref())?;
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
        let Ok(e) = reg.get(id) else {
            drop(reg);
            // A finished job only in the store (`finished.rs`).
            return Ok(outcome(KillResult::AlreadyFinished, &inner.stored(id)?));
        };
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
