//! The removal of an instance's swarm services and configs, found by their
//! labels: those whose manager is gone (the watchdog, the next manager) or
//! which a manager leaves behind at shutdown (`runner/swarm/`). Removing a
//! service is the swarm's word to every node to remove its container, so
//! nothing of a job stays on any node without berth reaching the nodes. On
//! an engine that is no swarm manager there are none: the listing fails
//! and nothing is done. It lives with the engine's other sweeps
//! (`cleanup.rs`), which call it.

use std::collections::HashMap;

use super::{DockerClient, LABEL_OWNER};

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
