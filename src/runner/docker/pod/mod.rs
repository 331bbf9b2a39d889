//! Pods: the container jobs of one MCP session share one network namespace,
//! as the processes of a host shell share the host's, so `localhost:8000`
//! in one job reaches a server another job of the session started, and a
//! job reaches a sibling by its label (`web:8000`) or id.
//!
//! How: a pod is one pool network slot held for the pod's whole life, with
//! one idle pause on it (pause.rs's recipe, labelled `berth.pod` too);
//! every member joins the pause's namespace (`network_mode =
//! container:<pause>`). So the pod still has ONE endpoint on its network
//! (the pause's): the engine deadlock of several containers on one
//! user-defined network exiting at once (network.rs) has no partner, and
//! pods stay isolated from each other and from other jobs as pool networks
//! are (one bridge each, the engine's isolation chains between bridges).
//! Each member gets its own `hostname` and `resolv.conf` (etc.rs); its
//! `/etc/hosts` is the pod's, one file berth rewrites (in place: a bind
//! mount follows the inode) whenever a member joins or leaves, mounted
//! read-only into each member: every member's label and id on 127.0.0.1.
//! Its own egress proxy is each member's as before (one per job, on the
//! pod network's gateway).
//!
//! Which jobs: those whose spec's owner is an MCP session (`mcp:<id>`),
//! and those asking for `network = "project"` (one pod per workspace, gone
//! with its last member: there is no session to outlive), on an `isolated`
//! network, on the local engine, whose ports berth
//! forwards (a job whose ports the engine publishes needs an endpoint of
//! its own), without a scoped engine (its children need the job's own
//! network). A session's jobs of different egress get different pods (an
//! internal network cannot hold an `egress = "all"` job, and a job without
//! egress must not use a sibling's proxy). Everything else starts as before.
//! A pod that cannot be made (the instance's default image cannot hold) is
//! said in the job's `not_enforced` and the job starts as before.
//!
//! Ports: members share the namespace's ports, so two members publishing one
//! container port is refused at the second's start, naming the first.
//!
//! Lifecycle ([`Life`]): open while the session lasts; at its end
//! ([`Pods::end`], from the manager's `end_owner`) the pod goes with its
//! last member (at once when it has none): its pause removed, its slot given
//! back to the pool. Manager teardown removes every pod ([`Pods::close`]);
//! a crashed manager's pod pauses are pauses like the others (labelled
//! `berth.pause`), which the labelled sweeps remove.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

mod member;
mod seats;

pub use member::{Joined, LeaveOnDrop, Member};

use seats::{Seat, Seats, conflict, hostname_ok, hosts_text, names};

use super::client::remove_container;
use super::pause::{self, Pause};
use super::reach::Decision;
use super::slot::{NetAddr, Slot};
use super::{DockerClient, Engine};
use crate::error::{Error, Result};
use crate::model::{JobId, JobSpec, Network};

/// The pods of one engine, by session and egress.
#[derive(Default)]
pub struct Pods {
    /// Where each pod's hosts file lives (`<instance dir>/pods/<network>/`).
    dir: PathBuf,
    state: Mutex<State>,
    /// One pod made at a time (held across the engine calls on purpose).
    make: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    by_key: BTreeMap<String, Arc<Pod>>,
    /// Teardown began: no pod is made or joined any more.
    closing: bool,
}

/// One pod: its pause, its network and who is in it.
pub struct Pod {
    key: String,
    /// The session (`mcp:<id>`).
    owner: String,
    pub pause: Pause,
    pub addr: NetAddr,
    /// Its pool network's name.
    pub network: String,
    hosts: PathBuf,
    docker: DockerClient,
    life: Mutex<Life>,
    /// Held for the pod's life; given back once its pause is removed.
    slot: Mutex<Option<Slot>>,
}

/// Where a pod is in its life.
enum Life {
    /// The session goes on: jobs join.
    Open(Seats),
    /// The session ended: nobody joins; the pod goes with its last member.
    Ending(Seats),
    /// Its pause is (being) removed.
    Closed,
}

/// The pod a job of `spec` in `workspace` belongs in, if any (see the
/// module docs): (its key, whose pod it is).
pub fn key_of(
    spec: &JobSpec,
    decision: &Decision,
    workspace: &Path,
    (local, scoped): (bool, bool),
) -> Option<(String, String)> {
    let owner = match spec.owner.as_deref().filter(|o| o.starts_with("mcp:")) {
        Some(session) => session.to_string(),
        None if decision.project_pod => format!("{PROJECT}{}", workspace.display()),
        None => return None,
    };
    let fits = local && !scoped && decision.network == Network::Isolated && !decision.engine_publishes;
    fits.then(|| (format!("{owner} egress={}", decision.egress), owner))
}

/// How a project's pod's owner starts (a session's is `mcp:`).
const PROJECT: &str = "project:";

impl Pods {
    pub fn new(dir: PathBuf) -> Self {
        Pods {
            dir,
            ..Default::default()
        }
    }

    /// Seat job `id` in the pod of `key` (made now if the session has none).
    /// A port a member publishes already is refused (`Err`).
    pub async fn join(
        self: &Arc<Self>,
        engine: &Engine,
        docker: &DockerClient,
        (key, owner): (String, String),
        decision: &Decision,
        (id, spec): (&JobId, &JobSpec),
        project_image: &str,
    ) -> Result<Joined> {
        let seat = Seat {
            label: spec.label.clone().filter(|l| hostname_ok(l)),
            ports: spec.ports.iter().map(|p| (p.port, p.proto)).collect(),
        };
        let _one = self.make.lock().await;
        if self.state.lock().is_ok_and(|s| s.closing) {
            return Ok(Joined::Outside("no pod: berth is shutting down".into()));
        }
        // A project's pod whose last member just left is going: a new one.
        let open = self.state.lock().ok().and_then(|s| s.by_key.get(&key).cloned());
        let open = open.filter(|p| p.is_open());
        let pod = match open {
            Some(pod) => pod,
            None => match self
                .make(engine, docker, &key, &owner, decision.internal, project_image)
                .await
            {
                Ok(pod) => pod,
                Err(e) => {
                    tracing::warn!(job = %id, error = %e, "no pod made; the job gets a network of its own");
                    return Ok(Joined::Outside(format!(
                        "not in its session's pod (its siblings are not on localhost): {e}"
                    )));
                }
            },
        };
        let names = pod.seat(id, seat)?;
        Ok(Joined::In(Member {
            pod,
            names,
            pods: self.clone(),
            id: id.clone(),
            left: AtomicBool::new(false),
        }))
    }

    /// Make the pod `key`: a slot of its own, a pause on it, its hosts file.
    async fn make(
        &self,
        engine: &Engine,
        docker: &DockerClient,
        key: &str,
        owner: &str,
        internal: bool,
        project_image: &str,
    ) -> Result<Arc<Pod>> {
        // A slot without a pool pause: the pod's pause is its own.
        let slot = engine.acquire_network(docker, internal, false).await?;
        // The instance's default image, else the project's: never one a job
        // chose (the pause's `sleep` shares the namespace with every member).
        let mut images = vec![engine.image.clone()];
        if project_image != engine.image {
            images.push(project_image.to_string());
        }
        let mut made = Err(Error::InvalidSpec("no image to hold a pod".into()));
        for image in images {
            let recipe = pause::Recipe {
                image,
                ownership: engine.ownership.clone(),
                owner: engine.owner.clone(),
                pod: Some(owner.to_string()),
            };
            made = pause::make(docker, &slot, &recipe).await;
            if made.is_ok() {
                break;
            }
        }
        let pause = match made {
            Ok(h) => h,
            Err(e) => {
                // Whatever was made was removed again: the network is empty.
                slot.vacate();
                return Err(e);
            }
        };
        let dir = self.dir.join(&slot.name);
        let hosts = dir.join("hosts");
        let written = crate::store::private::create_dir(&self.dir)
            .and_then(|()| crate::store::private::create_dir(&dir))
            .and_then(|()| super::etc::put(&hosts, &hosts_text(&Seats::new())));
        if let Err(source) = written {
            remove_container(docker, &pause.id).await;
            slot.vacate();
            return Err(Error::Io {
                action: "write the pod's hosts file",
                path: hosts,
                source,
            });
        }
        let pod = Arc::new(Pod {
            key: key.to_string(),
            owner: owner.to_string(),
            addr: slot.addr,
            network: slot.name.clone(),
            pause,
            hosts,
            docker: docker.clone(),
            life: Mutex::new(Life::Open(Seats::new())),
            slot: Mutex::new(Some(slot)),
        });
        if let Ok(mut s) = self.state.lock() {
            s.by_key.insert(key.to_string(), pod.clone());
        }
        tracing::info!(pod = key, network = %pod.network, "pod made");
        Ok(pod)
    }

    /// The session `owner` ended: its pods go, each with its last member.
    pub async fn end(&self, owner: &str) {
        let pods: Vec<Arc<Pod>> = self
            .state
            .lock()
            .map(|s| s.by_key.values().filter(|p| p.owner == owner).cloned().collect())
            .unwrap_or_default();
        for pod in pods {
            if pod.end() {
                self.retire(&pod).await;
            }
        }
    }

    /// Teardown: no pod any more; every pause removed, every slot given back.
    pub async fn close(&self) {
        let pods: Vec<Arc<Pod>> = self
            .state
            .lock()
            .map(|mut s| {
                s.closing = true;
                std::mem::take(&mut s.by_key).into_values().collect()
            })
            .unwrap_or_default();
        for pod in pods {
            pod.set_life(Life::Closed);
            pod.remove().await;
        }
    }

    /// From synchronous teardown: no pod is made or joined from now on (the
    /// labelled sweep removes the pauses).
    pub fn begin_close(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.closing = true;
        }
    }

    /// Forget `pod` and remove its pause.
    async fn retire(&self, pod: &Arc<Pod>) {
        if let Ok(mut s) = self.state.lock()
            && s.by_key.get(&pod.key).is_some_and(|p| Arc::ptr_eq(p, pod))
        {
            s.by_key.remove(&pod.key);
        }
        pod.remove().await;
        tracing::info!(pod = %pod.key, "pod removed");
    }

    /// `pod`'s pause was found gone: the next job of its session makes a new one.
    fn forget(&self, pod: &Arc<Pod>) {
        if let Ok(mut s) = self.state.lock()
            && s.by_key.get(&pod.key).is_some_and(|p| Arc::ptr_eq(p, pod))
        {
            s.by_key.remove(&pod.key);
        }
        pod.set_life(Life::Closed);
    }
}

impl Pod {
    /// Seat `id` unless the pod is ending or a member publishes one of its ports.
    /// Returns the names the pod's members go by now.
    fn seat(&self, id: &JobId, seat: Seat) -> Result<Vec<String>> {
        let mut life = self.life.lock().unwrap_or_else(|e| e.into_inner());
        let Life::Open(seats) = &mut *life else {
            return Err(Error::InvalidSpec(
                "its session ended: no job joins its pod any more".into(),
            ));
        };
        if let Some(taken) = conflict(seats, &seat) {
            return Err(Error::InvalidSpec(taken));
        }
        seats.insert(id.clone(), seat);
        self.write_hosts(seats);
        Ok(names(seats))
    }

    /// Mark the pod ending; true when it has no member left (it goes now).
    fn end(&self) -> bool {
        let mut life = self.life.lock().unwrap_or_else(|e| e.into_inner());
        match std::mem::replace(&mut *life, Life::Closed) {
            Life::Open(seats) | Life::Ending(seats) if !seats.is_empty() => {
                *life = Life::Ending(seats);
                false
            }
            Life::Closed => false,
            _ => true,
        }
    }

    /// `id` left; true when the pod should go now (ending, nobody left).
    fn unseat(&self, id: &JobId) -> bool {
        let mut life = self.life.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *life {
            Life::Open(seats) => {
                seats.remove(id);
                self.write_hosts(seats);
                // A project's pod has no session to outlive: it goes with
                // its last member.
                if seats.is_empty() && self.owner.starts_with(PROJECT) {
                    *life = Life::Closed;
                    return true;
                }
                false
            }
            Life::Ending(seats) => {
                seats.remove(id);
                self.write_hosts(seats);
                if seats.is_empty() {
                    *life = Life::Closed;
                    return true;
                }
                false
            }
            Life::Closed => false,
        }
    }

    fn is_open(&self) -> bool {
        matches!(
            *self.life.lock().unwrap_or_else(|e| e.into_inner()),
            Life::Open(_)
        )
    }

    fn set_life(&self, to: Life) {
        *self.life.lock().unwrap_or_else(|e| e.into_inner()) = to;
    }

    /// Rewrite the pod's hosts file for `seats` (a failure is logged: the
    /// names of a sibling then do not resolve, nothing else changes).
    fn write_hosts(&self, seats: &Seats) {
        if let Err(e) = super::etc::put(&self.hosts, &hosts_text(seats)) {
            tracing::warn!(pod = %self.key, error = %e, "could not rewrite the pod's hosts file");
        }
    }

    /// The pod's hosts file, for the members' `/etc/hosts`.
    pub fn hosts_file(&self) -> &Path {
        &self.hosts
    }

    /// Remove the pause, then give the slot back (empty once it is gone).
    async fn remove(&self) {
        let removed = remove_container(&self.docker, &self.pause.id).await;
        let slot = self.slot.lock().ok().and_then(|mut s| s.take());
        if let (Some(slot), true) = (slot, removed) {
            slot.vacate();
        }
        if let Some(dir) = self.hosts.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
