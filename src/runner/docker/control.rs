//! [`DockerControl`]: one job's container as the manager holds it: signal
//! it, remove it (now, in the background once the job was answered, or
//! blocking from `Drop`), give its pool network back (with a pause made
//! on it when the engine keeps warm) or its pod seat, and close what berth ran for the job
//! on this machine (its forwarded ports, its egress proxy, its scoped engine
//! and that engine's children) when it ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bollard::query_parameters::KillContainerOptions;
use futures_util::future::BoxFuture;

use super::claims::{Claim, Claims};
use super::cleanup::{Removals, blocking_remove_all, remove_container};
use super::{DockerClient, Engine, pause, pod, pool, reach, scoped};

/// Signals and removes one job's container.
#[derive(Clone)]
pub struct DockerControl {
    pub container_id: String,
    docker: DockerClient,
    /// For `remove_blocking`, which must make its own connection.
    endpoint: std::sync::Arc<super::endpoint::Endpoint>,
    /// Bit N set = signal N was sent; lets the exit mapping tell "died of the
    /// signal we sent" (exit 128+N from the init) from an ordinary exit code.
    sent: Arc<AtomicU64>,
    /// The pool network the container runs on: given back once it exited
    /// (background removal) or was removed.
    slot: Arc<std::sync::Mutex<Option<pool::Slot>>>,
    /// The engine's removals under way, which teardown finishes.
    removals: Arc<Removals>,
    /// Set when the slot should get a pause container once the container
    /// exited (a long-lived manager, a pool network without one).
    pub(super) warm: Option<Arc<(Arc<pause::Pauses>, pause::Recipe)>>,
    /// berth's forwarder and egress proxy of this job: closed when it ends.
    net: Arc<reach::JobNet>,
    /// The job's scoped engine: closed (its children removed) when the job ends.
    pub(super) scope: Option<Arc<scoped::Scope>>,
    /// The job's seat in its session's pod (pod/): given up when it ends.
    pub(super) pod: Option<Arc<pod::Member>>,
    /// A `layer` job on a remote engine: its changes are read back into
    /// its layer when it ends (`remote_layer.rs`).
    pub(super) remote_layer: Option<Arc<super::remote_layer::RemoteLayer>>,
    /// The engine's claims: the sweep on its return, and its patience.
    pub(super) claims: Arc<Claims>,
    /// This job's claim on its container, while any clone lives.
    _claim: Arc<Claim>,
    /// A spare's claim (`launch/spare.rs`): its container keeps the
    /// spare's labels.
    pub(super) spare: Option<Arc<Claim>>,
}

impl std::fmt::Debug for DockerControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerControl")
            .field("container_id", &self.container_id)
            .finish()
    }
}

impl DockerControl {
    pub(super) fn new(
        engine: &Engine,
        job: &crate::model::JobId,
        docker: DockerClient,
        container_id: String,
        slot: Option<pool::Slot>,
        net: reach::JobNet,
    ) -> Self {
        DockerControl {
            container_id,
            docker,
            endpoint: std::sync::Arc::new(engine.endpoint.clone()),
            sent: Arc::new(AtomicU64::new(0)),
            slot: Arc::new(std::sync::Mutex::new(slot)),
            removals: engine.removals.clone(),
            warm: None,
            net: Arc::new(net),
            scope: None,
            pod: None,
            remote_layer: None,
            claims: engine.claims.clone(),
            _claim: engine.claims.claim(job),
            spare: None,
        }
    }

    /// Stop the job's scoped engine and remove its children, networks and
    /// volumes (one child at a time); nothing when it has none.
    pub async fn end_children(&self) {
        if let Some(scope) = &self.scope {
            scope.close().await;
        }
    }

    /// Close what berth runs for the job on this machine (its forwarded
    /// ports, its egress proxy) and give up its pod seat: the job ended.
    pub fn close_net(&self) {
        self.net.close();
        if let Some(m) = &self.pod {
            m.leave();
        }
    }

    /// Hand the job's running forwarder to its control (closed with it).
    pub(super) fn set_forwarder(&self, f: crate::net::Forwarder) {
        self.net.set_forwarder(f);
    }

    /// Give the network slot back: the container is gone, so a later job may
    /// use the network (never two running containers on one).
    pub(super) fn free_slot(&self, empty: bool) {
        free(&self.slot, empty);
    }

    /// True when `signal` was sent to this container.
    pub(super) fn was_sent(&self, signal: i32) -> bool {
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
        self.close_net();
        self.end_children().await;
        let removed = remove_container(&self.docker, &self.container_id).await;
        self.free_slot(removed);
    }

    /// Force-remove in the background (the job was answered already); the
    /// engine's [`Removals`] keeps it until the engine confirmed, so
    /// teardown can finish it. Must be called inside a tokio runtime.
    pub fn remove_later(&self) {
        self.close_net();
        // Its network is free already: the engine releases a container's
        // endpoint before it reports the exit (`wait` answers after that
        // teardown, see exit.rs), and this is called once the exit was seen.
        // A back-to-back job reuses the network instead of making another.
        let slot = self.slot.lock().ok().and_then(|mut s| s.take());
        match (slot, self.warm.as_deref()) {
            (Some(slot), Some((pauses, recipe))) if slot.pause.is_none() => {
                pauses.warm(self.docker.clone(), slot, recipe.clone());
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
        self.close_net();
        let mut ids = vec![self.container_id.clone()];
        if let Some(scope) = &self.scope {
            ids.extend(scope.child_ids());
        }
        let removed = blocking_remove_all((*self.endpoint).clone(), ids, None);
        self.free_slot(removed.first().copied().unwrap_or(false));
    }
}

impl crate::runner::JobControl for DockerControl {
    fn signal(&self, signal: i32) -> BoxFuture<'_, ()> {
        Box::pin(DockerControl::signal(self, signal))
    }

    fn end_children(&self) -> BoxFuture<'_, ()> {
        Box::pin(DockerControl::end_children(self))
    }

    fn collect(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move {
            let rl = self.remote_layer.as_ref()?;
            super::remote_layer::collect(&self.docker, &self.container_id, rl).await
        })
    }

    fn cleanup(&self) {
        self.remove_later();
    }

    fn kill_now(&self) {
        self.remove_blocking();
    }
}

/// Give a container's network slot back; `empty`: the engine reported the
/// container exited or removed, so nothing of it is left on the network.
fn free(slot: &std::sync::Mutex<Option<pool::Slot>>, empty: bool) {
    if let Ok(mut slot) = slot.lock()
        && let Some(slot) = slot.take()
        && empty
    {
        slot.vacate();
    }
}
