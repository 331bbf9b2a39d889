//! Removal and teardown on the engine: force-removing one container, only
//! what carries this instance's and state dir's labels when the id comes
//! from elsewhere (recovery), the labelled sweeps (`remove_labelled`, the
//! crash watchdog's `remove_owned`), the instance networks' teardown, and a
//! blocking remove for synchronous callers (`Drop`).

use std::sync::atomic::Ordering;

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptions, RemoveContainerOptions};

use super::ownership::Ownership;
use super::{BLOCKING_REMOVE_LIMIT, Engine, LABEL_OWNER, connect, message, network, status};
use crate::error::Result;

/// How long teardown may spend removing the instance's networks.
const NETWORK_TEARDOWN_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) async fn remove_container(docker: &Docker, id: &str) -> bool {
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
pub(super) async fn remove_if_owned(docker: &Docker, id: &str, owner: &Ownership) -> bool {
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

impl Engine {
    /// Force-remove every container labelled as managed by `instance` *and*
    /// this state dir (another state dir's instance of that name is left
    /// alone), then the instance's unused networks. Returns how many were removed (0
    /// when the engine is unreachable).
    pub async fn remove_labelled(&self, instance: &str) -> usize {
        let owner = Ownership {
            instance: instance.to_string(),
            state: self.ownership.state.clone(),
        };
        let n = self.remove_matching(&owner.filters()).await;
        if let Ok(docker) = self.client().await {
            network::release_all(docker, &owner).await;
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
            network::release_all(docker, &self.ownership).await;
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
    /// A job network of the pool with no container on it, made if needed.
    pub(super) async fn acquire_network(&self, docker: &Docker) -> Result<network::Slot> {
        self.used_network.store(true, Ordering::SeqCst);
        self.pool.acquire(docker, &self.network, &self.ownership).await
    }
}

impl Drop for Engine {
    /// Teardown: remove the instance's networks when this manager used one;
    /// those a container (of any manager of the instance) still uses stay.
    fn drop(&mut self) {
        if !self.used_network.load(Ordering::SeqCst) {
            return;
        }
        let (endpoint, owner) = (self.endpoint.clone(), self.ownership.clone());
        let done = std::thread::Builder::new()
            .name("berth-docker-network".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                    return;
                };
                rt.block_on(async {
                    if let Ok(docker) = connect(&endpoint, BLOCKING_REMOVE_LIMIT).await {
                        // One remove per pool network (~0.1 s each), one after the other.
                        let _ = tokio::time::timeout(
                            NETWORK_TEARDOWN_LIMIT,
                            network::release_all(&docker, &owner),
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
pub(super) fn blocking_remove(endpoint: String, id: String, owner: Option<Ownership>) -> bool {
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
