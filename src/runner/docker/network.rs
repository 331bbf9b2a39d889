//! Job networks (`network = "isolated"`, the default): a pool of berth-owned
//! bridges with at most one running container on each.
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
//! outside world (what the engine's NAT allows) and the host through its
//! gateway, not the other jobs; published ports stay on 127.0.0.1. A
//! network may also have an idle holder (holder.rs) whose namespace the
//! next job without ports joins: still one job, and one endpoint, per network.
//!
//! The pool: slot N is the network `berth-<instance>-<state hash>-net-N`,
//! made on first use (~0.2 s) and reused by a later job once the container on
//! it exited or was removed ([`Slot`] is held until then: the engine releases
//! a container's endpoint before it reports the exit; a network this process
//! saw emptied is reused without asking the engine again). The cap on running jobs
//! bounds the pool. Every network is labelled like berth's containers and
//! removed at teardown, by `berth down` and by the crash watchdog
//! ([`release_all`]); a launch that loses a race with that removal makes its
//! network again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::DockerClient;
use super::holder::{self, Holder, Holders};
use bollard::models::NetworkCreateRequest;
use bollard::query_parameters::ListNetworksOptions;

use super::ownership::{LABEL_STATE, Ownership, short};
use super::{LABEL_INSTANCE, LABEL_MANAGED};
use crate::error::{Error, Result};
use crate::store::private;

/// The engine option that turns inter-container traffic off on a bridge.
pub const NO_ICC: &str = "com.docker.network.bridge.enable_icc";

/// `berth-<instance>-<state hash>-net`: the prefix of the instance's
/// networks (slot N is `<prefix>-N`).
pub fn name(instance_clean: &str, state: &str) -> String {
    format!("berth-{instance_clean}-{}-net", short(state))
}

/// The networks called exactly `name`: (id, ours?). Several can exist: this
/// engine (API 1.41) does not refuse a second create of one name, so two
/// launches that race may both create it.
async fn named(docker: &DockerClient, name: &str, owner: &Ownership) -> Result<Vec<(String, bool)>> {
    let opts = ListNetworksOptions {
        filters: Some(HashMap::from([("name".to_string(), vec![name.to_string()])])),
    };
    let list = docker.list_networks(name, opts).await?;
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
pub async fn ensure(docker: &DockerClient, name: &str, owner: &Ownership) -> Result<String> {
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
        Err(e) if e.engine_status() == Some(409) => {}
        Err(e) => return Err(e),
    }
    // Two processes may have raced: keep the smallest id, drop the rest (new,
    // so unused; a start that saw the name twice retries, see `is_missing`).
    let found = named(docker, name, owner).await?;
    for (id, _) in found.iter().skip(1).filter(|(_, ours)| *ours) {
        let _ = docker.remove_network(id).await;
    }
    pick(&found).unwrap_or_else(|| Err(fail("the network vanished right after it was created".into())))
}

/// Remove every network of `owner` (by label) that no container uses any
/// more (the engine refuses to remove one with endpoints): teardown, `berth
/// down`, the crash watchdog. Failures only cost a leftover network; they
/// are logged, not raised. Returns how many were removed.
pub async fn release_all(docker: &DockerClient, owner: &Ownership) -> usize {
    // A holder keeps its network in use: the stale ones go first.
    holder::sweep(docker, owner).await;
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

/// More slots than this means something keeps every network busy.
const MAX_SLOTS: u32 = 4096;

/// The networks of one engine and which slots its containers hold.
#[derive(Default)]
pub struct Pool {
    /// Where the slot locks live (`<instance dir>/networks/N.lock`): a
    /// `berth run` beside the daemon shares the state dir, hence the pool;
    /// an flock per slot keeps the two processes off one network. Locks
    /// die with their process, so a crashed manager holds none.
    lock_dir: Option<PathBuf>,
    busy: Arc<Mutex<BTreeSet<u32>>>,
    /// Slot → network id, so reusing a network costs one inspect.
    known: Mutex<BTreeMap<u32, String>>,
    /// Slots whose last container (this process's) exited or was removed:
    /// their network is known empty and is reused without an inspect. A network
    /// removed meanwhile fails the create, which makes it again
    /// (`is_missing`, `forget`).
    vacant: Arc<Mutex<BTreeSet<u32>>>,
    /// One acquire at a time: two launches would otherwise pick one slot.
    /// (A tokio mutex: held across the engine calls on purpose.)
    one: tokio::sync::Mutex<()>,
    /// The slots' network holders (holder.rs).
    pub holders: Arc<Holders>,
}

/// Slot N, held by one container until it was removed; dropping it gives
/// the slot back to the pool.
pub struct Slot {
    n: u32,
    pub id: String,
    pub name: String,
    /// The network's holder when the slot was taken: a job without
    /// published ports joins its namespace.
    pub holder: Option<Holder>,
    busy: Arc<Mutex<BTreeSet<u32>>>,
    vacant: Arc<Mutex<BTreeSet<u32>>>,
    /// The slot's flock, released when the file closes.
    _lock: Option<File>,
}

impl Slot {
    /// The slot's number in the pool.
    pub fn index(&self) -> u32 {
        self.n
    }

    /// Give the slot back after its container exited or was removed (as the
    /// engine reported): the next acquire may skip inspecting the network.
    pub fn vacate(self) {
        if let Ok(mut v) = self.vacant.lock() {
            v.insert(self.n);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut busy) = self.busy.lock() {
            busy.remove(&self.n);
        }
    }
}

/// The network name of slot `n`.
pub fn slot_name(prefix: &str, n: u32) -> String {
    format!("{prefix}-{n}")
}

/// What trying a slot's lock found.
enum Lock {
    Held(Option<File>),
    /// Another process holds the slot.
    Taken,
}

impl Pool {
    pub fn new(lock_dir: PathBuf) -> Self {
        Pool {
            lock_dir: Some(lock_dir),
            ..Default::default()
        }
    }

    /// Lock slot `n` against other processes of this state dir. Without a
    /// usable lock dir (read-only state) only this process's view counts.
    fn lock(&self, n: u32) -> Lock {
        let Some(dir) = &self.lock_dir else {
            return Lock::Held(None);
        };
        let opened = private::create_dir(dir).and_then(|()| {
            private::open(
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false),
                &dir.join(format!("{n}.lock")),
            )
        });
        match opened {
            Ok(f) => match f.try_lock() {
                Ok(()) => Lock::Held(Some(f)),
                Err(_) => Lock::Taken,
            },
            Err(e) => {
                tracing::debug!(error = %e, "no network slot lock; this process's view only");
                Lock::Held(None)
            }
        }
    }

    /// The lowest free slot whose network exists (made if needed), is ours
    /// and has no container on it (one of another process, or a leftover
    /// that still runs, makes it skipped). `join`: the job can join a
    /// holder (no published ports), so a free slot with one comes first;
    /// otherwise slots with a holder are left to such jobs.
    pub async fn acquire(
        &self,
        docker: &DockerClient,
        prefix: &str,
        owner: &Ownership,
        join: bool,
    ) -> Result<Slot> {
        if join {
            self.holders.settle(holder::JOIN_WAIT).await;
        }
        let _one = self.one.lock().await;
        if join && let Some(slot) = self.free_holder_slot(prefix) {
            return Ok(slot);
        }
        for n in 0..MAX_SLOTS {
            if self.busy.lock().is_ok_and(|b| b.contains(&n)) || self.holders.has(n) {
                continue;
            }
            let Lock::Held(lock) = self.lock(n) else {
                continue;
            };
            let name = slot_name(prefix, n);
            let cached = self.known.lock().ok().and_then(|k| k.get(&n).cloned());
            let vacant = self.vacant.lock().is_ok_and(|v| v.contains(&n));
            if let (Some(id), true) = (&cached, vacant) {
                return Ok(self.hold(n, id.clone(), name, lock));
            }
            let inspected = match cached {
                Some(id) => match docker.inspect_network(&id).await {
                    Ok(i) => Some((id, i)),
                    // Removed meanwhile (teardown of another manager, the watchdog).
                    Err(e) if e.engine_status() == Some(404) => None,
                    Err(e) => return Err(e),
                },
                None => None,
            };
            let (id, inspected) = match inspected {
                Some(found) => found,
                None => {
                    let id = ensure(docker, &name, owner).await?;
                    let i = docker.inspect_network(&id).await?;
                    (id, i)
                }
            };
            if let Ok(mut k) = self.known.lock() {
                k.insert(n, id.clone());
            }
            if inspected.containers.as_ref().is_some_and(|c| !c.is_empty()) {
                continue;
            }
            return Ok(self.hold(n, id, name, lock));
        }
        Err(fail(prefix, format!("all {MAX_SLOTS} job networks are in use")))
    }

    /// A free slot whose network has a holder (known, so never inspected).
    fn free_holder_slot(&self, prefix: &str) -> Option<Slot> {
        let candidates: Vec<u32> = self.vacant.lock().ok()?.iter().copied().collect();
        for n in candidates {
            if !self.holders.has(n) || self.busy.lock().is_ok_and(|b| b.contains(&n)) {
                continue;
            }
            let Some(id) = self.known.lock().ok().and_then(|k| k.get(&n).cloned()) else {
                continue;
            };
            if let Lock::Held(lock) = self.lock(n) {
                return Some(self.hold(n, id, slot_name(prefix, n), lock));
            }
        }
        None
    }

    /// Forget slot `n`'s network id (it was found removed).
    pub fn forget(&self, slot: &Slot) {
        if let Ok(mut k) = self.known.lock() {
            k.remove(&slot.n);
        }
        if let Ok(mut v) = self.vacant.lock() {
            v.remove(&slot.n);
        }
    }

    /// Hold the slot of network `name` for an adopted container running on it.
    pub fn claim(&self, prefix: &str, name: &str, id: String) -> Option<Slot> {
        let n: u32 = name.strip_prefix(prefix)?.strip_prefix('-')?.parse().ok()?;
        if self.busy.lock().is_ok_and(|b| b.contains(&n)) {
            return None;
        }
        // Its manager died, so nobody else should hold the lock; if someone
        // does, the slot stays theirs.
        let Lock::Held(lock) = self.lock(n) else {
            return None;
        };
        Some(self.hold(n, id, name.to_string(), lock))
    }

    fn hold(&self, n: u32, id: String, name: String, lock: Option<File>) -> Slot {
        if let Ok(mut b) = self.busy.lock() {
            b.insert(n);
        }
        if let Ok(mut v) = self.vacant.lock() {
            v.remove(&n);
        }
        Slot {
            n,
            id,
            name,
            holder: self.holders.of(n),
            busy: self.busy.clone(),
            vacant: self.vacant.clone(),
            _lock: lock,
        }
    }
}

fn fail(name: &str, message: String) -> Error {
    Error::Docker {
        action: "prepare network",
        job: name.to_string(),
        message,
    }
}

/// True when an engine error says the network a container needs is missing
/// (released between `ensure` and create/start) or briefly doubled (two
/// processes made it at once): making sure again and retrying fixes both.
pub fn is_missing(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("network") && (m.contains("not found") || m.contains("ambiguous"))
}
