//! The scoped engine (`engine = "scoped"`): a Docker Engine API socket berth
//! serves into one container job, through which the job's test suite
//! (testcontainers and the like) starts, reaches and removes containers of
//! its own, and nothing else.
//!
//! Theory of operation. When a job with a scoped engine launches, [`Scope::open`]
//! binds a Unix socket in the job's private directory (`engine/docker.sock`,
//! 0600, owned by the job's uid, in a 0700 directory only berth's user
//! enters) and serves it ([`proxy`]); the container gets it bind-mounted at
//! `/var/run/docker.sock` with `DOCKER_HOST`, `TESTCONTAINERS_RYUK_DISABLED`
//! (berth reaps) and `TESTCONTAINERS_HOST_OVERRIDE` (the job network's
//! gateway, where the children's ports are relayed) set ([`Scope::setup`]).
//! Each request is read into an endpoint or refused ([`route`]), checked
//! and rewritten ([`check`] for container creates, [`requests`] for the
//! rest), resolved against the job's own objects only ([`registry`]: others
//! are "no such", 404) and forwarded to the engine's own socket; some
//! answers are rewritten on the way back ([`respond`]). Every refusal is
//! one line for the client (403) and one record for the security log (sent
//! to the manager through [`EngineHandle::refusals`]).
//!
//! Children: each gets a pool network of its own (one container per
//! network, as every job: see `network.rs` for why), no published port,
//! and berth's relay from the job's gateway ([`relay`]); its output is kept
//! with the job ([`logs`]); its limits come out of the job's own, which are
//! the sum budget of its children; at most `max_children` live at once.
//! They carry the job's labels (`berth.parent` naming the job's container,
//! plus instance, state hash and owner), so the crash watchdog and `berth
//! down` remove them like any container of the instance. When the job ends,
//! however it ends, [`Scope::close`] stops serving and removes its children,
//! networks and volumes before the job is recorded as ended.

mod check;
mod create;
mod exchange;
mod fields;
mod handle;
mod intake;
mod logs;
mod objects;
mod proxy;
mod registry;
mod relay;
mod requests;
mod respond;
mod route;
mod shared;
mod sweep;

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bollard::models::{Mount, MountType};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ownership::{LABEL_PARENT, LABEL_STATE, Ownership};
use super::pool::Pool;
use super::{DockerClient, LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER};
use crate::error::{Error, Result};
use crate::model::{ChildInfo, ChildState, JobId};

pub use logs::read as read_child_log;
use registry::Registry;
use relay::Subnet;
use shared::Shared;

/// Where the socket appears inside the job.
pub const SOCKET_IN_JOB: &str = "/var/run/docker.sock";
/// Label key: a child's name.
pub const LABEL_CHILD: &str = "berth.child";
/// Refusals waiting for the security log; beyond it they are counted in berth's own log only.
const REFUSALS_QUEUE: usize = 256;
/// Most networks and volumes one job may make.
pub const MAX_NETWORKS: usize = 8;
pub const MAX_VOLUMES: usize = 16;

/// A request the scoped engine refused, for the security log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// `POST /v1.41/containers/create`.
    pub endpoint: String,
    /// The field refused (`HostConfig.Privileged`, `path`, `container` …).
    pub field: String,
    pub reason: String,
}

/// What the manager follows of a job's scoped engine: its children as they
/// change, and what it refused.
pub struct EngineHandle {
    pub children: watch::Receiver<Vec<ChildInfo>>,
    pub refusals: mpsc::Receiver<Refused>,
}

/// What the job's container gets for its engine.
#[derive(Debug, Clone)]
pub struct Setup {
    pub env: Vec<(String, String)>,
    pub mount: Mount,
}

/// What opening a job's scoped engine needs.
pub struct Opening<'a> {
    pub job: &'a JobId,
    /// The job container's name: children's names start with it.
    pub parent: String,
    pub docker: DockerClient,
    /// The engine's endpoint (`unix:///var/run/docker.sock`).
    pub endpoint: &'a str,
    /// The job's private directory.
    pub job_dir: &'a Path,
    /// `UID:GID` or `root`: who the job runs as (the socket is theirs).
    pub user: &'a str,
    pub workspace: &'a Path,
    /// A `layer` job's layer (its upper directory): children's copies of
    /// the workspace show what the job wrote (`layers/merge.rs`).
    pub layer_upper: Option<PathBuf>,
    /// The job's limits: its children's sum budget.
    pub cpus: f64,
    pub memory: u64,
    pub pids: i64,
    pub max_children: usize,
    pub ownership: Ownership,
    pub owner: &'a str,
    pub pool: Arc<Pool>,
}

/// One job's scoped engine.
pub struct Scope {
    shared: Arc<Shared>,
    stop: CancellationToken,
    /// Set once closed; a second close waits for the first.
    closed: tokio::sync::Mutex<bool>,
}

impl Scope {
    /// Serve job `o.job`'s engine socket (see the module docs).
    pub async fn open(o: Opening<'_>) -> Result<(Arc<Scope>, EngineHandle)> {
        let refuse = |m: String| Error::InvalidSpec(m);
        let upstream = o.endpoint.strip_prefix("unix://").map(PathBuf::from).ok_or_else(|| {
            refuse(format!(
                "a scoped engine relays a local engine's socket, and this engine is {}; use the local engine (unset DOCKER_HOST)",
                o.endpoint
            ))
        })?;
        let workspace = std::fs::canonicalize(o.workspace).unwrap_or_else(|_| o.workspace.to_path_buf());
        if std::fs::canonicalize(&upstream).is_ok_and(|s| s.starts_with(&workspace)) {
            return Err(refuse(format!(
                "the workspace `{}` holds the engine's socket: a child could bind it; use a project directory as the workspace",
                workspace.display()
            )));
        }
        let dir = o.job_dir.join("engine");
        crate::store::private::own_dir(&dir)
            .map_err(|e| Error::io("make the scoped engine's directory", &dir, e))?;
        let socket = dir.join("docker.sock");
        let _ = std::fs::remove_file(&socket);
        let listener =
            UnixListener::bind(&socket).map_err(|e| Error::io("serve the scoped engine at", &socket, e))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io("restrict the scoped engine's socket", &socket, e))?;
        give(&socket, o.user)?;
        let labels = HashMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_INSTANCE.to_string(), o.ownership.instance.clone()),
            (LABEL_STATE.to_string(), o.ownership.state.clone()),
            (LABEL_OWNER.to_string(), o.owner.to_string()),
            (LABEL_PARENT.to_string(), o.parent.to_string()),
        ]);
        let (children_tx, children_rx) = watch::channel(Vec::new());
        let (refusals_tx, refusals_rx) = mpsc::channel(REFUSALS_QUEUE);
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            job: o.job.clone(),
            docker: o.docker,
            upstream,
            workspace,
            layer_upper: o.layer_upper,
            job_dir: o.job_dir.to_path_buf(),
            dir,
            socket,
            labels,
            net: Mutex::new(None),
            registry_lock: Mutex::new(Registry::new(
                o.parent.to_string(),
                o.max_children,
                o.cpus,
                o.memory,
                o.pids,
            )),
            children: children_tx,
            refusals: refusals_tx,
            pool: o.pool,
            ownership: o.ownership,
            leaving: tokio::sync::Mutex::new(()),
            tasks: TaskTracker::new(),
            stop: stop.clone(),
            closing: AtomicBool::new(false),
        });
        shared
            .tasks
            .spawn(handle::serve(listener, shared.clone(), stop.clone()));
        let scope = Arc::new(Scope {
            shared,
            stop,
            closed: tokio::sync::Mutex::new(false),
        });
        let handle = EngineHandle {
            children: children_rx,
            refusals: refusals_rx,
        };
        Ok((scope, handle))
    }

    /// What the job's container gets, on the network `network` (its pool
    /// network): the socket's mount and the variables test libraries read.
    pub async fn setup(&self, network: &str) -> Result<Setup> {
        let inspected = self.shared.docker.inspect_network(network).await?;
        let found = inspected
            .ipam
            .as_ref()
            .and_then(|i| i.config.as_ref())
            .and_then(|c| {
                c.iter().find_map(|c| {
                    let gw: IpAddr = c.gateway.as_deref()?.parse().ok()?;
                    let net = Subnet::parse(c.subnet.as_deref()?)?;
                    Some((gw, net))
                })
            });
        let Some((gateway, subnet)) = found else {
            return Err(Error::Docker {
                action: "set up the scoped engine",
                job: self.shared.job.to_string(),
                message: format!(
                    "the job network {network} has no gateway address to relay children's ports on"
                ),
            });
        };
        if let Ok(mut net) = self.shared.net.lock() {
            *net = Some((gateway, subnet));
        }
        let env = vec![
            ("DOCKER_HOST".to_string(), format!("unix://{SOCKET_IN_JOB}")),
            // berth removes the children; a reaper container would need the
            // engine's socket of its own, which no child gets.
            ("TESTCONTAINERS_RYUK_DISABLED".to_string(), "true".to_string()),
            // Children's ports are relayed on the gateway (relay.rs).
            ("TESTCONTAINERS_HOST_OVERRIDE".to_string(), gateway.to_string()),
            (
                "TESTCONTAINERS_DOCKER_SOCKET_OVERRIDE".to_string(),
                SOCKET_IN_JOB.to_string(),
            ),
        ];
        let mount = Mount {
            target: Some(SOCKET_IN_JOB.to_string()),
            source: Some(self.shared.socket.to_string_lossy().into_owned()),
            typ: Some(MountType::BIND),
            read_only: Some(false),
            ..Default::default()
        };
        Ok(Setup { env, mount })
    }

    /// Stop serving and remove every child, network and volume the job
    /// made (children one at a time). Waits for a close under way.
    pub async fn close(&self) {
        let mut closed = self.closed.lock().await;
        if *closed {
            return;
        }
        self.shared.closing.store(true, Ordering::SeqCst);
        self.stop.cancel();
        let s = &self.shared;
        let _one = s.leaving.lock().await;
        let ids: Vec<String> = Some(s.registry())
            .map(|r| {
                r.children
                    .iter()
                    .filter(|c| !c.id.is_empty() && c.state != ChildState::Removed)
                    .map(|c| c.id.clone())
                    .collect()
            })
            .unwrap_or_default();
        for id in ids {
            let removed = super::cleanup::remove_container(&s.docker, &id).await;
            s.forget_child(&id, removed);
        }
        // A create the job had under way when it ended may have reached the
        // engine without its answer reaching the registry: sweep by label.
        let mut labels = s.ownership.filters();
        labels.push(s.label_filter());
        let filters = HashMap::from([("label".to_string(), labels.clone())]);
        let opts = bollard::query_parameters::ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        };
        for c in s.docker.list_containers(opts).await.unwrap_or_default() {
            if let Some(id) = c.id {
                super::cleanup::remove_container(&s.docker, &id).await;
            }
        }
        super::cleanup::remove_volumes(&s.docker, &labels).await;
        let (networks, volumes) = {
            let mut r = s.registry();
            (std::mem::take(&mut r.networks), std::mem::take(&mut r.volumes))
        };
        for n in networks {
            if let Err(e) = s.docker.remove_network(&n.id).await
                && e.engine_status() != Some(404)
            {
                tracing::warn!(job = %s.job, error = %e, "a network the job made was not removed");
            }
        }
        for (_, real) in volumes {
            if let Err(e) = s.docker.remove_volume(&real).await
                && e.engine_status() != Some(404)
            {
                tracing::warn!(job = %s.job, error = %e, "a volume the job made was not removed");
            }
        }
        let opts = bollard::query_parameters::ListNetworksOptions {
            filters: Some(HashMap::from([("label".to_string(), labels)])),
        };
        for n in s
            .docker
            .list_networks("of the job", opts)
            .await
            .unwrap_or_default()
        {
            if let Some(id) = n.id {
                let _ = s.docker.remove_network(&id).await;
            }
        }
        let _ = std::fs::remove_file(&s.socket);
        let copies = s.dir.join("copies");
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(copies)).await;
        s.tasks.close();
        if tokio::time::timeout(std::time::Duration::from_secs(2), s.tasks.wait())
            .await
            .is_err()
        {
            tracing::debug!(job = %s.job, "scoped engine tasks still ending");
        }
        *closed = true;
    }

    /// The children's ids, for a removal from synchronous code (`Drop`).
    pub fn child_ids(&self) -> Vec<String> {
        self.stop.cancel();
        self.shared.closing.store(true, Ordering::SeqCst);
        Some(self.shared.registry())
            .map(|r| {
                r.children
                    .iter()
                    .filter(|c| !c.id.is_empty() && c.state != ChildState::Removed)
                    .map(|c| c.id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Give the socket to the job's user (`UID:GID`, or `root`).
fn give(socket: &Path, user: &str) -> Result<()> {
    let (uid, gid) = match user.split_once(':') {
        Some((u, g)) => (u.parse::<u32>().ok(), g.parse::<u32>().ok()),
        None if user == "root" => (Some(0), Some(0)),
        None => (user.parse().ok(), None),
    };
    let (Some(uid), gid) = (uid, gid) else {
        return Err(Error::InvalidSpec(format!(
            "`{user}` is not a uid:gid the socket can be given to"
        )));
    };
    let me = nix::unistd::geteuid().as_raw();
    match nix::unistd::chown(
        socket,
        Some(nix::unistd::Uid::from_raw(uid)),
        gid.map(nix::unistd::Gid::from_raw),
    ) {
        Ok(()) => Ok(()),
        Err(_) if uid == me => Ok(()),
        Err(e) => Err(Error::io(
            "give the scoped engine's socket to the job's user",
            socket,
            std::io::Error::from(e),
        )),
    }
}
