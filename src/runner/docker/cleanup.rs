//! Removal and teardown on the engine: force-removing one container, only
//! what carries this instance's and state dir's labels when the id comes
//! from elsewhere (recovery), the removals still under way after a job was
//! answered ([`Removals`]), the labelled sweeps (`remove_labelled`, the
//! crash watchdog's `remove_owned`, and `remove_dead_owners` when a manager
//! takes the instance over), the instance networks' teardown, and a
//! blocking remove for synchronous callers (`Drop`).

use super::services as swarm;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::DockerClient;
use bollard::query_parameters::ListContainersOptions;

pub(super) use super::client::{remove_all, remove_container};
use super::endpoint::Endpoint;
use super::ownership::Ownership;
use super::{BLOCKING_REMOVE_LIMIT, Engine, LABEL_OWNER, connect, network};
use crate::error::Result;

/// How long teardown may spend removing the instance's networks.
const NETWORK_TEARDOWN_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Containers whose job was answered while their removal still runs.
///
/// A finished job is reported as soon as its container exited and its output
/// was drained; the remove (50–250 ms on this engine) follows in a task of
/// its own. Each such container is listed here from the moment its removal
/// is asked until the engine confirmed it, so teardown can finish what is
/// under way: [`Engine::settle_removals`] awaits them (manager shutdown,
/// before the job networks go), [`Engine::remove_pending_blocking`] removes
/// them from synchronous code (the last manager handle dropped). A manager
/// that dies meanwhile leaves them labelled with its owner: the crash
/// watchdog removes them like any other container of its.
#[derive(Default)]
pub(super) struct Removals {
    state: Mutex<Pending>,
    /// The removal tasks, awaited (bounded) by teardown.
    tasks: tokio_util::task::TaskTracker,
}

#[derive(Default)]
struct Pending {
    /// Asked of the engine, not yet answered.
    in_flight: BTreeSet<String>,
    /// Refused by the engine after the retries: teardown tries again.
    refused: BTreeSet<String>,
}

/// Pauses before a background removal asks an engine that refused it again.
const REMOVE_RETRIES: [Duration; 2] = [Duration::from_millis(200), Duration::from_secs(1)];

impl Removals {
    /// Note `id` as pending, then remove it in the background.
    pub(super) fn remove_later(self: &std::sync::Arc<Self>, docker: DockerClient, id: String) {
        if let Ok(mut p) = self.state.lock() {
            p.in_flight.insert(id.clone());
        }
        let this = self.clone();
        self.tasks.spawn(async move {
            let mut removed = remove_container(&docker, &id).await;
            for pause in REMOVE_RETRIES {
                if removed {
                    break;
                }
                tokio::time::sleep(pause).await;
                removed = remove_container(&docker, &id).await;
            }
            this.done(&id, removed);
        });
    }

    /// Record how the removal of `id` ended.
    fn done(&self, id: &str, removed: bool) {
        let Ok(mut p) = self.state.lock() else { return };
        p.in_flight.remove(id);
        match removed {
            true => p.refused.remove(id),
            false => p.refused.insert(id.to_string()),
        };
    }

    /// Every container whose removal was not confirmed (in flight or refused).
    pub(super) fn unconfirmed(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|p| p.in_flight.union(&p.refused).cloned().collect())
            .unwrap_or_default()
    }
}

impl Engine {
    /// Wait (at most `limit`) until the removals under way are done, then
    /// remove here what the engine refused or what still runs.
    pub async fn settle_removals(&self, limit: Duration) {
        // Closing only ends the wait once the tasks are done: a removal
        // asked later (a job ending late) is still tracked and still runs.
        self.removals.tasks.close();
        let _ = tokio::time::timeout(limit, self.removals.tasks.wait()).await;
        let left = self.removals.unconfirmed();
        if left.is_empty() {
            return;
        }
        let Ok(docker) = self.client().await else { return };
        for id in left {
            let removed = remove_container(docker, &id).await;
            self.removals.done(&id, removed);
        }
    }

    /// From synchronous code (the last manager handle dropped, maybe while
    /// its runtime winds down and the removal tasks with it): remove every
    /// container whose removal was not confirmed, all at once (each removal
    /// waits on the engine, not on the others).
    pub fn remove_pending_blocking(&self) {
        let ids = self.removals.unconfirmed();
        if ids.is_empty() {
            return;
        }
        let removed = blocking_remove_all(self.endpoint.clone(), ids.clone(), None);
        for (id, removed) in ids.iter().zip(removed) {
            self.removals.done(id, removed);
        }
    }
}

/// Force-remove `id` only when its labels say it is `owner`'s. True when it
/// was removed or is gone; a container of someone else's is never touched.
pub(super) async fn remove_if_owned(docker: &DockerClient, id: &str, owner: &Ownership) -> bool {
    match docker.inspect_container(id).await {
        Ok(c) if owner.owns(c.config.as_ref().and_then(|c| c.labels.as_ref())) => {
            remove_container(docker, id).await
        }
        Ok(_) => {
            tracing::warn!(container = %id, "not removed: its labels name another berth instance or state dir");
            false
        }
        Err(e) if e.engine_status() == Some(404) => true,
        Err(e) => {
            tracing::warn!(error = %e, "could not inspect container");
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
        let mut n = self.remove_matching(&owner.filters()).await;
        if let Ok(docker) = self.client().await {
            n += swarm::remove_services(docker, &owner.filters(), swarm::Which::All).await;
            remove_volumes(docker, &owner.filters()).await;
            network::release_all(docker, &owner).await;
        }
        n
    }

    /// Force-remove every container of this instance and state dir whose
    /// `berth.owner` is `owner` (a manager that died), and its volumes;
    /// with `networks`, also the instance's networks nothing uses. Networks
    /// carry no owner (a pool is the instance's, reused by the next
    /// manager), so a caller passes false once another manager serves the
    /// instance: an unused network there may be one it is about to start a
    /// container on. Returns how many containers were removed.
    pub async fn remove_owned(&self, owner: &str, networks: bool) -> usize {
        let mut labels = self.ownership.filters();
        labels.push(format!("{LABEL_OWNER}={owner}"));
        let mut n = self.remove_matching(&labels).await;
        if let Ok(docker) = self.client().await {
            n += swarm::remove_services(docker, &labels, swarm::Which::All).await;
            remove_volumes(docker, &labels).await;
            if networks {
                network::release_all(docker, &self.ownership).await;
            }
        }
        n
    }

    /// When a manager takes the instance over (before it serves): remove
    /// every container of this instance and state dir whose owner is no
    /// live manager — a dead daemon's jobs, pause containers and creates that
    /// landed after its watchdog's sweeps (or with the watchdog killed too)
    /// — except `keep` (containers just adopted) and, with `keep_pauses`,
    /// pause containers (an adopted job may share one's namespace); then the
    /// instance's networks nothing uses any more. A live manager's objects
    /// (a `berth run` beside the daemon) are left alone. Returns how many
    /// containers were removed (0 without an engine).
    pub async fn remove_dead_owners(&self, keep: &[String], keep_pauses: bool) -> usize {
        let Ok(docker) = self.client().await else {
            return 0;
        };
        let Some(list) = list_labelled(docker, self.ownership.filters()).await else {
            return 0;
        };
        let me = crate::procinfo::owner_label();
        let dead = list.iter().filter(|c| {
            let labels = c.labels.as_ref();
            let owner = labels.and_then(|l| l.get(LABEL_OWNER));
            let pause = labels.is_some_and(|l| l.contains_key(super::ownership::LABEL_PAUSE));
            owner.is_none_or(|o| *o != me && !crate::procinfo::owner_alive(o))
                && !(keep_pauses && pause)
                && c.id.as_ref().is_some_and(|id| {
                    !keep
                        .iter()
                        .any(|k| id.starts_with(k.as_str()) || k.starts_with(id.as_str()))
                })
        });
        let mut removed = remove_all(docker, dead.filter_map(|c| c.id.as_deref())).await;
        let services = swarm::Which::DeadOwners { me: &me };
        removed += swarm::remove_services(docker, &self.ownership.filters(), services).await;
        if !keep_pauses {
            network::release_all(docker, &self.ownership).await;
        }
        // Dead managers' volumes (layers' mounts): one still in use by an
        // adopted job stays (the engine refuses).
        if let Ok(volumes) = docker.volumes_labelled(&self.ownership.filters()).await {
            for (name, labels) in volumes {
                let owner = labels.get(LABEL_OWNER);
                if owner.is_some_and(|o| *o != me && !crate::procinfo::owner_alive(o)) {
                    let _ = docker.remove_volume(&name).await;
                }
            }
        }
        removed
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
        let list = match docker.list_containers(opts).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(?labels, error = %e, "could not list containers");
                return 0;
            }
        };
        // Children of a scoped engine go one at a time, after the rest:
        // several containers leaving one network at once (children on a
        // network their job made) can deadlock this engine (network.rs).
        let child = |c: &&bollard::models::ContainerSummary| {
            c.labels
                .as_ref()
                .is_some_and(|l| l.contains_key(super::LABEL_PARENT))
        };
        let mut n = remove_all(
            docker,
            list.iter().filter(|c| !child(c)).filter_map(|c| c.id.as_deref()),
        )
        .await;
        for id in list.iter().filter(child).filter_map(|c| c.id.as_deref()) {
            n += usize::from(remove_container(docker, id).await);
        }
        n
    }
}

/// Remove the volumes labelled with every one of `labels` (a scoped
/// engine's job volumes); those still in use stay.
pub(super) async fn remove_volumes(docker: &DockerClient, labels: &[String]) {
    let Ok(names) = docker.list_volumes(labels).await else {
        return;
    };
    for name in names {
        if let Err(e) = docker.remove_volume(&name).await
            && !matches!(e.engine_status(), Some(404 | 409))
        {
            tracing::warn!(volume = %name, error = %e, "could not remove volume");
        }
    }
}

impl Engine {
    /// A job network with no container on it, made if needed, from the
    /// pool of `internal` networks or of NAT'd ones. `join`: the job could
    /// join a pause container (the engine publishes no ports for it).
    pub(super) async fn acquire_network(
        &self,
        docker: &DockerClient,
        internal: bool,
        join: bool,
    ) -> Result<super::pool::Slot> {
        self.used_network.store(true, Ordering::SeqCst);
        self.pool_of(internal)
            .acquire(docker, &self.ownership, join)
            .await
    }
}

impl Drop for Engine {
    /// Teardown: remove the instance's networks when this manager used one;
    /// those a container (of any manager of the instance) still uses stay.
    fn drop(&mut self) {
        if !self.used_network.load(Ordering::SeqCst) {
            return;
        }
        // Pauses made from here on are removed by whoever makes them;
        // `release_all` sweeps this process's own.
        self.pods.begin_close();
        self.pool.pauses.begin_close();
        self.nat_pool.pauses.begin_close();
        let (endpoint, owner) = (self.endpoint.clone(), self.ownership.clone());
        let limit = BLOCKING_REMOVE_LIMIT + NETWORK_TEARDOWN_LIMIT;
        crate::runner::drop_worker::run(limit, async move {
            if let Ok(docker) = connect(&endpoint, BLOCKING_REMOVE_LIMIT).await {
                // One remove per pool network (~0.1 s each), one after the other.
                let _ =
                    tokio::time::timeout(NETWORK_TEARDOWN_LIMIT, network::release_all(&docker, &owner)).await;
            }
        });
    }
}

/// Force-remove container `id` from synchronous code (`Drop`, recovery) that
/// may itself run inside a tokio runtime; see [`blocking_remove_all`].
/// True when the container was removed (or already gone).
pub(super) fn blocking_remove(endpoint: Endpoint, id: String, owner: Option<Ownership>) -> bool {
    blocking_remove_all(endpoint, vec![id], owner)
        .into_iter()
        .all(|removed| removed)
}

/// Force-remove containers `ids` from synchronous code: on the drop worker
/// (`runner/drop_worker.rs`: the caller's runtime may be the very thread we
/// block, or winding down), all at once with a connection of their own,
/// waited for at most [`BLOCKING_REMOVE_LIMIT`]. With `owner`, a container
/// whose labels say otherwise is left alone. For each id: true when it was
/// removed (or gone).
pub(crate) fn blocking_remove_all(
    endpoint: Endpoint,
    ids: Vec<String>,
    owner: Option<Ownership>,
) -> Vec<bool> {
    let n = ids.len();
    let work = async move {
        let docker = match connect(&endpoint, BLOCKING_REMOVE_LIMIT).await {
            Ok(docker) => docker,
            Err(e) => {
                tracing::warn!(?ids, error = %e, "could not remove containers");
                return vec![false; ids.len()];
            }
        };
        let owner = owner.as_ref();
        futures_util::future::join_all(ids.iter().map(|id| async {
            match owner {
                None => remove_container(&docker, id).await,
                Some(owner) => remove_if_owned(&docker, id, owner).await,
            }
        }))
        .await
    };
    match crate::runner::drop_worker::run(BLOCKING_REMOVE_LIMIT, work) {
        Some(removed) => removed,
        None => {
            tracing::warn!(
                "{n} container removal(s) still running after {BLOCKING_REMOVE_LIMIT:?}; left to finish in the background"
            );
            vec![false; n]
        }
    }
}

/// Every container (running or not) with all of `labels`; `None`, said in
/// the log, when the engine does not answer.
pub(super) async fn list_labelled(
    docker: &DockerClient,
    labels: Vec<String>,
) -> Option<Vec<bollard::models::ContainerSummary>> {
    let opts = ListContainersOptions {
        all: true,
        filters: Some(std::collections::HashMap::from([("label".to_string(), labels)])),
        ..Default::default()
    };
    docker
        .list_containers(opts)
        .await
        .map_err(|e| tracing::warn!(error = %e, "could not list the instance's containers"))
        .ok()
}
