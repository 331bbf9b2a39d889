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
