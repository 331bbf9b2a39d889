//! The Docker runner: each job is one detached container on the local engine,
//! driven through bollard, which only `client.rs` ([`DockerClient`]) calls:
//! every engine operation fails there as `Error::Engine` with its own
//! `EngineOp` and the engine's error as source. This file owns the engine
//! connection ([`Engine`]: lazy connect, `auto` resolution, launches) and
//! resource usage. The per-job [`DockerControl`] (signal, remove, a
//! background remove after the job was answered, a blocking remove for
//! `Drop` paths) is `control.rs`; the create body lives in `create.rs`, the
//! launch sequence in `launch.rs` (one create → wait → attach → start round
//! in `attempt.rs`), the exit future in `exit.rs`, removal and teardown (the
//! removals still under way included) in `cleanup.rs`, the stats arithmetic
//! in `usage.rs`, making images present in `images.rs` (pulls in `pull.rs`,
//! project image builds in `build.rs`). One client, connected once, serves every
//! job (on a Unix socket bollard opens a connection per request: ~0.2 ms
//! each here, under 1% of a container's start).
//!
//! Every container carries `berth.managed`, `berth.instance`, `berth.state`
//! (hash of the state dir), `berth.owner` (manager pid + start time) and
//! `berth.job` labels, so whatever a crashed manager left behind can be found
//! and removed without guessing, and nothing is removed by name alone
//! (`ownership.rs`). Each job gets a berth bridge of its own from one of the
//! instance's pools (`network.rs`, `pool.rs`: internal networks, or NAT'd
//! ones for `egress = "all"`); how it is reached (berth's port forwarder)
//! and what it reaches (the egress proxy) is `reach.rs`, its own `/etc`
//! files `etc.rs`. The container jobs of one MCP session share one network
//! namespace, a pod (`pod/`).
//! A job with `engine = "scoped"` also gets an engine socket of its own,
//! through which it starts children of its own (`scoped/`).

mod adopt;
mod attempt;
mod build;
mod claims;
mod cleanup;
mod client;
mod control;
mod create;
pub mod endpoint;
mod etc;
mod exec;
mod exit;
pub mod gvisor;
mod images;
mod launch;
mod layer;
pub mod liveness;
mod network;
mod ownership;
mod pause;
mod pod;
mod pool;
mod protect;
mod pull;
pub mod reach;
mod remote;
pub(crate) mod remote_layer;
mod scoped;
mod seam;
pub mod services;
mod slot;
mod ssh;
#[cfg(test)]
mod tests;
mod throttle;
mod usage;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bollard::query_parameters::StatsOptions;
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
pub use control::DockerControl;
pub use create::{DEFAULT_PIDS_LIMIT, HOME_DIR, Resources, container_name, resources};
pub use endpoint::{Endpoint, Place};
pub use exec::{EXEC_FRAME_BYTES, Exec};
pub use network::NO_ICC;
pub use ownership::{
    LABEL_INSTANCE, LABEL_JOB, LABEL_MANAGED, LABEL_OWNER, LABEL_PARENT, LABEL_STATE, Ownership, clean_name,
    state_hash,
};
pub use pull::ProgressFn;
pub use remote::owner_ids;
pub use scoped::{EngineHandle, Refused, read_child_log};
pub use usage::UsageTarget;

use cleanup::{Removals, blocking_remove, remove_container};

/// How long the engine gets to answer a ping before `auto` picks the host.
/// How long connecting to a remote engine may take (TLS or ssh handshakes).
const REMOTE_CONNECT_LIMIT: Duration = Duration::from_secs(10);
const PING_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long a blocking remove (from `Drop`) may hold its caller.
const BLOCKING_REMOVE_LIMIT: Duration = Duration::from_secs(3);

/// Connect to `endpoint` under `limit` (see [`DockerClient::connect`]); a
/// remote engine gets longer (a TLS or ssh handshake over a network).
async fn connect(endpoint: &Endpoint, limit: Duration) -> Result<DockerClient> {
    let limit = match endpoint.place() {
        Place::Local => limit,
        Place::Remote { .. } => limit.max(REMOTE_CONNECT_LIMIT),
    };
    DockerClient::connect(endpoint, limit).await
}

/// The manager's identity for the `berth.owner` label: pid and its start time
/// (field 22 of `/proc/self/stat`, clock ticks since boot), so a reused pid is
/// never mistaken for a live owner.
pub fn owner_label() -> String {
    crate::procinfo::owner_label()
}

/// The engine connection, made lazily on first use and shared by all jobs.
pub struct Engine {
    endpoint: Endpoint,
    instance: String,
    image: String,
    workspace: PathBuf,
    grace: Duration,
    /// Longest one image pull may take (`pull_timeout`).
    pull_timeout: Duration,
    owner: String,
    /// This instance and state dir: what `berth.instance`/`berth.state` must say.
    ownership: Ownership,
    /// The config's egress, allowlist and publishing, for `launch` without a project.
    egress: crate::model::Egress,
    egress_allow: crate::net::Allowlist,
    publish: crate::model::Publish,
    /// `UID:GID` or `root`; the caller's own ids unless the config says.
    user: String,
    /// The config's network, for specs that do not say.
    default_network: crate::model::Network,
    /// Limits for what a spec leaves unset.
    defaults: crate::model::Limits,
    /// Set once a job used a pool network: teardown (`Drop`) removes the
    /// instance's networks that no container uses. Kept between jobs because
    /// making a network costs ~0.2 s.
    used_network: std::sync::atomic::AtomicBool,
    /// The internal job networks (`<prefix>-net-N`) and which of them this
    /// engine's containers hold (shared with the scoped engines, whose
    /// children take networks too).
    pool: Arc<pool::Pool>,
    /// The NAT'd job networks (`<prefix>-nat-N`: `egress = "all"`).
    nat_pool: pool::Pool,
    /// The MCP sessions' pods (pod/), each on a slot of one of the pools.
    pods: Arc<pod::Pods>,
    client: OnceCell<DockerClient>,
    /// Containers of finished jobs whose removal is under way.
    removals: Arc<Removals>,
    /// Skip asked host ports that are visibly taken before asking the engine.
    precheck_ports: bool,
    /// Keep pause containers (pause.rs): a long-lived manager only.
    warm: std::sync::atomic::AtomicBool,
    /// Started containers kept ready per job shape (`launch/spare.rs`).
    spares: Arc<launch::spare::Spares>,
    /// The images seen on the engine: a start skips their look (`pull.rs`).
    present: pull::Present,
    /// The config's child limit of a scoped engine, for `launch` without a project.
    max_children: usize,
    /// The volumes that mount layers (`layer.rs`).
    layer_volumes: layer::LayerVolumes,
    /// Whether the engine is up, with hysteresis (`liveness.rs`).
    liveness: std::sync::Mutex<liveness::Liveness>,
    /// The jobs whose containers are still followed, and the sweep of the
    /// others once an engine that stopped answering is back (`claims.rs`).
    claims: Arc<claims::Claims>,
}

/// What a job's sandbox is made of: its project's decisions about its
/// container (image, workspace, user, network, egress, limits, protected files).
pub(super) struct Sandbox<'a> {
    pub image: &'a str,
    pub workspace: &'a Path,
    pub user: String,
    /// The project's network, for specs that do not say.
    pub network: crate::model::Network,
    /// The project's egress (a spec may ask for a tighter one), its proxy's
    /// rules, and who publishes ports.
    pub egress: crate::model::Egress,
    pub rules: reach::EgressRules,
    pub publish: crate::model::Publish,
    pub defaults: &'a crate::model::Limits,
    /// The image was made present already (`Engine::prepare`).
    pub prepared: bool,
    /// The pull policy of a job that names none: how an image found gone at
    /// the create is made present again.
    pub pull: crate::images::PullPolicy,
    /// Every job gets a read-only root (`read_only = true`).
    pub read_only: bool,
    /// Config files inside the workspace that jobs must not change, beyond
    /// the usual names (`protect.rs`): the project's, the user's.
    pub protect: Vec<std::path::PathBuf>,
    /// Most children of a job with a scoped engine.
    pub max_children: usize,
    /// `layer` mode: the layer the job writes (`crate::layers`).
    pub layer: Option<&'a crate::layers::Layer>,
    /// The engine runtime that gives `isolation = "gvisor"` (`gvisor.rs`).
    pub gvisor_runtime: &'a str,
}

impl Engine {
    pub fn new(config: &Config) -> Self {
        let state = state_hash(&config.state_dir);
        let clean = create::clean_name(&config.instance);
        let networks = config.instance_dir();
        Engine {
            endpoint: Endpoint::current().clone(),
            instance: config.instance.clone(),
            image: config.image.clone(),
            workspace: config.workspace.clone(),
            grace: config.grace(),
            pull_timeout: Duration::from_secs_f64(config.pull_timeout_secs),
            owner: owner_label(),
            pool: Arc::new(pool::Pool::new(
                network::name(&clean, &state),
                true,
                networks.join("networks"),
            )),
            nat_pool: pool::Pool::new(
                network::nat_name(&clean, &state),
                false,
                networks.join("networks-nat"),
            ),
            pods: Arc::new(pod::Pods::new(networks.join("pods"))),
            egress: config.egress,
            // Validated when the config was loaded.
            egress_allow: crate::net::Allowlist::parse(&config.egress_allow).unwrap_or_default(),
            publish: config.publish,
            ownership: Ownership {
                instance: config.instance.clone(),
                state,
            },
            user: config.container_user(),
            default_network: config.network,
            defaults: config.limits.clone(),
            used_network: std::sync::atomic::AtomicBool::new(false),
            client: OnceCell::new(),
            removals: Arc::default(),
            precheck_ports: true,
            warm: std::sync::atomic::AtomicBool::new(false),
            present: pull::Present::default(),
            spares: Arc::new(launch::spare::Spares::new(
                config.warm_pool,
                Duration::from_secs_f64(config.warm_idle_secs),
                networks.join("warm"),
            )),
            max_children: config.max_children,
            layer_volumes: Default::default(),
            liveness: Default::default(),
            claims: Arc::new(claims::Claims::new(
                Ownership {
                    instance: config.instance.clone(),
                    state: state_hash(&config.state_dir),
                },
                owner_label(),
                Duration::from_secs_f64(config.engine_patience_secs),
            )),
        }
    }

    /// Keep a pause container on pool networks (pause.rs): a job without
    /// published ports then starts ~0.1 s sooner. For managers that live on
    /// between jobs (the daemon, an MCP host); a one-off run would make a
    /// pause only to remove it again at exit.
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
    /// The prefix of the instance's internal job networks (slot N is `<prefix>-N`).
    pub fn network_name(&self) -> &str {
        self.pool.prefix()
    }
    /// The image used when a spec names none.
    pub fn default_image(&self) -> &str {
        &self.image
    }
    /// Grace between SIGTERM and SIGKILL the manager uses for containers.
    pub fn grace(&self) -> Duration {
        self.grace
    }
    /// The endpoint tried (DOCKER_HOST, the Docker context, or the default socket).
    pub fn endpoint(&self) -> &str {
        &self.endpoint.host
    }

    /// The endpoint with where it came from and whether it is remote.
    pub fn endpoint_info(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The connected client. A failed attempt is not remembered: an engine
    /// started after the manager is picked up by the next job.
    pub async fn client(&self) -> Result<&DockerClient> {
        self.client
            .get_or_try_init(|| connect(&self.endpoint, PING_TIMEOUT))
            .await
    }

    /// Ping and say what state that leaves the engine in (`liveness.rs`).
    async fn reach(&self) -> liveness::Reach {
        let answered = match self.client().await {
            Ok(d) => matches!(tokio::time::timeout(PING_TIMEOUT, d.ping()).await, Ok(Ok(_))),
            Err(_) => false,
        };
        self.liveness
            .lock()
            .unwrap()
            .record(answered, std::time::Instant::now())
    }

    /// `auto` → docker when the engine answers, host when it is down (never
    /// seen, or failing for a while); an engine that stopped answering
    /// moments ago is a blip: the job is refused rather than moved to the
    /// host. `docker` without an engine is an error naming the endpoint tried.
    pub async fn resolve(&self, choice: RunnerChoice) -> Result<RunnerKind> {
        match choice {
            RunnerChoice::Host => Ok(RunnerKind::Host),
            // Checked by the swarm runner itself (a manager of a swarm).
            RunnerChoice::Swarm => Ok(RunnerKind::Swarm),
            RunnerChoice::Auto => match self.reach().await {
                liveness::Reach::Up => Ok(RunnerKind::Docker),
                liveness::Reach::Down => Ok(RunnerKind::Host),
                liveness::Reach::Blip { failing_for } => Err(Error::EngineUnavailable {
                    endpoint: self.endpoint.host.clone(),
                    message: format!(
                        "it answered before and stopped {}s ago; berth does not move jobs to the host over a blip (retry, or wait {}s for it to count as down)",
                        failing_for.as_secs(),
                        liveness::DOWN_AFTER.as_secs()
                    ),
                }),
            },
            RunnerChoice::Docker => {
                let docker = self.client().await?;
                let ping = tokio::time::timeout(PING_TIMEOUT, docker.ping()).await;
                let answered = matches!(ping, Ok(Ok(_)));
                self.liveness
                    .lock()
                    .unwrap()
                    .record(answered, std::time::Instant::now());
                match ping {
                    Ok(Ok(_)) => Ok(RunnerKind::Docker),
                    Ok(Err(e)) => Err(Error::EngineUnavailable {
                        endpoint: self.endpoint.host.clone(),
                        message: e.engine_reason(),
                    }),
                    Err(_) => Err(Error::EngineUnavailable {
                        endpoint: self.endpoint.host.clone(),
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
        let _adopting = self.claims.claim(id);
        adopt::adopt(self, docker, id, output, adoption).await
    }

    /// Remove the instance's job networks that no container uses (after
    /// every job ended: manager shutdown). A no-op when no job used one.
    pub async fn release_networks(&self) -> usize {
        // Spares hold pool networks: they go first. None were made without
        // a client, and an engine never reached is not dialled now.
        if let Some(docker) = self.client.get() {
            self.spares.close(docker).await;
        }
        if !self.used_network.load(Ordering::SeqCst) {
            return 0;
        }
        match self.client().await {
            Ok(docker) => {
                self.pods.close().await;
                self.pool.pauses.close(docker).await;
                self.nat_pool.pauses.close(docker).await;
                network::release_all(docker, &self.ownership).await
            }
            Err(_) => 0,
        }
    }

    /// The MCP session `owner` ended: its pods go, each once its last job
    /// ended (pod/).
    pub async fn end_pods(&self, owner: &str) {
        self.pods.end(owner).await;
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
        let job = id.clone();
        let on_denial: crate::net::DenialFn = Arc::new(move |d: crate::net::Denial| {
            tracing::warn!(job = %job, request = %d.request(), reason = %d.reason, "egress denied");
        });
        let project = Sandbox {
            image: &self.image,
            workspace: &self.workspace,
            user: self.user.clone(),
            network: self.default_network,
            egress: self.egress,
            rules: self.rules(self.egress_allow.clone(), on_denial),
            publish: self.publish,
            defaults: &self.defaults,
            prepared: false,
            pull: crate::images::PullPolicy::Missing,
            read_only: false,
            protect: Vec::new(),
            max_children: self.max_children,
            layer: None,
            gvisor_runtime: "runsc",
        };
        let docker = self.client().await?.clone();
        // Claimed before its container exists: a sweep meanwhile leaves it.
        let _launching = self.claims.claim(id);
        launch::launch(self, docker, id, spec, cwd, output, &project).await
    }

    /// [`launch`](Self::launch) under a caller's project: its image,
    /// workspace, user, network, egress and default limits instead of the
    /// engine's; `on_denial` hears of every request its egress proxy denies.
    /// The image must have been made present by [`prepare`](Self::prepare).
    pub async fn launch_in(&self, job: &crate::runner::Launch<'_>) -> Result<Launched> {
        let (id, spec, cwd, output) = (job.id, job.spec, job.cwd, job.output);
        let project = self.sandbox(job.config, job.on_denial.clone(), job.layer)?;
        let docker = self.client().await?.clone();
        let _launching = self.claims.claim(id);
        launch::launch(self, docker, id, spec, cwd, output, &project).await
    }

    /// A job of `spec`'s shape started under `config`: make a spare
    /// container for the next one (`warm_pool`; a long-lived manager only).
    pub async fn warm_fill(&self, spec: &JobSpec, cwd: &Path, config: &Config) {
        if !self.warm.load(Ordering::SeqCst) || !self.spares.wanted() {
            return;
        }
        let quiet: crate::net::DenialFn = Arc::new(|_| {});
        let (Ok(project), Ok(docker)) = (self.sandbox(config, quiet, None), self.client().await) else {
            return;
        };
        launch::spare::fill(self, docker.clone(), spec, cwd, &project).await;
    }

    /// The sandbox of a job under `config`, its project.
    fn sandbox<'a>(
        &self,
        config: &'a Config,
        on_denial: crate::net::DenialFn,
        layer: Option<&'a crate::layers::Layer>,
    ) -> Result<Sandbox<'a>> {
        let allow = crate::net::Allowlist::parse(&config.egress_allow)?;
        Ok(Sandbox {
            image: &config.image,
            workspace: &config.workspace,
            user: config.container_user(),
            network: config.network,
            egress: config.egress,
            rules: self.rules(allow, on_denial),
            publish: config.publish,
            defaults: &config.limits,
            prepared: true,
            pull: config.pull,
            read_only: config.read_only,
            protect: config
                .project_file
                .iter()
                .chain(&config.user_file)
                .cloned()
                .collect(),
            max_children: config.max_children,
            layer,
            gvisor_runtime: &config.gvisor_runtime,
        })
    }

    /// Remove the layer volumes this engine made (shutdown: no container
    /// uses them any more).
    pub async fn release_layer_volumes(&self) {
        if let Ok(docker) = self.client().await {
            self.release_layers(docker).await;
        }
    }

    /// The egress proxy's rules: `allow`, never this engine's TCP endpoint.
    fn rules(&self, allow: crate::net::Allowlist, on_denial: crate::net::DenialFn) -> reach::EgressRules {
        reach::EgressRules {
            allow,
            deny: reach::endpoint_addr(&self.endpoint.host),
            on_denial,
        }
    }

    /// The pool of `internal` or NAT'd networks.
    fn pool_of(&self, internal: bool) -> &pool::Pool {
        if internal { &self.pool } else { &self.nat_pool }
    }

    /// The tar of `path` in container `id`, at most `limit` bytes.
    pub async fn copy_out(&self, id: &str, path: &str, limit: u64) -> Result<Vec<u8>> {
        self.client().await?.download_archive(id, path, limit).await
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
