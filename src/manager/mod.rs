//! The manager owns jobs: the registry of records and live handles, the
//! background cap and its queue, the event log, and teardown.
//!
//! Theory of operation. [`Manager::start`] completes the spec from the
//! caller's project and validates it (once, `admit.rs`), takes a slot
//! (or queues, or refuses with the running jobs named), launches through a
//! runner (`start.rs`), and hands the live job to a supervisor task (`supervise.rs`) that
//! alone awaits its exit, enforces keep-alive and the foreground budget, and
//! carries out stop requests. Every change of state goes through the registry
//! lock (never held across `.await`) and is published on the job's `watch`
//! channels and as an event, which is what waiters, followers and foreground
//! callers listen to. Dropping the last [`Manager`] handle kills whatever is
//! still running; [`Manager::shutdown`] does it gracefully, and
//! [`Manager::end_owner`] (`owners.rs`) for the jobs of one owner (an MCP
//! session that ended).

mod admit;
mod copy;
mod denials;
mod exec;
mod finished;
mod handle;
mod ids;
mod launch;
mod layers;
mod owners;
mod pages;
mod planted;
mod ports;
pub mod project;
mod reads;
mod recover;
mod reporters;
mod requests;
mod retention;
mod start;
mod store_watch;
mod supervise;
#[cfg(test)]
mod tests;
mod usage;

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::events::{EventKind, EventLog};
use crate::model::{EndedBy, JobId, JobInfo, JobSpec, JobStatus, StartMode, StopCause};
use crate::output::JobOutput;
use crate::runner::Control;
use crate::watch::Watchers;

pub use admit::DefaultBudget;
pub use exec::{ExecEnd, ExecEvent, ExecRequest};
pub use handle::JobHandle;
pub use pages::{EventPage, JobPage, MAX_PAGE_BYTES, MAX_PAGE_ITEMS, job_page, take_page};
pub use ports::PortWait;
pub use reads::off_worker;
pub use requests::{Foreground, KillOutcome, KillRequest, KillResult, ListFilter};
pub use retention::{DEFAULT_LIST_LIMIT, PruneOutcome, PruneRequest, newest_first};
pub use supervise::StopRequest;

pub(crate) struct Live {
    stop_tx: mpsc::UnboundedSender<StopRequest>,
    /// The job's slot of the cap, held from its start to its end (a
    /// promoted job keeps it); `None` while it waits in the queue, and for
    /// a job adopted beyond the cap (a cap lowered across a restart).
    slot: Option<OwnedSemaphorePermit>,
    control: Option<Control>,
    internal_ip: Option<IpAddr>,
    /// A job with a scoped engine: its children as they change.
    children: Option<watch::Receiver<Vec<crate::model::ChildInfo>>>,
    /// The filter and guard of the project the job was admitted under:
    /// what `berth exec` checks its commands with.
    safety: crate::safety::Safety,
}

/// A job in the registry: its record, its output, the channels its
/// watchers listen on, and (while it is under way) its live handles.
pub(crate) struct JobEntry {
    info: JobInfo,
    /// Start time of the job's leader process (host jobs), to trust its pid later.
    pid_start: Option<u64>,
    output: Arc<JobOutput>,
    status_tx: watch::Sender<JobStatus>,
    mode_tx: watch::Sender<StartMode>,
    live: Option<Live>,
    ready_seen: bool,
}

impl JobEntry {
    /// Move a job that is still under way to `status`: its record and its
    /// watchers together, under the registry lock. (The end of a job is
    /// `supervise::finish`: record, then event, then watchers, in that order.)
    fn set_status(&mut self, status: JobStatus) {
        self.info.status = status.clone();
        self.status_tx.send_replace(status);
    }
}

#[derive(Default)]
struct Registry {
    jobs: BTreeMap<u64, JobEntry>,
    /// The queued jobs in the order they wait, to show their places; the
    /// order itself is the cap's semaphore's (fair: first come, first served).
    queue: VecDeque<JobId>,
}

impl Registry {
    fn get(&self, id: &JobId) -> Result<&JobEntry> {
        number(id)
            .and_then(|n| self.jobs.get(&n))
            .ok_or_else(|| Error::UnknownJob(id.to_string()))
    }
    fn get_mut(&mut self, id: &JobId) -> Result<&mut JobEntry> {
        number(id)
            .and_then(|n| self.jobs.get_mut(&n))
            .ok_or_else(|| Error::UnknownJob(id.to_string()))
    }
    /// Jobs holding a slot of the cap: every job starting or running,
    /// foreground or background, whoever started it. A foreground job keeps
    /// its slot when it is promoted, so a promotion can never exceed the cap.
    fn holding_slots(&self) -> Vec<&JobInfo> {
        self.jobs
            .values()
            .map(|e| &e.info)
            .filter(|i| matches!(i.status, JobStatus::Starting | JobStatus::Running))
            .collect()
    }

    /// The record with live figures filled in, and its place in line if queued.
    fn snapshot(&self, e: &JobEntry) -> JobInfo {
        let mut info = snapshot(e);
        info.queue_position = self.queue.iter().position(|q| q == &e.info.id).map(|p| p + 1);
        info
    }
}

fn number(id: &JobId) -> Option<u64> {
    id.as_str().strip_prefix("job-")?.parse().ok()
}

pub(crate) struct Inner {
    config: Config,
    registry: Mutex<Registry>,
    /// Taken before the registry lock by every change that writes a run
    /// record, and held until the record is queued for the store: a job's
    /// records reach the store in the order they were made, while the
    /// registry lock is never held waiting on the store's queue (readers
    /// such as `ps` never wait on the disk).
    record_order: Mutex<()>,
    events: Arc<EventLog>,
    ids: ids::IdAllocator,
    /// The cap: one permit per job starting or running (`max_jobs`). Fair,
    /// so queued jobs get slots in the order they asked, and a start that
    /// must not queue (`try_acquire`) never jumps the line.
    slots: Arc<Semaphore>,
    shutting_down: AtomicBool,
    /// Every job's supervisor task: shutdown waits for them to finish
    /// recording (see `SUPERVISORS_DRAIN`).
    tasks: tokio_util::task::TaskTracker,
    /// The container engine berth runs jobs on (local, remote, or none
    /// reachable: the host runner is the fallback).
    engine: crate::runner::docker::Engine,
    /// `runner = "swarm"`: jobs as services of a swarm, through its manager.
    swarm: crate::runner::swarm::Swarm,
    /// The callers' projects (workspace, rules, image, limits) by directory.
    projects: project::Projects,
    store: Arc<crate::store::Store>,
    /// This manager as `pid:start_time`, the owner recorded on every run.
    owner: String,
    /// The host runner; its jobs carry the manager's tag, to be found
    /// without records (`runner::tag`).
    host: crate::runner::host::HostRunner,
    /// How many finished jobs were let go of memory (`finished.rs`).
    let_go: std::sync::atomic::AtomicUsize,
    /// Runs of a dead manager waiting for `adopt_orphans` (recovery mode `adopt`).
    orphans: Mutex<Vec<crate::store::RunRow>>,
    /// Recent CPU/memory samples (see `usage.rs`).
    usage_cache: usage::UsageCache,
    /// Where `layer` jobs write (`crate::layers`), and who writes each now.
    layers: crate::layers::Layers,
    /// Tests launch every job through a scripted runner once one is set.
    #[cfg(any(test, feature = "test-util"))]
    fake: std::sync::OnceLock<Arc<crate::runner::fake::FakeRunner>>,
}

/// How long shutdown waits for the supervisors of ended jobs to finish.
const SUPERVISORS_DRAIN: Duration = Duration::from_secs(10);

/// Kills whatever still runs when the last user-facing handle goes away.
struct TeardownGuard(Arc<Inner>);

impl Drop for TeardownGuard {
    fn drop(&mut self) {
        if self.0.shutting_down.swap(true, Ordering::SeqCst) {
            return;
        }
        // Taken out under the lock, killed outside it.
        let controls: Vec<Control> = {
            let reg = self.0.registry.lock().unwrap();
            reg.jobs
                .values()
                .filter_map(|e| e.live.as_ref().and_then(|l| l.control.clone()))
                .collect()
        };
        // In parallel: a container's forced removal takes the engine ~0.1-1 s,
        // and a process being dropped (a test, a CLI run) should not wait
        // for them one after the other. Finished jobs whose container removal
        // may not have run yet go at the same time.
        // A thread that cannot be made (a process at its limit) is done inline.
        std::thread::scope(|s| {
            for control in controls {
                let job = control.clone();
                if std::thread::Builder::new()
                    .spawn_scoped(s, move || job.kill_now())
                    .is_err()
                {
                    control.kill_now();
                }
            }
            self.0.engine.remove_pending_blocking();
        });
    }
}

/// The job manager. Cheap to clone; the last clone dropped kills every job.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
    _guard: Arc<TeardownGuard>,
}

impl Manager {
    /// Launch every later job through `fake` (a scripted runner: no process,
    /// no engine) instead of the host or Docker runner. For tests of code
    /// built on berth (feature `test-util`). False when one is already set.
    #[cfg(any(test, feature = "test-util"))]
    pub fn use_fake_runner(&self, fake: Arc<crate::runner::fake::FakeRunner>) -> bool {
        self.inner.fake.set(fake).is_ok()
    }

    /// [`Manager::new`] for async code: opening the store and recovering
    /// the last run's records (reads, the reap of what it left) run on the
    /// blocking pool, not on a worker that other tasks wait for.
    pub async fn open(config: Config) -> Result<Self> {
        let dir = config.instance_dir();
        tokio::task::spawn_blocking(move || Self::new(config))
            .await
            .map_err(|e| Error::io("open the manager", &dir, std::io::Error::other(e.to_string())))?
    }

    /// A manager for `config.instance`, keeping its state under `config.instance_dir()`.
    pub fn new(config: Config) -> Result<Self> {
        let ids = ids::IdAllocator::new(&config.instance_dir())?;
        let store = crate::store::Store::open_with(
            &config.instance_dir().join("berth.db"),
            config.max_output_bytes,
            config.ring_bytes,
        )?;
        let safety = crate::safety::Safety::from_config(&config)?;
        let config_max_jobs = config.max_jobs.min(Semaphore::MAX_PERMITS);
        let inner = Arc::new(Inner {
            engine: crate::runner::docker::Engine::new(&config),
            swarm: crate::runner::swarm::Swarm::new(&config),
            projects: project::Projects::new(&config, &safety),
            events: EventLog::with_store(store.clone())?,
            store,
            owner: crate::procinfo::owner_label(),
            host: crate::runner::host::HostRunner::new(crate::runner::tag::tag(
                &crate::runner::docker::state_hash(&config.state_dir),
                &config.instance,
                &crate::procinfo::owner_label(),
            )),
            orphans: Mutex::new(Vec::new()),
            let_go: Default::default(),
            usage_cache: Default::default(),
            layers: crate::layers::Layers::new(config.instance_dir().join("layers")),
            config,
            registry: Mutex::new(Registry::default()),
            record_order: Mutex::new(()),
            ids,
            slots: Arc::new(Semaphore::new(config_max_jobs)),
            shutting_down: AtomicBool::new(false),
            tasks: Default::default(),
            #[cfg(any(test, feature = "test-util"))]
            fake: Default::default(),
        });
        recover::load(&inner)?;
        store_watch::watch(&inner);
        Ok(Manager {
            _guard: Arc::new(TeardownGuard(inner.clone())),
            inner,
        })
    }

    /// The instance's durable store.
    pub fn store(&self) -> &Arc<crate::store::Store> {
        &self.inner.store
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The project `spec` would run under: its caller's `berth.toml` and
    /// variables ([`JobSpec::caller_cwd`]), or this manager's own config.
    pub fn project_for(&self, spec: &JobSpec) -> Result<Arc<project::Project>> {
        self.inner.projects.resolve(spec)
    }

    pub fn events_log(&self) -> &Arc<EventLog> {
        &self.inner.events
    }

    /// Start a job. Returns once it runs (or is queued); a spec that cannot
    /// start is refused with an error and leaves no record.
    pub async fn start(&self, spec: JobSpec) -> Result<JobHandle> {
        self.start_from(spec, "library").await
    }

    /// [`Manager::start`] on behalf of `client` (`cli`, `api`, `mcp`, …), which
    /// the security log records when a command is blocked.
    pub async fn start_from(&self, spec: JobSpec, client: &str) -> Result<JobHandle> {
        self.start_with(spec, client, DefaultBudget::Project).await
    }

    /// [`Manager::start_from`], saying what a foreground spec without a
    /// `timeout` gets (the project's budget, or none). Whatever the spec
    /// leaves unset is filled from the caller's project here, not by the
    /// faces (`admit.rs`).
    pub async fn start_with(&self, spec: JobSpec, client: &str, budget: DefaultBudget) -> Result<JobHandle> {
        let id = start::start(&self.inner, spec, client, budget).await?;
        Ok(JobHandle {
            id,
            manager: self.clone(),
        })
    }

    /// Start in the foreground and wait until the job ends or is promoted to
    /// background (budget exceeded, or `background()` called by someone else).
    pub async fn run_foreground(&self, mut spec: JobSpec) -> Result<Foreground> {
        spec.background = false;
        let handle = self.start(spec).await?;
        self.await_foreground(&handle.id).await
    }

    /// Wait until a job ends or leaves the foreground, whichever comes first.
    pub async fn await_foreground(&self, id: &JobId) -> Result<Foreground> {
        let (mut status_rx, mut mode_rx) = self.watchers(id)?;
        loop {
            if status_rx.borrow_and_update().is_terminal() {
                return Ok(Foreground::Finished {
                    info: Box::new(self.info(id)?),
                });
            }
            if *mode_rx.borrow_and_update() != StartMode::Foreground {
                return Ok(Foreground::Promoted {
                    info: Box::new(self.info(id)?),
                });
            }
            tokio::select! {
                _ = status_rx.changed() => {}
                _ = mode_rx.changed() => {}
            }
        }
    }

    /// Run a finished job's spec again, as a new background job.
    pub async fn resume(&self, id: &JobId) -> Result<JobHandle> {
        self.resume_from(id, "library").await
    }

    /// [`Manager::resume`] on behalf of `client` (see [`Manager::start_from`]).
    pub async fn resume_from(&self, id: &JobId, client: &str) -> Result<JobHandle> {
        let spec = self.resumable_spec(id)?;
        self.start_from(spec, client).await
    }

    /// The spec [`Manager::resume`] starts again for `id` (background), or why it cannot.
    pub fn resumable_spec(&self, id: &JobId) -> Result<JobSpec> {
        let info = self.info(id)?;
        if info.status.is_active() {
            return Err(Error::NotFinished {
                job: id.clone(),
                state: info.status.name().into(),
            });
        }
        let mut spec = info.spec;
        if crate::store::env_redacted(&spec.env) {
            return Err(Error::InvalidSpec(format!(
                "{id}'s env values were not stored (store_env = false): start the command again with its env"
            )));
        }
        spec.background = true;
        // A session's job writes its session's layer, decided anew (the
        // session resuming it may be another); a CLI job keeps its layer.
        if spec.owner.as_deref().is_some_and(|o| o.starts_with("mcp:")) {
            spec.layer = None;
        }
        Ok(spec)
    }

    /// True once shutdown began: no new jobs are accepted.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutting_down.load(Ordering::SeqCst)
    }

    /// Stop a job: the first signal, the grace, then SIGKILL. A job that has
    /// already ended answers `already_finished`.
    pub async fn kill(&self, id: &JobId, req: KillRequest) -> Result<KillOutcome> {
        supervise::kill(&self.inner, id, req).await
    }

    /// Move a running foreground job to background now.
    pub fn background(&self, id: &JobId, by: EndedBy) -> Result<JobInfo> {
        let reason = match by {
            EndedBy::User => "moved to background by user".to_string(),
            EndedBy::Agent => "moved to background by agent".to_string(),
            EndedBy::System => "moved to background by system".to_string(),
        };
        self.inner.promote(id, by, reason)?;
        self.info(id)
    }

    /// Keep a container job's network set-up ready between jobs (an idle
    /// pause per job network, joined by the next job without published
    /// ports: ~0.1 s less per start). For a manager that lives on between
    /// jobs (the daemon, an MCP host); everything is removed at teardown.
    pub fn keep_warm(&self) {
        self.inner.engine.keep_warm();
    }

    /// Stop every job (grace, then kill), wait until all have ended, refuse new ones.
    pub async fn shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
        self.end_active(None, StopCause::Shutdown).await;
        // Every job has ended; its supervisor finishes cleaning up after it.
        self.inner.tasks.close();
        if tokio::time::timeout(SUPERVISORS_DRAIN, self.inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                left = self.inner.tasks.len(),
                "supervisor tasks still running at shutdown"
            );
        }
        // Removals of finished jobs' containers may still be under way.
        self.inner.engine.settle_removals(Duration::from_secs(10)).await;
        self.inner.swarm.shutdown().await;
        // Every container is removed by now: its job network can go too,
        // and the volumes that mounted layers (their files stay).
        self.inner.engine.release_networks().await;
        self.inner.engine.release_layer_volumes().await;
        // Every line and event reaches the disk before we say we are done,
        // and the log is folded in: the next start has no log to doubt. A
        // store that cannot write gives its reserve back first.
        self.inner.store.settle();
        self.inner.store.flush();
        self.inner.store.checkpoint();
    }
}

/// The record with live figures filled in.
fn snapshot(e: &JobEntry) -> JobInfo {
    let mut info = e.info.clone();
    if let Some(children) = e.live.as_ref().and_then(|l| l.children.as_ref()) {
        info.children = children.borrow().clone();
    }
    info.last_seq = e.output.progress().last_seq;
    // A job read back from the store keeps its count; a live one counts on.
    info.watch_hits_dropped = info.watch_hits_dropped.max(e.output.watch_hits_dropped());
    info
}

impl Inner {
    /// The runner for jobs of `kind` (every job, once a test installed a
    /// scripted runner).
    fn runner(&self, kind: crate::model::RunnerKind) -> &dyn crate::runner::Runner {
        #[cfg(any(test, feature = "test-util"))]
        if let Some(fake) = self.fake.get() {
            return fake.as_ref();
        }
        match kind {
            crate::model::RunnerKind::Host => &self.host,
            crate::model::RunnerKind::Docker => &self.engine,
            crate::model::RunnerKind::Swarm => &self.swarm,
        }
    }

    fn promote(&self, id: &JobId, by: EndedBy, reason: String) -> Result<()> {
        let changed = self.commit(id, |e| {
            if !e.info.status.is_active() || e.info.start_mode != StartMode::Foreground {
                return Err(Error::NotForeground {
                    job: id.clone(),
                    state: format!("{} ({})", e.info.status.name(), e.info.start_mode),
                });
            }
            e.info.start_mode = StartMode::Promoted(by);
            e.info.promotion_reason = Some(reason.clone());
            e.mode_tx.send_replace(e.info.start_mode);
            Ok(())
        });
        if let Err(Error::UnknownJob(unknown)) = changed {
            // Only in the store (`finished.rs`): it ended long ago.
            let info = self.stored(id).map_err(|_| Error::UnknownJob(unknown))?;
            return Err(Error::NotForeground {
                job: id.clone(),
                state: format!("{} ({})", info.status.name(), info.start_mode),
            });
        }
        changed?;
        self.events.emit(id.clone(), EventKind::Promoted { by, reason });
        Ok(())
    }

    /// Change job `id`'s entry and record it: the one way a run record is
    /// made. `record_order` is taken before the registry lock and held until
    /// the record is queued for the store, so a job's records reach the
    /// store in the order they were made, while the registry lock (which
    /// readers such as `ps` share) is never held waiting on the store's
    /// queue. The queue of waiting jobs follows the status: a job that is
    /// no longer queued leaves it here. Nothing is recorded when `change`
    /// fails.
    fn commit<T>(&self, id: &JobId, change: impl FnOnce(&mut JobEntry) -> Result<T>) -> Result<T> {
        let _order = self.record_order.lock().unwrap();
        let mut reg = self.registry.lock().unwrap();
        let e = reg.get_mut(id)?;
        let out = change(e)?;
        let row = self.record(e);
        if row.info.status != JobStatus::Queued {
            reg.queue.retain(|q| q != id);
        }
        drop(reg);
        self.store.put_run(row);
        Ok(out)
    }

    /// Where a job's raw logs live: `<instance>/jobs/<id>`.
    fn job_dir(&self, id: &JobId) -> std::path::PathBuf {
        self.config.instance_dir().join("jobs").join(id.as_str())
    }

    /// A new output for job `id`, numbering its lines from `first_seq` (1,
    /// or on from the stored lines of an adopted job).
    fn job_output(&self, id: &JobId, watchers: Watchers, first_seq: u64) -> Result<Arc<JobOutput>> {
        JobOutput::create(
            id.clone(),
            &self.job_dir(id),
            self.config.ring_bytes,
            watchers,
            self.events.clone(),
            self.store.clone(),
            first_seq,
        )
    }

    /// The run record of `e` as the store keeps it (made by [`Inner::commit`]).
    fn record(&self, e: &JobEntry) -> crate::store::RunRow {
        let mut info = snapshot(e);
        if !self.config.store_env {
            // Tokens live in env: on disk only the names are kept.
            crate::store::redact_env(&mut info.spec.env);
        }
        let pgid = match (&info.container_id, info.pid) {
            (None, Some(pid)) => Some(pid as i32),
            _ => None,
        };
        crate::store::RunRow {
            info,
            instance: self.config.instance.clone(),
            owner: self.owner.clone(),
            pgid,
            pid_start_time: e.pid_start,
        }
    }

    fn now() -> chrono::DateTime<Utc> {
        Utc::now()
    }

    fn watchers_for(spec: &JobSpec) -> Result<Watchers> {
        Watchers::new(&spec.watch)
    }
}
