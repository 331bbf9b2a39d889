//! Stopping and removing a swarm job.
//!
//! A swarm cannot signal a task. A stop scales the job's service to zero:
//! the node sends the task its stop signal, waits the service's grace
//! (berth's) and kills it, and the task stays listed with its exit code
//! and its log readable — which a removal would take with it. The service
//! and its workspace configs are removed once the job ended and its
//! output was read; a `layer` job's changes are laid into its layer first
//! (`collect`, from the archive its log carried: `readback.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use super::workspace;
use crate::net::forward::Forwarder;
use crate::runner::JobControl;
use crate::runner::docker::remote_layer::{self, RemoteLayer};
use crate::runner::docker::{DockerClient, Endpoint};

pub struct SwarmControl {
    pub docker: DockerClient,
    pub endpoint: Endpoint,
    pub service: String,
    pub configs: Vec<(String, String)>,
    /// The job's own internal overlay, if it has one.
    pub network: Option<String>,
    /// Set by the first stop: the exit reads 128+N as that signal.
    pub stopped: Arc<AtomicBool>,
    pub forwarder: Mutex<Option<Forwarder>>,
    /// A `layer` job: its layer, and the archive its exit read.
    pub layer: Option<(RemoteLayer, super::exit::Back)>,
}

/// Scale `service` to zero replicas: its task is stopped with its grace.
async fn scale_to_zero(docker: &DockerClient, service: &str) -> crate::error::Result<()> {
    let svc = docker.inspect_service(service).await?;
    let version = svc.version.and_then(|v| v.index).unwrap_or_default();
    let Some(mut spec) = svc.spec else {
        return Ok(());
    };
    if let Some(r) = spec.mode.as_mut().and_then(|m| m.replicated.as_mut()) {
        r.replicas = Some(0);
    }
    docker.update_service(service, spec, version).await
}

/// Remove the service, then its configs (a config a service names cannot
/// go first) and its overlay (once its task is gone).
async fn remove(docker: &DockerClient, service: &str, configs: &[(String, String)], network: Option<&str>) {
    if let Err(e) = docker.remove_service(service).await
        && e.engine_status() != Some(404)
    {
        tracing::warn!(service, error = %e, "could not remove the job's service");
    }
    workspace::remove(docker, configs).await;
    if let Some(net) = network {
        super::sweep::remove_overlay(docker, net).await;
    }
}

impl SwarmControl {
    fn close_forwarder(&self) {
        if let Some(f) = self.forwarder.lock().unwrap_or_else(|e| e.into_inner()).take() {
            f.close();
        }
    }
}

impl JobControl for SwarmControl {
    fn signal(&self, signal: i32) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            use nix::sys::signal::Signal;
            tracing::debug!(signal, service = %self.service, "stopping a swarm job");
            let stops = [Signal::SIGTERM, Signal::SIGKILL, Signal::SIGINT].map(|s| s as i32);
            if !stops.contains(&signal) {
                tracing::warn!(signal, service = %self.service, "a swarm task cannot be signalled, only stopped: signal not sent");
                return;
            }
            // A KILL after the TERM: the node kills it when the grace ends.
            if self.stopped.swap(true, Ordering::SeqCst) {
                return;
            }
            let scaled = scale_to_zero(&self.docker, &self.service).await;
            tracing::debug!(service = %self.service, ok = scaled.is_ok(), "scaled to zero");
            if let Err(e) = scaled {
                tracing::warn!(service = %self.service, error = %e, "could not stop the job's task; removing its service");
                remove(&self.docker, &self.service, &[], None).await;
            }
        })
    }

    fn collect(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move {
            let (layer, back) = self.layer.as_ref()?;
            let archive = back.lock().unwrap_or_else(|e| e.into_inner()).take();
            let archive = archive.unwrap_or_else(|| Err("its output was not read to its end".into()));
            let lost = match archive {
                Ok(archive) => remote_layer::write_back(layer, archive).await.err(),
                Err(why) => Some(why),
            };
            if let Some(why) = &lost {
                tracing::warn!(service = %self.service, %why, "a swarm job's changes did not come back into its layer");
            }
            lost
        })
    }

    fn cleanup(&self) {
        self.close_forwarder();
        let (docker, service, configs) = (self.docker.clone(), self.service.clone(), self.configs.clone());
        let network = self.network.clone();
        tokio::spawn(async move { remove(&docker, &service, &configs, network.as_deref()).await });
    }

    fn kill_now(&self) {
        self.close_forwarder();
        let (endpoint, service, configs) =
            (self.endpoint.clone(), self.service.clone(), self.configs.clone());
        let network = self.network.clone();
        // On the drop worker: the caller may be a runtime winding down (a `Drop`).
        let limit = std::time::Duration::from_secs(3);
        crate::runner::drop_worker::run(2 * limit, async move {
            if let Ok(docker) = DockerClient::connect(&endpoint, limit).await {
                let removed = remove(&docker, &service, &configs, network.as_deref());
                let _ = tokio::time::timeout(limit, removed).await;
            }
        });
    }
}
