//! What a job's scoped engine's tasks share ([`Shared`]): the engine
//! connection, the job's registry and network, the channels to the
//! manager, and the answers every handler gives (a refusal, a "no such").

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use hyper::{Response, StatusCode};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::proxy::{self, Body};
use super::registry::Registry;
use super::relay::Subnet;
use super::{LABEL_CHILD, LABEL_PARENT, Refused};
use crate::model::{ChildInfo, ChildState, JobId};
use crate::runner::docker::DockerClient;
use crate::runner::docker::ownership::Ownership;
use crate::runner::docker::pool::Pool;

/// What the server's tasks share.
pub struct Shared {
    pub job: JobId,
    pub docker: DockerClient,
    /// The engine's own socket.
    pub upstream: PathBuf,
    pub workspace: PathBuf,
    /// A `layer` job's upper directory, laid over children's copies.
    pub layer_upper: Option<PathBuf>,
    /// The job's private directory and its `engine/` part.
    pub job_dir: PathBuf,
    pub dir: PathBuf,
    pub socket: PathBuf,
    /// berth's labels for the job's engine objects.
    pub labels: HashMap<String, String>,
    /// The job network's gateway and subnet, once known.
    pub net: Mutex<Option<(IpAddr, Subnet)>>,
    /// The job's objects: read and changed through [`Shared::registry`].
    pub registry_lock: Mutex<Registry>,
    pub children: watch::Sender<Vec<ChildInfo>>,
    pub refusals: mpsc::Sender<Refused>,
    pub pool: Arc<Pool>,
    pub ownership: Ownership,
    /// Stops, kills and removes one at a time: several containers leaving
    /// one network at once can deadlock this engine (see `network.rs`).
    pub leaving: tokio::sync::Mutex<()>,
    /// The connections, relays and output followers of the job's engine.
    pub tasks: TaskTracker,
    pub stop: CancellationToken,
    pub closing: AtomicBool,
}

impl Shared {
    /// `berth.parent=<job container>`: what the job's objects carry.
    pub fn label_filter(&self) -> String {
        let parent = self.labels.get(LABEL_PARENT).cloned().unwrap_or_default();
        format!("{LABEL_PARENT}={parent}")
    }

    /// The labels of child `name`.
    pub fn child_labels(&self, name: &str) -> HashMap<String, String> {
        let mut l = self.labels.clone();
        l.insert(LABEL_CHILD.into(), name.into());
        l
    }

    /// The job's registry. A panic elsewhere while it was held leaves its
    /// lists as they were between two statements, never half-changed, so a
    /// poisoned lock is taken as it is: refusing every later request would
    /// strand the job's children, and reading a poisoned lock as "no
    /// limit reached" (as some checks once did) let a job past its limits.
    pub fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Tell the manager what the children look like now.
    pub fn publish(&self) {
        let infos = Some(self.registry()).map(|r| r.infos()).unwrap_or_default();
        self.children.send_replace(infos);
    }

    /// Queue a refusal for the security log.
    pub fn report(&self, endpoint: &str, field: &str, reason: &str) {
        let refused = Refused {
            endpoint: endpoint.to_string(),
            field: field.to_string(),
            reason: reason.to_string(),
        };
        if self.refusals.try_send(refused).is_err() {
            tracing::warn!(job = %self.job, endpoint, field, reason, "scoped engine refusal not logged: the queue is full");
        }
    }

    /// Child `id` is gone (`removed`: the engine confirmed): its relay
    /// closes, its network goes back to the pool, its budget is free.
    pub fn forget_child(&self, id: &str, removed: bool) {
        let slot = {
            let mut reg = self.registry();
            let Some(child) = reg.find_mut(id) else { return };
            child.state = ChildState::Removed;
            if let Some(r) = child.relay.take() {
                r.close();
            }
            child.slot.take()
        };
        if let (Some(slot), true) = (slot, removed) {
            slot.vacate();
        }
        self.publish();
    }
}

impl Shared {
    /// Refuse (403) in one line, and log it.
    pub fn refuse(&self, line: &str, field: &str, reason: &str) -> Response<Body> {
        self.report(line, field, reason);
        let message = match field {
            "path" => format!("berth: {reason}"),
            _ => format!("berth: {field}: {reason}"),
        };
        proxy::error(StatusCode::FORBIDDEN, &message)
    }

    /// "No such" (404) for a reference that is not the job's: logged
    /// unless it named a child of the job that is gone now.
    pub fn not_found(&self, line: &str, what: &str, r: &str) -> Response<Body> {
        let was_ours = self.registry().was_child(r);
        if !was_ours {
            self.report(line, what, &format!("`{r}` is not one of this job's"));
        }
        proxy::error(
            StatusCode::NOT_FOUND,
            &format!("No such {what}: {}", crate::inert::visible(r)),
        )
    }
}
