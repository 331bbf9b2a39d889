//! The instance's own bridge network (`network = "isolated"`, opt-in).
//!
//! Why opt-in: the engine these machines run (Debian's docker.io 20.10.24)
//! deadlocks its network controller when several containers on one
//! user-defined network exit at once (libnetwork takes the controller and a
//! network's lock in opposite orders in `processEndpointDelete` and
//! `sbLeave`/`getSvcRecords`); every later create, start and network call
//! then hangs until the engine is restarted. A busy test suite triggered it
//! within minutes, so the default stays the engine's default bridge.
//!
//! Jobs on the engine's default bridge
//! reach each other's ports; berth's bridge is created on demand with
//! inter-container traffic disabled (`enable_icc=false`), so a job reaches
//! the outside world (what the engine's NAT allows) and the host, but not the
//! other jobs. Published ports stay on 127.0.0.1 of the host. The network is
//! labelled like berth's containers, kept between jobs (making one costs
//! ~0.2 s) and removed at teardown when no container uses it; a launch that
//! loses a race with that removal makes it again.

use std::collections::HashMap;

use bollard::Docker;
use bollard::models::NetworkCreateRequest;
use bollard::query_parameters::ListNetworksOptions;

use super::ownership::{LABEL_STATE, Ownership, short};
use super::{LABEL_INSTANCE, LABEL_MANAGED, message, status};
use crate::error::{Error, Result};

/// The engine option that turns inter-container traffic off on a bridge.
pub const NO_ICC: &str = "com.docker.network.bridge.enable_icc";

/// `berth-<instance>-<state hash>-net`: one per instance and state dir.
pub fn name(instance_clean: &str, state: &str) -> String {
    format!("berth-{instance_clean}-{}-net", short(state))
}

/// The networks called exactly `name`: (id, ours?). Several can exist: this
/// engine (API 1.41) does not refuse a second create of one name, so two
/// launches that race may both create it.
async fn named(docker: &Docker, name: &str, owner: &Ownership) -> Result<Vec<(String, bool)>> {
    let opts = ListNetworksOptions {
        filters: Some(HashMap::from([("name".to_string(), vec![name.to_string()])])),
    };
    let list = docker
        .list_networks(Some(opts))
        .await
        .map_err(|e| Error::Docker {
            action: "list networks",
            job: name.to_string(),
            message: message(&e),
        })?;
    // The name filter matches substrings: keep exact names only.
    let mut found: Vec<(String, bool)> = list
        .into_iter()
        .filter(|n| n.name.as_deref() == Some(name))
        .filter_map(|n| Some((n.id?, owner.owns(n.labels.as_ref()))))
        .collect();
    found.sort();
    Ok(found)
}

/// Make sure the network `name` exists and is ours; returns the id to use.
/// Callers of one process serialize calls (`Engine::network_lock`): this
/// engine does not refuse a second network of one name.
/// Of several of ours the smallest id is used, so racing launches (even of
/// two processes) agree; a network of that name made by someone else is
/// never joined.
pub async fn ensure(docker: &Docker, name: &str, owner: &Ownership) -> Result<String> {
    let fail = |message: String| Error::Docker {
        action: "prepare network",
        job: name.to_string(),
        message,
    };
    let pick = |found: &[(String, bool)]| -> Option<Result<String>> {
        if found.iter().any(|(_, ours)| !ours) {
            return Some(Err(fail(format!(
                "a network named {name} exists and is not this berth instance's; remove it (docker network rm {name})"
            ))));
        }
        found.first().map(|(id, _)| Ok(id.clone()))
    };
    if let Some(picked) = pick(&named(docker, name, owner).await?) {
        return picked;
    }
    let request = NetworkCreateRequest {
        name: name.to_string(),
        driver: Some("bridge".into()),
        options: Some(HashMap::from([(NO_ICC.to_string(), "false".to_string())])),
        labels: Some(HashMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_INSTANCE.to_string(), owner.instance.clone()),
            (LABEL_STATE.to_string(), owner.state.clone()),
        ])),
        ..Default::default()
    };
    match docker.create_network(request).await {
        Ok(_) => {}
        // A newer engine refuses a second network of one name: fine, use it.
        Err(e) if status(&e) == Some(409) => {}
        Err(e) => return Err(fail(message(&e))),
    }
    // Two processes may have raced: keep the smallest id, drop the rest (new,
    // so unused; a start that saw the name twice retries, see `is_missing`).
    let found = named(docker, name, owner).await?;
    for (id, _) in found.iter().skip(1).filter(|(_, ours)| *ours) {
        let _ = docker.remove_network(id).await;
    }
    pick(&found).unwrap_or_else(|| Err(fail("the network vanished right after it was created".into())))
}

/// Remove the networks called `name` that are ours and that no container
/// uses any more (the engine refuses to remove one with endpoints).
/// Failures only cost a leftover network; they are logged, not raised.
pub async fn release(docker: &Docker, name: &str, owner: &Ownership) {
    let Ok(found) = named(docker, name, owner).await else {
        return;
    };
    for (id, ours) in found {
        if !ours {
            continue;
        }
        match docker.remove_network(&id).await {
            Ok(()) => {}
            // Gone already, or a job uses it (active endpoints).
            Err(e) if matches!(status(&e), Some(403 | 404 | 409)) => {}
            Err(e) => tracing::warn!(network = name, error = %message(&e), "could not remove network"),
        }
    }
}

/// True when an engine error says the network a container needs is missing
/// (released between `ensure` and create/start) or briefly doubled (two
/// processes made it at once): making sure again and retrying fixes both.
pub fn is_missing(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("network") && (m.contains("not found") || m.contains("ambiguous"))
}
