//! The Docker runner: each job is one detached container on the local engine,
//! driven through bollard. This file owns the engine connection ([`Engine`]:
//! lazy connect, API version negotiation, `auto` resolution), the per-job
//! [`DockerControl`] (signal, remove, a blocking remove for `Drop` paths),
//! resource usage and the labelled clean-up. The create body lives in
//! `create.rs`, the create → wait → attach → start sequence in `launch.rs`,
//! the exit future in `exit.rs`, the stats arithmetic in `usage.rs`.
//!
//! Every container carries `berth.managed`, `berth.instance`, `berth.state`
//! (hash of the state dir), `berth.owner` (manager pid + start time) and
//! `berth.job` labels, so whatever a crashed manager left behind can be found
//! and removed without guessing, and nothing is removed by name alone
//! (`ownership.rs`). Jobs share the instance's isolated bridge (`network.rs`).

mod adopt;
mod create;
mod exit;
mod launch;
mod network;
mod ownership;
#[cfg(test)]
mod tests;
mod usage;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::query_parameters::{
    KillContainerOptions, ListContainersOptions, RemoveContainerOptions, StatsOptions,
};
use futures_util::StreamExt;
use tokio::sync::OnceCell;

use super::Launched;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::job::{JobId, JobSpec, RunnerChoice, RunnerKind, Usage};
use crate::output::JobOutput;

pub use adopt::Adoption;
pub use create::{
    DEFAULT_PIDS_LIMIT, HOME_DIR, LABEL_INSTANCE, LABEL_JOB, LABEL_MANAGED, LABEL_OWNER, container_name,
};
pub use network::NO_ICC;
pub use ownership::{LABEL_STATE, Ownership, state_hash};
pub use usage::UsageTarget;

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

/// Connect to `endpoint`, negotiate the API version down to the engine's
/// (Debian's 20.10 speaks 1.41 and refuses newer clients), and ping, all
/// under `limit`. For the default socket this is exactly
/// `Docker::connect_with_local_defaults()`; naming the endpoint explicitly
/// also covers `tcp://`/`ssh://` hosts and lets errors say what was tried.
async fn connect(endpoint: &str, limit: Duration) -> Result<Docker> {
    let unavailable = |message: String| Error::EngineUnavailable {
        endpoint: endpoint.to_string(),
        message,
    };
    let attempt = async {
        let docker = Docker::connect_with_host(endpoint).map_err(|e| unavailable(e.to_string()))?;
        let docker = docker
            .negotiate_version()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        docker.ping().await.map_err(|e| unavailable(e.to_string()))?;
        Ok(docker)
    };
    match tokio::time::timeout(limit, attempt).await {
        Ok(r) => r,
        Err(_) => Err(unavailable(format!("no answer within {limit:?}"))),
    }
}

/// The status code of an engine error answer, if it was one.
fn status(e: &BollardError) -> Option<u16> {
    match e {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// The engine's own message, without bollard's wrapping.
fn message(e: &BollardError) -> String {
    match e {
        BollardError::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
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
    docker: Docker,
    /// For `remove_blocking`, which must make its own connection.
    endpoint: String,
    /// Bit N set = signal N was sent; lets the exit mapping tell "died of the
    /// signal we sent" (exit 128+N from the init) from an ordinary exit code.
    sent: Arc<AtomicU64>,
}

impl std::fmt::Debug for DockerControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerControl")
            .field("container_id", &self.container_id)
            .finish()
    }
}

impl DockerControl {
    fn new(docker: Docker, endpoint: String, container_id: String) -> Self {
        DockerControl {
            container_id,
            docker,
            endpoint,
            sent: Arc::new(AtomicU64::new(0)),
        }
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
        match self.docker.kill_container(&self.container_id, Some(opts)).await {
            Ok(()) => {}
            Err(e) if matches!(status(&e), Some(404 | 409)) => {}
            Err(e) => tracing::warn!(
                container = %self.container_id,
                signal,
                error = %message(&e),
                "could not signal container"
            ),
        }
    }

    /// Force-remove the container (after its output was drained). Gone already is fine.
    pub async fn remove(&self) {
        remove_container(&self.docker, &self.container_id).await;
    }

    /// Force-remove from a synchronous context (`Drop`), even inside a tokio
    /// runtime: a fresh thread with its own runtime and its own connection
    /// (the shared client's connections are driven by the caller's runtime,
    /// which may be the very thread we block). Waits at most ~3 s.
    pub fn remove_blocking(&self) {
        blocking_remove(self.endpoint.clone(), self.container_id.clone(), None);
    }
}

async fn remove_container(docker: &Docker, id: &str) -> bool {
    let opts = RemoveContainerOptions {
        force: true,
        v: true,
        link: false,
    };
    match docker.remove_container(id, Some(opts)).await {
        Ok(()) => true,
        // 404: already gone; 409: a removal is already in progress.
        Err(e) if matches!(status(&e), Some(404 | 409)) => true,
        Err(e) => {
            tracing::warn!(container = %id, error = %message(&e), "could not remove container");
            false
        }
    }
}

/// Force-remove `id` only when its labels say it is `owner`'s. True when it
/// was removed or is gone; a container of someone else's is never touched.
async fn remove_if_owned(docker: &Docker, id: &str, owner: &Ownership) -> bool {
    match docker.inspect_container(id, None).await {
        Ok(c) if owner.owns(c.config.as_ref().and_then(|c| c.labels.as_ref())) => {
            remove_container(docker, id).await
        }
        Ok(_) => {
            tracing::warn!(container = %id, "not removed: its labels name another berth instance or state dir");
            false
        }
        Err(e) if status(&e) == Some(404) => true,
        Err(e) => {
            tracing::warn!(container = %id, error = %message(&e), "could not inspect container");
            false
        }
    }
}

/// The engine connection, made lazily on first use and shared by all jobs.
pub struct Engine {
    endpoint: String,
    instance: String,
    image: String,
    workspace: PathBuf,
    grace: Duration,
    owner: String,
    /// This instance and state dir: what `berth.instance`/`berth.state` must say.
    ownership: Ownership,
    /// `UID:GID` or `root`; the caller's own ids unless the config says.
    user: String,
    /// The instance's isolated bridge.
    network: String,
    /// `bridge` or `none`, for specs that do not say.
    default_network: String,
    /// Limits for what a spec leaves unset.
    defaults: crate::job::Limits,
    /// Set once a job used the instance network: teardown (`Drop`) removes it
    /// if no job of another manager still does. Kept between jobs because
    /// making a network costs ~0.2 s.
    used_network: std::sync::atomic::AtomicBool,
    /// One `network::ensure` at a time: concurrent launches would each make one.
    network_lock: tokio::sync::Mutex<()>,
    client: OnceCell<Docker>,
    /// Skip asked host ports that are visibly taken before asking the engine.
    precheck_ports: bool,
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
            owner: owner_label(),
            network: network::name(&create::clean_name(&config.instance), &state),
            ownership: Ownership {
                instance: config.instance.clone(),
                state,
            },
            user: config.container_user(),
            default_network: config.network.clone(),
            defaults: config.limits.clone(),
            used_network: std::sync::atomic::AtomicBool::new(false),
            network_lock: tokio::sync::Mutex::new(()),
            client: OnceCell::new(),
            precheck_ports: true,
        }
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
    /// The instance's isolated bridge network.
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
    pub async fn client(&self) -> Result<&Docker> {
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
                        message: message(&e),
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

    /// Force-remove a container from synchronous code (recovery), only when
    /// its labels say it is this instance's and state dir's.
    pub fn remove_container_blocking(&self, container_id: &str) -> bool {
        blocking_remove(
            self.endpoint.clone(),
            container_id.to_string(),
            Some(self.ownership.clone()),
        )
    }

    /// Start `spec` as a container writing into `output`.
    pub async fn launch(
        &self,
        id: &JobId,
        spec: &JobSpec,
        cwd: &Path,
        output: &Arc<JobOutput>,
    ) -> Result<Launched> {
        let docker = self.client().await?.clone();
        launch::launch(self, docker, id, spec, cwd, output).await
    }

    /// CPU % (of one core = 100) and memory of a running container, from two
    /// one-shot stats samples ~100 ms apart (a one-shot answer has no
    /// previous sample to diff against). Takes a container id or a
    /// [`JobInfo`](crate::job::JobInfo); `None` for host jobs and for containers that are gone.
    pub async fn usage<T: UsageTarget + ?Sized>(&self, target: &T) -> Option<Usage> {
        let container_id = target.container_id()?;
        let docker = self.client().await.ok()?;
        let sample = || async {
            let opts = StatsOptions {
                stream: false,
                one_shot: true,
            };
            docker.stats(container_id, Some(opts)).next().await?.ok()
        };
        let first = sample().await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let second = sample().await?;
        Some(usage::between(&first, &second))
    }

    /// Force-remove every container labelled as managed by `instance` *and*
    /// this state dir (another state dir's instance of that name is left
    /// alone), then the instance network. Returns how many were removed (0
    /// when the engine is unreachable).
    pub async fn remove_labelled(&self, instance: &str) -> usize {
        let owner = Ownership {
            instance: instance.to_string(),
            state: self.ownership.state.clone(),
        };
        let n = self.remove_matching(&owner.filters()).await;
        if let Ok(docker) = self.client().await {
            network::release(docker, &self.network, &self.ownership).await;
        }
        n
    }

    /// Force-remove every container of this instance and state dir whose
    /// `berth.owner` is `owner` (a manager that died); returns how many were removed.
    pub async fn remove_owned(&self, owner: &str) -> usize {
        let mut labels = self.ownership.filters();
        labels.push(format!("{LABEL_OWNER}={owner}"));
        let n = self.remove_matching(&labels).await;
        if let Ok(docker) = self.client().await {
            network::release(docker, &self.network, &self.ownership).await;
        }
        n
    }

    async fn remove_matching(&self, labels: &[String]) -> usize {
        let Ok(docker) = self.client().await else {
            return 0;
        };
        let filters = std::collections::HashMap::from([("label".to_string(), labels.to_vec())]);
        let opts = ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        };
        let list = match docker.list_containers(Some(opts)).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(?labels, error = %message(&e), "could not list containers");
                return 0;
            }
        };
        let removals = list
            .iter()
            .filter_map(|c| c.id.as_deref())
            .map(|id| remove_container(docker, id));
        futures_util::future::join_all(removals)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count()
    }
}

impl Engine {
    /// The id of the instance network, made if needed (one caller at a time).
    async fn ensure_network(&self, docker: &Docker) -> Result<String> {
        self.used_network.store(true, Ordering::SeqCst);
        let _one = self.network_lock.lock().await;
        network::ensure(docker, &self.network, &self.ownership).await
    }
}

impl Drop for Engine {
    /// Teardown: remove the instance network when this manager used it and
    /// no container (of any manager of the instance) still does.
    fn drop(&mut self) {
        if !self.used_network.load(Ordering::SeqCst) {
            return;
        }
        let (endpoint, name, owner) = (
            self.endpoint.clone(),
            self.network.clone(),
            self.ownership.clone(),
        );
        let done = std::thread::Builder::new()
            .name("berth-docker-network".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                    return;
                };
                rt.block_on(async {
                    if let Ok(docker) = connect(&endpoint, BLOCKING_REMOVE_LIMIT).await {
                        let _ = tokio::time::timeout(
                            BLOCKING_REMOVE_LIMIT,
                            network::release(&docker, &name, &owner),
                        )
                        .await;
                    }
                });
            });
        if let Ok(handle) = done {
            let _ = handle.join();
        }
    }
}

/// Force-remove container `id` from synchronous code (`Drop`, recovery) that
/// may itself run inside a tokio runtime: a thread of its own with its own
/// runtime does the work, waited for at most [`BLOCKING_REMOVE_LIMIT`].
/// With `owner`, a container whose labels say otherwise is left alone.
/// True when the container was removed (or already gone).
fn blocking_remove(endpoint: String, id: String, owner: Option<Ownership>) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let thread_id = id.clone();
    let spawned = std::thread::Builder::new()
        .name("berth-docker-remove".into())
        .spawn(move || {
            let id = thread_id;
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::warn!(container = %id, error = %e, "no runtime to remove container");
                    return;
                }
            };
            let removed = rt.block_on(async {
                match connect(&endpoint, BLOCKING_REMOVE_LIMIT).await {
                    Ok(docker) => match owner {
                        None => remove_container(&docker, &id).await,
                        Some(owner) => remove_if_owned(&docker, &id, &owner).await,
                    },
                    Err(e) => {
                        tracing::warn!(container = %id, error = %e, "could not remove container");
                        false
                    }
                }
            });
            let _ = tx.send(removed);
        });
    if let Err(e) = spawned {
        tracing::warn!(container = %id, error = %e, "no thread to remove container");
        return false;
    }
    match rx.recv_timeout(BLOCKING_REMOVE_LIMIT) {
        Ok(removed) => removed,
        Err(_) => {
            tracing::warn!(
                container = %id,
                "container removal still running after {BLOCKING_REMOVE_LIMIT:?}; left to finish in the background"
            );
            false
        }
    }
}
