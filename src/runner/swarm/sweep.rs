//! The swarm objects of an instance, found by their labels: the internal
//! overlay its jobs without a way out share, and the removal of services
//! and configs whose manager is gone (the watchdog, the next manager) or
//! which this manager leaves behind at shutdown. Removing a service is
//! the swarm's word to every node to remove its container, so nothing of
//! a job stays on any node without berth reaching the nodes themselves.

use std::collections::HashMap;

use bollard::models::NetworkCreateRequest;
use bollard::query_parameters::ListNetworksOptions;

use crate::error::{Error, Result};
use crate::runner::docker::{
    DockerClient, LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER, LABEL_STATE, Ownership,
};

/// Which of the labelled services and configs go.
#[derive(Clone, Copy)]
pub enum Which<'a> {
    All,
    /// Those whose owner is no live manager (and not `me`).
    DeadOwners {
        me: &'a str,
    },
}

impl Which<'_> {
    fn takes(self, labels: Option<&HashMap<String, String>>) -> bool {
        let owner = labels.and_then(|l| l.get(LABEL_OWNER));
        match self {
            Which::All => true,
            Which::DeadOwners { me } => owner.is_none_or(|o| o != me && !crate::procinfo::owner_alive(o)),
        }
    }
}

/// Remove the services carrying every one of `labels` that `which` takes,
/// then their configs; the count of services removed. An engine that is
/// no swarm manager has none (0, quietly).
pub async fn remove_services(docker: &DockerClient, labels: &[String], which: Which<'_>) -> usize {
    let Ok(services) = docker.list_services(labels).await else {
        return 0;
    };
    let mut removed = 0;
    for s in services {
        let (Some(id), true) = (
            s.id.as_deref(),
            which.takes(s.spec.as_ref().and_then(|p| p.labels.as_ref())),
        ) else {
            continue;
        };
        match docker.remove_service(id).await {
            Ok(()) => removed += 1,
            Err(e) if e.engine_status() == Some(404) => {}
            Err(e) => tracing::warn!(service = id, error = %e, "could not remove a service"),
        }
    }
    if let Ok(configs) = docker.list_configs(labels).await {
        for (id, config_labels) in configs {
            if which.takes(Some(&config_labels)) {
                let _ = docker.remove_config(&id).await;
            }
        }
    }
    removed
}

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
