//! Starting a job: admission (`admit.rs`), an id and a record made outside
//! the registry lock, a slot of the cap or a place in the queue, and the
//! launch through its runner (`launch.rs`: pulling or building its image
//! first, with progress on the record and as events). Once launched, the
//! job is handed to its supervisor (`supervise.rs`), which owns it until it
//! ends.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::admit::{Admitted, DefaultBudget, admit};
use super::launch::launch;
use super::project::Project;
use super::supervise::{StopRequest, finish, shutdown_request, spawn_guarded, supervise};
use super::{Inner, JobEntry, Live, Registry, number};
use crate::error::{Error, Result};
use crate::events::EventKind;
use crate::model::{JobId, JobInfo, JobSpec, JobStatus, RunnerKind, StartMode};

/// Admit `spec`, give it an id and a record, and launch it now or queue it.
pub(super) async fn start(
    inner: &Arc<Inner>,
    spec: JobSpec,
    client: &str,
    budget: DefaultBudget,
) -> Result<JobId> {
    preflight(inner, &spec)?;
    // Defaults, validation, the working directory, the safety checks and
    // the runner: once, in `admit.rs`.
    let Admitted {
        mut spec,
        project,
        kind,
        runner_note,
        cwd,
        watchers,
        mut writes,
    } = admit(inner, spec, client, budget).await?;
    // The cap is looked at before anything is made for the job (a refused
    // start leaves no id used), and its slot taken when it is registered:
    // its id (a file lock and fsync) and its directory are made outside the
    // registry lock, which readers share.
    if inner.slots.available_permits() == 0 {
        cap_refusal(inner, &inner.registry.lock().unwrap(), &spec)?;
    }
    let (id, output) = new_id(inner, watchers).await?;
    super::layers::own_layer(&mut spec, &mut writes, &id);
    let dir = inner.job_dir(&id);
    let (stop_tx, mut stop_rx) = mpsc::unbounded_channel();
    let made = Made {
        id: &id,
        dir: &dir,
        kind,
        runner_note: runner_note.clone(),
        writes,
        output,
        stop_tx,
    };
    let line = register(inner, made, &spec, &project)?;
    let fallback_event = |note: &Option<String>| {
        if let Some(note) = note {
            inner
                .events
                .emit(id.clone(), EventKind::Fallback { note: note.clone() });
        }
    };
    if let Some(line) = line {
        // A start that launches now is recorded once it runs (a refused
        // launch leaves nothing behind, in memory or on disk); a queued one
        // is recorded now.
        let _ = inner.commit(&id, |_| Ok(()));
        fallback_event(&runner_note);
        inner.events.emit(id.clone(), EventKind::Queued);
        spawn_guarded(
            inner,
            &id,
            run_queued(inner.clone(), id.clone(), spec, kind, project, cwd, line, stop_rx),
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
            forget(inner, &id);
            Err(e)
        }
    }
}

/// A new job's id and its output: the id's file lock (and fsync) and the
/// output's files are made off the async workers.
async fn new_id(
    inner: &Arc<Inner>,
    watchers: crate::watch::Watchers,
) -> Result<(JobId, Arc<crate::output::JobOutput>)> {
    let made = inner.clone();
    tokio::task::spawn_blocking(move || -> Result<_> {
        let id = made.ids.next()?;
        let output = made.job_output(&id, watchers, 1)?;
        Ok((id, output))
    })
    .await
    .map_err(|e| {
        let dir = inner.config.instance_dir();
        Error::io(
            "make the job's id and output",
            &dir,
            std::io::Error::other(e.to_string()),
        )
    })?
}

/// What is made for a job before it is registered.
struct Made<'a> {
    id: &'a JobId,
    dir: &'a std::path::Path,
    kind: RunnerKind,
    runner_note: Option<String>,
    writes: crate::model::Writes,
    output: Arc<crate::output::JobOutput>,
    stop_tx: mpsc::UnboundedSender<StopRequest>,
}

/// Put the job in the registry with a slot of the cap, or in the line for
/// one (`Some`); refused (and its directory removed) when it lost the race
/// for the last slot and must not queue.
fn register(inner: &Arc<Inner>, m: Made<'_>, spec: &JobSpec, project: &Project) -> Result<Option<InLine>> {
    let mut reg = inner.registry.lock().unwrap();
    // The semaphore is fair: with jobs in line, a freed permit is
    // theirs, so a start that must not queue never jumps the line.
    let slot = match inner.slots.clone().try_acquire_owned() {
        Ok(permit) => Some(permit),
        Err(_) => {
            if let Err(e) = cap_refusal(inner, &reg, spec) {
                drop(reg);
                // Lost a race for the last slot: nothing of the job stays.
                let _ = std::fs::remove_dir_all(m.dir);
                return Err(e);
            }
            None
        }
    };
    let queued = slot.is_none();
    m.output.hold_events();
    let info = JobInfo {
        runner: Some(m.kind),
        runner_note: m.runner_note,
        workspace: Some(project.config.workspace.clone()),
        project_note: inner.projects.note_once(project),
        writes: Some(m.writes),
        ..new_info(m.id, spec, queued, m.output.paths())
    };
    let live = Live {
        stop_tx: m.stop_tx,
        slot,
        control: None,
        internal_ip: None,
        children: None,
        safety: project.safety.clone(),
    };
    let n = number(m.id).expect("allocated ids are job-N");
    reg.jobs.insert(n, new_entry(info, m.output, live));
    Ok(queued.then(|| get_in_line(inner, &mut reg, m.id)))
}

/// What refuses a start before anything is read or checked: shutdown, a
/// full queue for a start that would wait, a store that cannot keep it.
fn preflight(inner: &Inner, spec: &JobSpec) -> Result<()> {
    if inner.shutting_down.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(Error::ShuttingDown);
    }
    // A start that would wait in a full queue is refused before anything
    // is read or checked (a flood of queued starts costs nothing).
    if spec.queue && inner.registry.lock().unwrap().queue.len() >= inner.config.max_queued {
        return Err(Error::QueueFull {
            max: inner.config.max_queued,
        });
    }
    // A job whose output and record could not be kept is not started.
    if let crate::store::StoreHealth::Degraded { since, reason } = inner.store.health() {
        return Err(Error::StoreDegraded {
            path: inner.store.path().to_path_buf(),
            since: since.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            reason,
        });
    }
    Ok(())
}

/// A new job's record as far as its id, spec and log files say: `queued`
/// without a slot, else `starting`; nothing run yet. The caller sets what its
/// project, runner and output add.
fn new_info(id: &JobId, spec: &JobSpec, queued: bool, logs: crate::model::LogPaths) -> JobInfo {
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
    JobInfo {
        id: id.clone(),
        label: spec.label.clone().unwrap_or_else(|| spec.display_command()),
        command: spec.display_command(),
        spec: spec.clone(),
        runner: None,
        runner_note: None,
        workspace: None,
        project_note: None,
        status,
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
        node: None,
        ports: Vec::new(),
        limits: Default::default(),
        usage: None,
        logs,
        last_seq: 0,
        queue_position: None,
        image: None,
        pulling: None,
        building: None,
        setid_cleared: None,
        store_note: None,
        recovered: false,
        watch_hits_dropped: 0,
        children: Vec::new(),
        writes: None,
    }
}

/// The registry's entry of a job just made: its record, output and live part.
fn new_entry(info: JobInfo, output: Arc<crate::output::JobOutput>, live: Live) -> JobEntry {
    let (status, start_mode) = (info.status.clone(), info.start_mode);
    JobEntry {
        info,
        pid_start: None,
        output,
        status_tx: watch::channel(status).0,
        mode_tx: watch::channel(start_mode).0,
        live: Some(live),
        ready_seen: false,
    }
}

/// Put job `id` in the queue and ask the semaphore for its slot now, under
/// the lock that orders the queue (held by the caller as `reg`), so that
/// the two orders are one.
fn get_in_line(inner: &Inner, reg: &mut Registry, id: &JobId) -> InLine {
    reg.queue.push_back(id.clone());
    let mut line: InLine = Box::pin(inner.slots.clone().acquire_owned());
    // Polled once to register the waiter; a slot freed meanwhile is
    // taken now and kept for the job's task.
    match futures_util::FutureExt::now_or_never(&mut line) {
        Some(got) => Box::pin(std::future::ready(got)) as InLine,
        None => line,
    }
}

/// A start refused at the door leaves no record behind (its slot goes with
/// its entry), in memory or on disk.
fn forget(inner: &Inner, id: &JobId) {
    let removed = {
        let mut reg = inner.registry.lock().unwrap();
        number(id).and_then(|n| reg.jobs.remove(&n))
    };
    if let Some(dir) = removed.as_ref().and_then(|e| e.info.logs.stdout.parent()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A queued job's request for a slot of the cap, registered in line.
type InLine = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = std::result::Result<tokio::sync::OwnedSemaphorePermit, tokio::sync::AcquireError>,
            > + Send,
    >,
>;

/// Wait in line for a slot, then launch (or end if stopped first).
#[allow(clippy::too_many_arguments)]
async fn run_queued(
    inner: Arc<Inner>,
    id: JobId,
    spec: JobSpec,
    kind: RunnerKind,
    project: Arc<Project>,
    cwd: PathBuf,
    line: InLine,
    mut stop_rx: mpsc::UnboundedReceiver<StopRequest>,
) {
    let slot = tokio::select! {
        slot = line => slot.expect("the cap's semaphore is never closed"),
        req = stop_rx.recv() => {
            let req = req.unwrap_or_else(|| shutdown_request(&inner));
            finish(&inner, &id, JobStatus::Killed { signal: None, ended_by: req.ended_by, reason: req.cause });
            return;
        }
    };
    let took = inner.commit(&id, |e| {
        e.set_status(JobStatus::Starting);
        if let Some(live) = e.live.as_mut() {
            live.slot = Some(slot);
        }
        Ok(())
    });
    if took.is_err() {
        return;
    }
    match launch(&inner, &id, &spec, kind, &project, &cwd, &mut stop_rx).await {
        Ok(Some(launched)) => supervise(inner, id, spec, launched, stop_rx).await,
        Ok(None) => {}
        Err(e) => finish(&inner, &id, JobStatus::StartFailed { error: e.to_string() }),
    }
}

/// With no slot free: `Ok` when `spec` may wait in the queue, else the
/// refusal (the cap reached, naming what holds it, or the queue full).
fn cap_refusal(inner: &Inner, reg: &Registry, spec: &JobSpec) -> Result<()> {
    if spec.queue {
        // The queue holds each waiting job's record and task: bounded.
        if reg.queue.len() >= inner.config.max_queued {
            return Err(Error::QueueFull {
                max: inner.config.max_queued,
            });
        }
        return Ok(());
    }
    // The cap counts every running job, foreground or background, from any
    // client.
    let names = reg
        .holding_slots()
        .iter()
        .map(|i| format!("{} `{}`", i.id, i.command))
        .collect::<Vec<_>>()
        .join(", ");
    Err(Error::CapReached {
        max: inner.config.max_jobs,
        running: names,
    })
}
