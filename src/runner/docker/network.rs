//! Job networks (`network = "isolated"`, the default): berth-owned bridges
//! with at most one running container on each, kept in pools (`pool.rs`).
//!
//! Why one container per network: jobs on the engine's default bridge reach
//! each other's ports, so berth puts jobs on bridges of its own. Sharing one
//! such bridge (with `enable_icc=false`) would do, but the engine these
//! machines run (Debian's docker.io 20.10.24) deadlocks its network
//! controller when several containers on one user-defined network exit at
//! once (libnetwork takes the controller and a network's lock in opposite
//! orders in `processEndpointDelete` and `sbLeave`/`getSvcRecords`); every
//! later create, start and network call then hangs until the engine is
//! restarted. With one endpoint per network that race has no partner.
//! Containers on different bridges cannot talk (the engine's isolation
//! chains); `enable_icc=false` stays on as a second guard. A job reaches the
//! host through its gateway, not the other jobs. A network may also have an
//! idle pause (pause.rs) whose namespace the next job joins: still one
//! job, and one endpoint, per network.
//!
//! Two kinds, two pools. Networks of jobs with `egress` `none` or `proxy`
//! (the default) are made `internal`: the engine then drops traffic between
//! the bridge and every other interface in both directions (its isolation
//! rules), so a job has no way out but berth's egress proxy on the gateway
//! address, and a host on the LAN that routes the job subnet through this
//! machine reaches nothing (engine 20.10 would forward it to a published
//! port's container otherwise). This machine still reaches a job's address
//! (berth's port forwarder relays to it), and a job still reaches this
//! machine's own addresses. Networks of `egress = "all"` jobs (and of jobs
//! whose ports the engine publishes, `publish = "engine"`: the engine
//! publishes nothing on an internal network) are ordinary NAT'd bridges,
//! `…-nat-N`.
//!
//! Every network is labelled like berth's containers and removed at
//! teardown, by `berth down` and by the crash watchdog ([`release_all`]); a
//! launch that loses a race with that removal makes its network again.

use std::collections::HashMap;

use super::DockerClient;
use super::pause;
use bollard::models::NetworkCreateRequest;
use bollard::query_parameters::ListNetworksOptions;

use super::ownership::{LABEL_STATE, Ownership, short};
use super::{LABEL_INSTANCE, LABEL_MANAGED};
use crate::error::{Error, Result};

/// The engine option that turns inter-container traffic off on a bridge.
pub const NO_ICC: &str = "com.docker.network.bridge.enable_icc";

/// `berth-<instance>-<state hash>-net`: the prefix of the instance's
/// internal networks (slot N is `<prefix>-N`).
pub fn name(instance_clean: &str, state: &str) -> String {
    format!("berth-{instance_clean}-{}-net", short(state))
}

/// `berth-<instance>-<state hash>-nat`: the prefix of the instance's NAT'd
/// networks (`egress = "all"`, engine-published ports).
pub fn nat_name(instance_clean: &str, state: &str) -> String {
    format!("berth-{instance_clean}-{}-nat", short(state))
}

/// One network called `name`, as listed.
struct Named {
    id: String,
    ours: bool,
    internal: bool,
}

/// The networks called exactly `name`. Several can exist: this engine (API
/// 1.41) does not refuse a second create of one name, so two launches that
/// race may both create it.
async fn named(docker: &DockerClient, name: &str, owner: &Ownership) -> Result<Vec<Named>> {
    let opts = ListNetworksOptions {
        filters: Some(HashMap::from([("name".to_string(), vec![name.to_string()])])),
    };
    let list = docker.list_networks(name, opts).await?;
    // The name filter matches substrings: keep exact names only.
    let mut found: Vec<Named> = list
        .into_iter()
        .filter(|n| n.name.as_deref() == Some(name))
        .filter_map(|n| {
            Some(Named {
                ours: owner.owns(n.labels.as_ref()),
                internal: n.internal.unwrap_or(false),
                id: n.id?,
            })
        })
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

/// Make sure the network `name` exists, is ours and of the kind asked
/// (`internal` or not); returns the id to use. Callers of one process
/// serialize calls (the pool's lock): this engine does not refuse a second
/// network of one name. Of several of ours the smallest id is used, so
/// racing launches (even of two processes) agree; a network of that name
/// made by someone else is never joined, and one of ours of the other kind
/// (made by an older berth) is removed and made again.
pub async fn ensure(docker: &DockerClient, name: &str, owner: &Ownership, internal: bool) -> Result<String> {
    let fail = |message: String| Error::Docker {
        action: "prepare network",
        job: name.to_string(),
        message,
    };
    let pick = |found: &[Named]| -> Option<Result<String>> {
        if found.iter().any(|n| !n.ours) {
            return Some(Err(fail(format!(
                "a network named {name} exists and is not this berth instance's; remove it (docker network rm {name})"
            ))));
        }
        found
            .iter()
            .find(|n| n.internal == internal)
            .map(|n| Ok(n.id.clone()))
    };
    let found = named(docker, name, owner).await?;
    if let Some(picked) = pick(&found) {
        return picked;
    }
    for stale in found.iter().filter(|n| n.internal != internal) {
        // Of the other kind: an older berth's. In use, it stays, and the
        // name cannot be made again: say so.
        if let Err(e) = docker.remove_network(&stale.id).await {
            return Err(fail(format!(
                "the network {name} is of an older berth and still in use ({}); stop its jobs (berth down) and start again",
                e.engine_reason()
            )));
        }
    }
    let request = NetworkCreateRequest {
        name: name.to_string(),
        driver: Some("bridge".into()),
        internal: Some(internal),
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
        Err(e) if e.engine_status() == Some(409) => {}
        Err(e) => return Err(e),
    }
    // Two processes may have raced: keep the smallest id, drop the rest (new,
    // so unused; a start that saw the name twice retries, see `EngineFailure::NetworkMissing`).
    let found = named(docker, name, owner).await?;
    let mut kept = false;
    for n in found.iter().filter(|n| n.ours && n.internal == internal) {
        if kept {
            let _ = docker.remove_network(&n.id).await;
        }
        kept = true;
    }
    pick(&found).unwrap_or_else(|| Err(fail("the network vanished right after it was created".into())))
}

/// Remove every network of `owner` (by label) that no container uses any
/// more (the engine refuses to remove one with endpoints): teardown, `berth
/// down`, the crash watchdog. Failures only cost a leftover network; they
/// are logged, not raised. Returns how many were removed.
pub async fn release_all(docker: &DockerClient, owner: &Ownership) -> usize {
    // A pause keeps its network in use: the stale ones go first.
    pause::sweep(docker, owner).await;
    let opts = ListNetworksOptions {
        filters: Some(HashMap::from([("label".to_string(), owner.filters())])),
    };
    let Ok(list) = docker.list_networks("of this instance", opts).await else {
        return 0;
    };
    let mut removed = 0;
    for n in list {
        let (Some(id), true) = (n.id, owner.owns(n.labels.as_ref())) else {
            continue;
        };
        match docker.remove_network(&id).await {
            Ok(()) => removed += 1,
            // Gone already, or a job uses it (active endpoints).
            Err(e) if matches!(e.engine_status(), Some(403 | 404 | 409)) => {}
            Err(e) => tracing::warn!(error = %e, "could not remove network"),
        }
    }
    removed
}
