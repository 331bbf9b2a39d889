//! The Docker runner: each job is one detached container on the local engine,
//! driven through bollard, which only `client.rs` ([`DockerClient`]) calls:
//! every engine operation fails there as `Error::Engine` with its own
//! `EngineOp` and the engine's error as source. This file owns the engine
//! connection ([`Engine`]: lazy connect, `auto` resolution), the per-job
//! [`DockerControl`] (signal, remove, a background remove after the job was
//! answered, a blocking remove for `Drop` paths), and resource usage. The
//! create body lives in `create.rs`, the create → wait → attach → start
//! sequence in `launch.rs`, the exit future in `exit.rs`, removal and
//! teardown (the removals still under way included) in `cleanup.rs`, the
//! stats arithmetic in `usage.rs`, image pulls in `pull.rs` and project image
//! builds in `build.rs`. One client, connected once, serves every
//! job (on a Unix socket bollard opens a connection per request: ~0.2 ms
//! each here, under 1% of a container's start).
//!
//! Every container carries `berth.managed`, `berth.instance`, `berth.state`
//! (hash of the state dir), `berth.owner` (manager pid + start time) and
//! `berth.job` labels, so whatever a crashed manager left behind can be found
//! and removed without guessing, and nothing is removed by name alone
//! (`ownership.rs`). Each job gets a berth bridge of its own from the instance's
//! pool (`network.rs`). A job with `engine = "scoped"` also gets an engine
//! socket of its own, through which it starts children of its own
//! (`scoped/`).

mod adopt;
mod build;
mod cleanup;
mod client;
mod create;
mod exit;
mod holder;
mod launch;
mod network;
mod ownership;
mod protect;
mod pull;
mod scoped;
#[cfg(test)]
mod tests;
mod throttle;
mod usage;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bollard::query_parameters::{KillContainerOptions, StatsOptions};
use futures_util::StreamExt;
use tokio::sync::OnceCell;

use super::Launched;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::model::{JobId, JobSpec, RunnerChoice, RunnerKind, Usage};
use crate::output::JobOutput;

pub use adopt::Adoption;
pub use build::BuildProgressFn;
pub use client::DockerClient;
pub use create::{
    DEFAULT_PIDS_LIMIT, HOME_DIR, LABEL_INSTANCE, LABEL_JOB, LABEL_MANAGED, LABEL_OWNER, container_name,
};
pub use network::NO_ICC;
pub use ownership::{LABEL_STATE, Ownership, state_hash};
pub use pull::ProgressFn;
pub use scoped::{EngineHandle, LABEL_PARENT, Refused, read_child_log};
pub use usage::UsageTarget;

use cleanup::{Removals, blocking_remove, remove_container};

/// How long the engine gets to answer a ping before `auto` picks the host.
const PING_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long a blocking remove (from `Drop`) may hold its caller.
const BLOCKING_REMOVE_LIMIT: Duration = Duration::from_secs(3);

/// The endpoint to use: `DOCKER_HOST`, else the local socket.
fn default_endpoint() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unix:///var/run/docker.sock".into())
}

/// Connect to `endpoint` under `limit` (see [`DockerClient::connect`]).
async fn connect(endpoint: &str, limit: Duration) -> Result<DockerClient> {
    DockerClient::connect(endpoint, limit).await
}

/// The manager's identity for the `berth.owner` label: pid and its start time
/// (field 22 of `/proc/self/stat`, clock ticks since boot), so a reused pid is
/// never mistaken for a live owner.
pub fn owner_label() -> String {
    crate::procinfo::owner_label()
}

/// Signals and removes one job's container.
#[derive(Clone)]
pub struct DockerControl {
    pub container_id: String,
    docker: DockerClient,
    /// For `remove_blocking`, which must make its own connection.
    endpoint: String,
    /// Bit N set = signal N was sent; lets the exit mapping tell "died of the
    /// signal we sent" (exit 128+N from the init) from an ordinary exit code.
    sent: Arc<AtomicU64>,
    /// The pool network the container runs on: given back once it exited
    /// (background removal) or was removed.
    slot: Arc<std::sync::Mutex<Option<network::Slot>>>,
    /// The engine's removals under way, which teardown finishes.
    removals: Arc<Removals>,
    /// Set when the slot should get a network holder once the container
    /// exited (a long-lived manager, a pool network without one).
    warm: Option<Arc<(Arc<holder::Holders>, holder::Recipe)>>,
    /// The job's scoped engine: closed (its children removed) when the job ends.
    scope: Option<Arc<scoped::Scope>>,
}

impl std::fmt::Debug for DockerControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerControl")
            .field("container_id", &self.container_id)
            .finish()
    }
}

impl DockerControl {
    fn new(engine: &Engine, docker: DockerClient, container_id: String, slot: Option<network::Slot>) -> Self {
        DockerControl {
            container_id,
            docker,
            endpoint: engine.endpoint.clone(),
            sent: Arc::new(AtomicU64::new(0)),
            slot: Arc::new(std::sync::Mutex::new(slot)),
            removals: engine.removals.clone(),
            warm: None,
            scope: None,
        }
    }

    /// Stop the job's scoped engine and remove its children, networks and
    /// volumes (one child at a time); nothing when it has none.
    pub async fn end_children(&self) {
        if let Some(scope) = &self.scope {
            scope.close().await;
        }
    }

    /// Give the network slot back: the container is gone, so a later job may
    /// use the network (never two running containers on one).
    fn free_slot(&self, empty: bool) {
        free(&self.slot, empty);
    }

    /// True when `signal` was sent to this container.
    fn was_sent(&self, signal: i32) -> bool {
        (0..64).contains(&signal) && self.sent.load(Ordering::SeqCst) & (1 << signal) != 0
    }

    /// Send `signal` to the container (its init forwards it to the job).
    /// A container that already stopped or is gone counts as success.
    pub async fn signal(&self, signal: i32) {
        if (0..64).contains(&signal) {
            self.sent.fetch_or(1 << signal, Ordering::SeqCst);
        }
        let opts = KillContainerOptions {
            signal: signal.to_string(),
        };
        match self.docker.kill_container(&self.container_id, opts).await {
            Ok(()) => {}
            Err(e) if matches!(e.engine_status(), Some(404 | 409)) => {}
            Err(e) => tracing::warn!(signal, error = %e, "could not signal container"),
        }
    }

    /// Force-remove the container (after its output was drained). Gone already is fine.
    pub async fn remove(&self) {
        self.end_children().await;
        let removed = remove_container(&self.docker, &self.container_id).await;
        self.free_slot(removed);
    }

    /// Force-remove in the background (the job was answered already); the
    /// engine's [`Removals`] keeps it until the engine confirmed, so
    /// teardown can finish it. Must be called inside a tokio runtime.
    pub fn remove_later(&self) {
        // Its network is free already: the engine releases a container's
        // endpoint before it reports the exit (`wait` answers after that
        // teardown, see exit.rs), and this is called once the exit was seen.
        // A back-to-back job reuses the network instead of making another.
        let slot = self.slot.lock().ok().and_then(|mut s| s.take());
        match (slot, self.warm.as_deref()) {
            (Some(slot), Some((holders, recipe))) if slot.holder.is_none() => {
                holders.warm(self.docker.clone(), slot, recipe.clone());
            }
            (Some(slot), _) => slot.vacate(),
            (None, _) => {}
        }
        self.removals
            .remove_later(self.docker.clone(), self.container_id.clone());
        // The supervisor closed it already; any other path closes it here.
        if let Some(scope) = self.scope.clone() {
            tokio::spawn(async move { scope.close().await });
        }
    }

    /// Force-remove from a synchronous context (`Drop`), even inside a tokio
    /// runtime: a fresh thread with its own runtime and its own connection
    /// (the shared client's connections are driven by the caller's runtime,
    /// which may be the very thread we block). Waits at most ~3 s.
    pub fn remove_blocking(&self) {
        let mut ids = vec![self.container_id.clone()];
        if let Some(scope) = &self.scope {
            ids.extend(scope.child_ids());
        }
        let removed = cleanup::blocking_remove_all(self.endpoint.clone(), ids, None);
        self.free_slot(removed.first().copied().unwrap_or(false));
    }
}

/// Give a container's network slot back; `empty`: the engine reported the
/// container exited or removed, so nothing of it is left on the network.
fn free(slot: &std::sync::Mutex<Option<network::Slot>>, empty: bool) {
    if let Ok(mut slot) = slot.lock()
        && let Some(slot) = slot.take()
        && empty
    {
        slot.vacate();
    }
}

/// The engine connection, made lazily on first use and shared by all jobs.
pub struct Engine {
    endpoint: String,
    instance: String,
    image: String,
    workspace: PathBuf,
    grace: Duration,
    /// Longest one image pull may take (`pull_timeout`).
    pull_timeout: Duration,
    owner: String,
    /// This instance and state dir: what `berth.instance`/`berth.state` must say.
    ownership: Ownership,
    /// `UID:GID` or `root`; the caller's own ids unless the config says.
    user: String,
    /// The prefix of the instance's job networks (`<prefix>-N`).
    network: String,
    /// The config's network, for specs that do not say.
    default_network: crate::model::Network,
    /// Limits for what a spec leaves unset.
    defaults: crate::model::Limits,
    /// Set once a job used a pool network: teardown (`Drop`) removes the
    /// instance's networks that no container uses. Kept between jobs because
    /// making a network costs ~0.2 s.
    used_network: std::sync::atomic::AtomicBool,
    /// The job networks and which of them this engine's containers hold
    /// (shared with the scoped engines, whose children take networks too).
    pool: Arc<network::Pool>,
    client: OnceCell<DockerClient>,
    /// Containers of finished jobs whose removal is under way.
    removals: Arc<Removals>,
    /// Skip asked host ports that are visibly taken before asking the engine.
    precheck_ports: bool,
    /// Keep network holders (holder.rs): a long-lived manager only.
    warm: std::sync::atomic::AtomicBool,
    /// The config's child limit of a scoped engine, for `launch` without a project.
    max_children: usize,
}

/// What a job's project decides about its container.
pub(super) struct Project<'a> {
    pub image: &'a str,
    pub workspace: &'a Path,
    pub user: String,
    /// The project's network, for specs that do not say.
    pub network: crate::model::Network,
    pub defaults: &'a crate::model::Limits,
    /// The image was made present already (`Engine::prepare`).
    pub prepared: bool,
    /// Every job gets a read-only root (`read_only = true`).
    pub read_only: bool,
    /// Config files inside the workspace that jobs must not change, beyond
    /// the usual names (`protect.rs`): the project's, the user's.
    pub protect: Vec<std::path::PathBuf>,
    /// Most children of a job with a scoped engine.
    pub max_children: usize,
}

impl Engine {
    pub fn new(config: &Config) -> Self {
        let state = state_hash(&config.state_dir);
        Engine {
            endpoint: default_endpoint(),
            instance: config.instance.clone(),
            image: config.image.clone(),
            workspace: config.workspace.clone(),
            grace: config.grace(),
            pull_timeout: Duration::from_secs_f64(config.pull_timeout_secs),
            owner: owner_label(),
            network: network::name(&create::clean_name(&config.instance), &state),
            ownership: Ownership {
                instance: config.instance.clone(),
                state,
            },
            user: config.container_user(),
            default_network: config.network,
            defaults: config.limits.clone(),
            used_network: std::sync::atomic::AtomicBool::new(false),
            pool: Arc::new(network::Pool::new(config.instance_dir().join("networks"))),
            client: OnceCell::new(),
            removals: Arc::default(),
            precheck_ports: true,
            warm: std::sync::atomic::AtomicBool::new(false),
            max_children: config.max_children,
        }
    }

    /// Keep a network holder on pool networks (holder.rs): a job without
    /// published ports then starts ~0.1 s sooner. For managers that live on
    /// between jobs (the daemon, an MCP host); a one-off run would make a
    /// holder only to remove it again at exit.
    pub fn keep_warm(&self) {
        self.warm.store(true, Ordering::SeqCst);
    }

    /// The instance whose containers this engine labels.
    pub fn instance(&self) -> &str {
        &self.instance
    }
    /// The `berth.owner` label value: `<pid>:<start time>` of this process.
    pub fn owner(&self) -> &str {
        &self.owner
    }
    /// The `berth.state` label value: hash of this manager's state dir.
    pub fn state(&self) -> &str {
        &self.ownership.state
    }
    /// The prefix of the instance's job networks (slot N is `<prefix>-N`).
    pub fn network_name(&self) -> &str {
        &self.network
    }
    /// The image used when a spec names none.
    pub fn default_image(&self) -> &str {
        &self.image
    }
    /// Grace between SIGTERM and SIGKILL the manager uses for containers.
    pub fn grace(&self) -> Duration {
        self.grace
    }
    /// The endpoint tried (DOCKER_HOST or the default socket).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The connected client. A failed attempt is not remembered: an engine
    /// started after the manager is picked up by the next job.
    pub async fn client(&self) -> Result<&DockerClient> {
        self.client
            .get_or_try_init(|| connect(&self.endpoint, PING_TIMEOUT))
            .await
    }

    /// True when the engine answers a ping right now.
    pub async fn available(&self) -> bool {
        match self.client().await {
            Ok(d) => matches!(tokio::time::timeout(PING_TIMEOUT, d.ping()).await, Ok(Ok(_))),
            Err(_) => false,
        }
    }

    /// `auto` → docker when the engine answers, else host; `docker` without an
    /// engine is an error naming the endpoint tried.
    pub async fn resolve(&self, choice: RunnerChoice) -> Result<RunnerKind> {
        match choice {
            RunnerChoice::Host => Ok(RunnerKind::Host),
            RunnerChoice::Auto => Ok(if self.available().await {
                RunnerKind::Docker
            } else {
                RunnerKind::Host
            }),
            RunnerChoice::Docker => {
                let docker = self.client().await?;
                match tokio::time::timeout(PING_TIMEOUT, docker.ping()).await {
                    Ok(Ok(_)) => Ok(RunnerKind::Docker),
                    Ok(Err(e)) => Err(Error::EngineUnavailable {
                        endpoint: self.endpoint.clone(),
                        message: e.engine_reason(),
                    }),
                    Err(_) => Err(Error::EngineUnavailable {
                        endpoint: self.endpoint.clone(),
                        message: format!("no answer within {PING_TIMEOUT:?}"),
                    }),
                }
            }
        }
    }

    /// Follow a container a dead manager left running, skipping the lines
    /// already stored per stream (recovery mode `adopt`).
    pub async fn adopt(&self, id: &JobId, output: &Arc<JobOutput>, adoption: Adoption) -> Result<Launched> {
        let docker = self.client().await?.clone();
        adopt::adopt(self, docker, id, output, adoption).await
    }

    /// Remove the instance's job networks that no container uses (after
    /// every job ended: manager shutdown). A no-op when no job used one.
    pub async fn release_networks(&self) -> usize {
        if !self.used_network.load(Ordering::SeqCst) {
            return 0;
        }
        match self.client().await {
            Ok(docker) => {
                self.pool.holders.close(docker).await;
                network::release_all(docker, &self.ownership).await
            }
            Err(_) => 0,
        }
    }

    /// Force-remove a container from synchronous code (recovery), only when
    /// its labels say it is this instance's and state dir's.
    pub fn remove_container_blocking(&self, container_id: &str) -> bool {
        blocking_remove(
            self.endpoint.clone(),
            container_id.to_string(),
            Some(self.ownership.clone()),
        )
    }

    /// Choose the image of `spec` in `project` (the job's effective config)
    /// and make it present: pulled as the job's pull policy says, or built
    /// from the project's Dockerfile (reused while its context is unchanged),
    /// reporting progress. Dropping the future cancels a pull or build under way.
    /// (`_id`: engine failures name the image, not the job.)
    pub async fn prepare(
        &self,
        _id: &JobId,
        spec: &JobSpec,
        project: &Config,
        progress: ProgressFn,
        building: BuildProgressFn,
    ) -> Result<crate::images::ImageChoice> {
        let docker = self.client().await?;
        let dev_present =
            spec.image.is_none() && docker.inspect_image(crate::images::DEV_IMAGE).await.is_ok();
        let mut choice = match crate::images::choose_image(spec, project, dev_present)? {
            crate::images::Choice::Image(c) => c,
            crate::images::Choice::Build { build, why } => {
                return build::ensure(
                    self,
                    docker,
                    &project.workspace,
                    &build,
                    &why,
                    &building,
                    &project.limits,
                )
                .await;
            }
        };
        let policy = spec.pull.unwrap_or(project.pull);
        let limit = Duration::from_secs_f64(project.pull_timeout_secs);
        choice.pull_ms = pull::ensure(docker, &choice.name, policy, limit, &progress).await?;
        Ok(choice)
    }

    /// Build (or reuse) the project image of `project` now (`berth images
    /// build project`); `None` when the project names no Dockerfile.
    pub async fn build_project(
        &self,
        project: &Config,
        building: BuildProgressFn,
    ) -> Result<Option<crate::images::ImageChoice>> {
        let docker = self.client().await?;
        if let Some(l) = project.untrusted.first() {
            return Err(l.refusal());
        }
        match crate::images::choose_image(&JobSpec::default(), project, false)? {
            crate::images::Choice::Build { build, why } => Ok(Some(
                build::ensure(
                    self,
                    docker,
                    &project.workspace,
                    &build,
                    &why,
                    &building,
                    &project.limits,
                )
                .await?,
            )),
            crate::images::Choice::Image(_) => Ok(None),
        }
    }

    /// True when the engine answers and has `image`.
    pub async fn has_image(&self, image: &str) -> bool {
        match self.client().await {
            Ok(d) => d.inspect_image(image).await.is_ok(),
            Err(_) => false,
        }
    }

    /// Pull `image` now (`berth images pull`), reporting progress; the
    /// error names the registry and suggests the fix.
    pub async fn pull(&self, image: &str, progress: ProgressFn) -> Result<u64> {
        let docker = self.client().await?;
        let ms = pull::ensure(
            docker,
            image,
            crate::images::PullPolicy::Always,
            self.pull_timeout,
            &progress,
        )
        .await?;
        Ok(ms.unwrap_or(0))
    }

    /// Start `spec` as a container writing into `output`.
    pub async fn launch(
        &self,
        id: &JobId,
        spec: &JobSpec,
        cwd: &Path,
        output: &Arc<JobOutput>,
    ) -> Result<Launched> {
        let project = Project {
            image: &self.image,
            workspace: &self.workspace,
            user: self.user.clone(),
            network: self.default_network,
            defaults: &self.defaults,
            prepared: false,
            read_only: false,
            protect: Vec::new(),
            max_children: self.max_children,
        };
        let docker = self.client().await?.clone();
        launch::launch(self, docker, id, spec, cwd, output, &project).await
    }

    /// [`launch`](Self::launch) under a caller's project: its image,
    /// workspace, user, network and default limits instead of the engine's.
    /// The image must have been made present by [`prepare`](Self::prepare).
    pub async fn launch_in(
        &self,
        id: &JobId,
        spec: &JobSpec,
        cwd: &Path,
        output: &Arc<JobOutput>,
        config: &Config,
    ) -> Result<Launched> {
        let project = Project {
            image: &config.image,
            workspace: &config.workspace,
            user: config.container_user(),
            network: config.network,
            defaults: &config.limits,
            prepared: true,
            read_only: config.read_only,
            protect: config
                .project_file
                .iter()
                .chain(&config.user_file)
                .cloned()
                .collect(),
            max_children: config.max_children,
        };
        let docker = self.client().await?.clone();
        launch::launch(self, docker, id, spec, cwd, output, &project).await
    }

    /// CPU % (of one core = 100) and memory of a running container, from two
    /// one-shot stats samples ~100 ms apart (a one-shot answer has no
    /// previous sample to diff against). Takes a container id or a
    /// [`JobInfo`](crate::model::JobInfo); `None` for host jobs and for containers that are gone.
    pub async fn usage<T: UsageTarget + ?Sized>(&self, target: &T) -> Option<Usage> {
        let container_id = target.container_id()?;
        let docker = self.client().await.ok()?;
        let sample = || async {
            let opts = StatsOptions {
                stream: false,
                one_shot: true,
            };
            docker.stats(container_id, opts).next().await?.ok()
        };
        let first = sample().await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let second = sample().await?;
        Some(usage::between(&first, &second))
    }
}
