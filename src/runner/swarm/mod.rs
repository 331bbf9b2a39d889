//! The Swarm runner (`runner = "swarm"`): each job is a one-replica service
//! on a Docker Swarm, created through the swarm's manager (the engine
//! berth's endpoint names), placed by the swarm's scheduler on any node.
//!
//! What differs from one engine, and where it is handled:
//! - the service (`spec.rs`): limits are reservations too, ports are
//!   published in host mode on the task's node and relayed from the
//!   caller's 127.0.0.1 as a remote engine's are, the stop grace is berth's;
//! - the workspace (`workspace.rs`): configs the task unpacks into a tmpfs;
//!   a `layer` job's comes back through its log (`readback.rs`);
//! - where it runs and how it ended (`task.rs`): task states polled, exit
//!   codes from terminal states only, a task on a node that went down lost;
//! - output (`exit.rs`): the service log, followed and read once more at the end;
//! - stop and removal (`control.rs`): scale to zero, then remove.
//!
//! Egress: the egress proxy is a process of this machine, which a task on
//! another node cannot use, so a job is either on an internal overlay
//! network of its own (no way out: `egress` none or proxy, and no ports;
//! `sweep.rs`) or on its node's bridge (a way out: `egress = "all"`, or
//! ports, which the swarm publishes only there), said on its card.
//!
//! Services, configs and the overlay carry berth's labels: the crash
//! watchdog and the next manager remove a dead owner's (`sweep.rs`).

mod control;
mod exit;
mod nodes;
mod readback;
mod spec;
mod sweep;
mod task;
mod workspace;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::model::{Egress, JobId, Stream};
use crate::net::forward::{self, Upstream, Want};
use crate::runner::docker::remote_layer::RemoteLayer;
use crate::runner::docker::{
    DockerClient, Endpoint, LABEL_INSTANCE, LABEL_JOB, LABEL_MANAGED, LABEL_OWNER, LABEL_STATE, Ownership,
};
use crate::runner::{Control, JobControl, Launch, Launched, Runner};

use crate::runner::docker::services::{Which, remove_services};

/// How long connecting to the manager may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(10);
/// Most bytes of a job's workspace tmpfs on its node.
const TMPFS_BYTES: i64 = 1 << 30;

/// The swarm, through its manager.
pub struct Swarm {
    endpoint: Endpoint,
    ownership: Ownership,
    owner: String,
    grace: Duration,
    client: OnceCell<DockerClient>,
}

impl Swarm {
    pub fn new(config: &Config) -> Swarm {
        Swarm {
            endpoint: Endpoint::current().clone(),
            ownership: Ownership {
                instance: config.instance.clone(),
                state: crate::runner::docker::state_hash(&config.state_dir),
            },
            owner: crate::procinfo::owner_label(),
            grace: config.grace(),
            client: OnceCell::new(),
        }
    }

    /// The manager's client, once it said it is a swarm manager.
    pub async fn client(&self) -> Result<&DockerClient> {
        self.client
            .get_or_try_init(|| async {
                let docker = DockerClient::connect(&self.endpoint, CONNECT_LIMIT).await?;
                let info = docker.info().await?;
                let swarm = info.swarm.unwrap_or_default();
                if swarm.control_available != Some(true) {
                    let state = swarm.local_node_state.map_or("unknown".into(), |s| s.to_string());
                    return Err(Error::EngineUnavailable {
                        endpoint: self.endpoint.host.clone(),
                        message: format!(
                            "runner swarm needs a swarm manager, and this engine's swarm state is `{state}` without control: point DOCKER_HOST at a manager node (`docker node ls` works there)"
                        ),
                    });
                }
                Ok(docker)
            })
            .await
    }

    /// Every job ended: remove what of this manager's is still on the swarm
    /// (a service whose removal after its job did not finish) and the
    /// overlay. Nothing to do when no swarm job ran.
    pub async fn shutdown(&self) {
        let Some(docker) = self.client.get() else {
            return;
        };
        let mut mine = self.ownership.filters();
        mine.push(format!("{LABEL_OWNER}={}", self.owner));
        remove_services(docker, &mine, Which::All).await;
        sweep::remove_overlays(docker, &mine).await;
    }

    /// The labels of the job's service, container and configs.
    fn labels(&self, id: &JobId) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_INSTANCE.to_string(), self.ownership.instance.clone()),
            (LABEL_OWNER.to_string(), self.owner.clone()),
            (LABEL_JOB.to_string(), id.to_string()),
            (LABEL_STATE.to_string(), self.ownership.state.clone()),
        ])
    }

    /// Where the job's task is attached: an internal overlay of its own
    /// (no way out), or none, its node's bridge (a way out), with why.
    async fn network(
        &self,
        docker: &DockerClient,
        job: &Launch<'_>,
        name: &str,
        notes: &mut Vec<String>,
    ) -> Result<Option<String>> {
        let asked = job.spec.egress.unwrap_or(job.config.egress);
        Ok(match (asked, job.spec.ports.is_empty()) {
            (Egress::All, _) => None,
            (_, false) => {
                notes.push(format!(
                    "egress {asked}: on a swarm, a job's ports are published only on its node's bridge, which has a way out, so all"
                ));
                None
            }
            (_, true) => {
                if asked == Egress::Proxy {
                    notes.push("egress proxy: berth's proxy cannot serve another machine, so none on a swarm (set egress = \"all\" to let the job out)".into());
                }
                Some(sweep::make_overlay(docker, name, &self.labels(job.id)).await?)
            }
        })
    }

    /// Create the job's service and wait until the swarm placed its task;
    /// a service whose task did not run is removed again.
    async fn place(&self, docker: &DockerClient, job: &Launch<'_>, parts: spec::Parts<'_>) -> Result<Made> {
        let (service_spec, limits) = spec::service(job.spec, parts)?;
        let service = docker.create_service(service_spec).await?;
        let limit = Duration::from_secs_f64(job.config.pull_timeout_secs);
        match task::placed(docker, &service, limit).await {
            Ok(placed) => Ok(Made {
                service,
                placed,
                limits,
            }),
            Err(e) => {
                let _ = docker.remove_service(&service).await;
                Err(e)
            }
        }
    }

    /// Send the workspace and place the service; what was sent is
    /// removed again when the service did not run.
    async fn make(
        &self,
        docker: &DockerClient,
        job: &Launch<'_>,
        name: String,
        (network, marker): (Option<String>, Option<String>),
        notes: &mut Vec<String>,
    ) -> Result<(workspace::Uploaded, Made)> {
        let config = job.config;
        let labels = self.labels(job.id);
        let user = config.container_user();
        let ws = workspace_path(config);
        let uploaded = workspace::upload(
            docker,
            &ws,
            crate::runner::docker::owner_ids(&user),
            &name,
            &labels,
        )
        .await?;
        // On the card: what went, and what comes back.
        let back = match job.layer {
            Some(l) => format!(
                "its changes come back into layer {} when it ends, through its log (`berth diff {0}`)",
                l.meta.name
            ),
            None => "nothing comes back".to_string(),
        };
        notes.insert(0, format!("{}; {back}", uploaded.note));
        let cwd = if job.cwd.starts_with(&ws) {
            job.cwd
        } else {
            ws.as_path()
        };
        let parts = spec::Parts {
            name,
            image: job.spec.image.as_deref().unwrap_or(&config.image),
            labels,
            workspace: ws.to_string_lossy().into_owned(),
            cwd: cwd.to_string_lossy().into_owned(),
            user: if user == "root" { "0:0".into() } else { user },
            configs: uploaded.configs.clone(),
            defaults: &config.limits,
            grace: self.grace,
            network,
            tmpfs_bytes: TMPFS_BYTES.max(uploaded.tar.len() as i64 * 2),
            marker,
        };
        match self.place(docker, job, parts).await {
            Ok(made) => Ok((uploaded, made)),
            Err(e) => {
                workspace::remove(docker, &uploaded.configs).await;
                Err(e)
            }
        }
    }

    async fn launch_job(&self, job: &Launch<'_>) -> Result<Launched> {
        let docker = self.client().await?.clone();
        let uploaded_at = chrono::Utc::now();
        // A `layer` job's archive comes back behind a marker of its own.
        let marker = job.layer.map(|_| marker(job.id));
        let writers = exit::Writers {
            out: job.output.writer(Stream::Stdout)?,
            err: job.output.writer(Stream::Stderr)?,
            frame: marker.as_deref().map(readback::Frame::new),
        };
        let bound = forward::bind(job.id.as_str(), &wants(job.spec))?;
        let name =
            crate::runner::docker::container_name(&self.ownership.instance, &self.ownership.state, job.id);
        let mut notes = Vec::new();
        let network = self.network(&docker, job, &name, &mut notes).await?;
        let made = self
            .make(&docker, job, name, (network.clone(), marker), &mut notes)
            .await;
        let (
            uploaded,
            Made {
                service,
                placed,
                mut limits,
            },
        ) = match made {
            Ok(m) => m,
            Err(e) => {
                if let Some(net) = &network {
                    sweep::remove_overlay(&docker, net).await;
                }
                return Err(e);
            }
        };
        limits.network = Some(match &network {
            None => "its node's bridge".into(),
            Some(_) => "an internal overlay of its own".into(),
        });
        limits.not_enforced.extend(notes);
        let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let back = exit::Back::default();
        let control = control::SwarmControl {
            docker: docker.clone(),
            endpoint: self.endpoint.clone(),
            service: service.clone(),
            configs: uploaded.configs,
            network,
            stopped: stopped.clone(),
            forwarder: std::sync::Mutex::new(None),
            layer: job.layer.map(|layer| {
                let layer = RemoteLayer {
                    upload: uploaded.tar,
                    upload_top: std::path::PathBuf::new(),
                    workspace: workspace_path(job.config),
                    layer_dir: layer.dir.clone(),
                    uploaded_at,
                };
                (layer, back.clone())
            }),
        };
        // From here the control owns what was made: a failure removes it.
        let upstream = Upstream::Published {
            ip: placed.node.addr,
            ports: placed.ports.clone(),
        };
        let forwarder = match bound.serve(upstream) {
            Ok(f) => f,
            Err(e) => {
                control.cleanup();
                return Err(e);
            }
        };
        let ports = forwarder.mappings().to_vec();
        *control.forwarder.lock().unwrap_or_else(|e| e.into_inner()) = Some(forwarder);
        let node = placed.node.to_string();
        Ok(Launched {
            pid: None,
            container_id: None,
            ports,
            limits,
            internal_ip: None,
            control: Control::new(control),
            exit: Box::pin(exit::watch(docker, service, placed, writers, stopped, back)),
            sweep: None,
            engine: None,
            node: Some(node),
        })
    }
}

/// The workspace as the task sees it: its path on this machine.
fn workspace_path(config: &Config) -> std::path::PathBuf {
    std::fs::canonicalize(&config.workspace).unwrap_or_else(|_| config.workspace.clone())
}

/// The marker of job `id`'s workspace archive in its log (`readback.rs`):
/// unique, so that no output of another job's or of its own run matches it.
fn marker(id: &JobId) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("berth-layer-{id}-{nanos:x}:")
}

/// A service the swarm placed, and the limits it applies.
struct Made {
    service: String,
    placed: task::Placed,
    limits: crate::model::AppliedLimits,
}

/// berth's 127.0.0.1 listeners for the job's ports.
fn wants(spec: &crate::model::JobSpec) -> Vec<Want> {
    spec.ports
        .iter()
        .map(|p| Want {
            port: p.port,
            proto: p.proto,
            host_port: p.host_port,
            note: None,
            strict: true,
        })
        .collect()
}

impl Runner for Swarm {
    fn launch<'a>(&'a self, job: &'a Launch<'a>) -> BoxFuture<'a, Result<Launched>> {
        Box::pin(self.launch_job(job))
    }

    fn nodes(&self) -> BoxFuture<'_, Result<Vec<crate::model::NodeLoad>>> {
        Box::pin(self.node_loads())
    }
}
