//! The internal overlay a swarm job without a way out is attached to: one
//! per job, as on one engine each job has a network of its own (one
//! overlay for all would let one session's job reach another's), made
//! with the job's labels and removed once its task is gone. The sweeps of
//! services and configs are the engine's (`runner/docker/services.rs`);
//! the networks of a dead manager go with the instance's other networks.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::NetworkCreateRequest;
use bollard::query_parameters::ListNetworksOptions;

use crate::error::Result;
use crate::runner::docker::DockerClient;

/// How long an overlay's removal is tried while the swarm still tears
/// down the task on it (it answers "in use" until then: ~2–4 s).
const OVERLAY_PATIENCE: Duration = Duration::from_secs(15);

/// Make the job's internal overlay `name` with its `labels`; its id.
pub async fn make_overlay(
    docker: &DockerClient,
    name: &str,
    labels: &HashMap<String, String>,
) -> Result<String> {
    let request = NetworkCreateRequest {
        name: format!("{name}-net"),
        driver: Some("overlay".into()),
        internal: Some(true),
        labels: Some(labels.clone()),
        ..Default::default()
    };
    Ok(docker.create_network(request).await?.id)
}

/// Remove overlay `id` once no task uses it any more.
pub async fn remove_overlay(docker: &DockerClient, id: &str) {
    let deadline = tokio::time::Instant::now() + OVERLAY_PATIENCE;
    loop {
        match docker.remove_network(id).await {
            Ok(()) => return,
            Err(e) if e.engine_status() == Some(404) => return,
            // No answer at all (the manager is gone): nothing to wait for.
            Err(e) if e.engine_status().is_none() || tokio::time::Instant::now() >= deadline => {
                tracing::warn!(network = %id, error = %e, "could not remove a swarm job's overlay");
                return;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Remove the overlays carrying every one of `labels`, all at once.
pub async fn remove_overlays(docker: &DockerClient, labels: &[String]) {
    let opts = ListNetworksOptions {
        filters: Some(HashMap::from([("label".to_string(), labels.to_vec())])),
    };
    let Ok(list) = docker.list_networks("of this manager's swarm jobs", opts).await else {
        return;
    };
    let ids: Vec<String> = list
        .into_iter()
        .filter(|n| n.driver.as_deref() == Some("overlay"))
        .filter_map(|n| n.id)
        .collect();
    futures_util::future::join_all(ids.iter().map(|id| remove_overlay(docker, id))).await;
}
