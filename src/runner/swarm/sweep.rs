//! The internal overlay of an instance's swarm jobs without a way out,
//! found by its name and labels (the sweeps of services and configs are
//! the engine's, `runner/docker/services.rs`).

use std::collections::HashMap;

use bollard::models::NetworkCreateRequest;
use bollard::query_parameters::ListNetworksOptions;

use crate::error::{Error, Result};
use crate::runner::docker::{DockerClient, LABEL_INSTANCE, LABEL_MANAGED, LABEL_STATE, Ownership};

/// The overlay's name for an instance.
fn overlay_name(owner: &Ownership) -> String {
    format!(
        "berth-{}-{}-swarm",
        crate::runner::docker::clean_name(&owner.instance),
        &owner.state[..owner.state.len().min(8)]
    )
}

/// The instance's internal overlay network, made when missing; its id.
pub async fn ensure_overlay(docker: &DockerClient, owner: &Ownership) -> Result<String> {
    let name = overlay_name(owner);
    if let Some(id) = find_overlay(docker, owner, &name).await? {
        return Ok(id);
    }
    let request = NetworkCreateRequest {
        name: name.clone(),
        driver: Some("overlay".into()),
        internal: Some(true),
        labels: Some(HashMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_INSTANCE.to_string(), owner.instance.clone()),
            (LABEL_STATE.to_string(), owner.state.clone()),
        ])),
        ..Default::default()
    };
    match docker.create_network(request).await {
        Ok(made) => Ok(made.id),
        // Made meanwhile by another berth process of this instance.
        Err(e) if e.engine_status() == Some(409) => find_overlay(docker, owner, &name).await?.ok_or(e),
        Err(e) => Err(e),
    }
}

async fn find_overlay(docker: &DockerClient, owner: &Ownership, name: &str) -> Result<Option<String>> {
    let opts = ListNetworksOptions {
        filters: Some(HashMap::from([("name".to_string(), vec![name.to_string()])])),
    };
    let found = docker.list_networks("of this instance", opts).await?;
    let exact = found.into_iter().find(|n| n.name.as_deref() == Some(name));
    match exact {
        Some(n) if owner.owns(n.labels.as_ref()) => Ok(n.id),
        Some(_) => Err(Error::Docker {
            action: "prepare network",
            job: name.to_string(),
            message: format!(
                "a network named {name} exists and is not this berth instance's; remove it (docker network rm {name})"
            ),
        }),
        None => Ok(None),
    }
}

/// How long the overlay's removal is tried while the swarm still tears
/// down the last tasks on it (it answers "in use" until then).
const OVERLAY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(15);

/// Remove the instance's overlay once no task uses it any more.
pub async fn remove_overlay(docker: &DockerClient, id: &str) {
    let deadline = tokio::time::Instant::now() + OVERLAY_PATIENCE;
    loop {
        match docker.remove_network(id).await {
            Ok(()) => return,
            Err(e) if e.engine_status() == Some(404) => return,
            // No answer at all (the manager is gone): nothing to wait for.
            Err(e) if e.engine_status().is_none() || tokio::time::Instant::now() >= deadline => {
                tracing::warn!(network = %id, error = %e, "could not remove the swarm overlay");
                return;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
        }
    }
}
