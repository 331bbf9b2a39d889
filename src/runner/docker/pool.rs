//! A pool of job networks of one kind (`network.rs`: internal, or NAT'd)
//! and which of them this engine's containers hold.
//!
//! Slot N is the network `<prefix>-N`, made on first use (~0.2 s) and
//! reused by a later job once the container on it exited or was removed
//! ([`Slot`] is held until then: the engine releases a container's endpoint
//! before it reports the exit; a network this process saw emptied is reused
//! without asking the engine again). The cap on running jobs bounds the
//! pool. A slot also knows its network's gateway and subnet, where the
//! job's egress proxy listens and whom it serves.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::DockerClient;
use super::network::ensure;
use super::ownership::Ownership;
use super::pause::{self, Pauses};
pub use super::slot::{NetAddr, Slot};
use crate::error::{Error, Result};
use crate::store::private;

/// More slots than this means something keeps every network busy.
const MAX_SLOTS: u32 = 4096;

#[derive(Clone)]
struct Known {
    id: String,
    addr: NetAddr,
}

/// The networks of one kind and which slots this engine's containers hold.
#[derive(Default)]
pub struct Pool {
    /// `<prefix>-N` is slot N's network.
    prefix: String,
    /// The networks are made `internal` (no traffic to or from other interfaces).
    internal: bool,
    /// Where the slot locks live (`<instance dir>/networks…/N.lock`): a
    /// `berth run` beside the daemon shares the state dir, hence the pool;
    /// an flock per slot keeps the two processes off one network. Locks
    /// die with their process, so a crashed manager holds none.
    lock_dir: Option<PathBuf>,
    busy: Arc<Mutex<BTreeSet<u32>>>,
    /// Slot → network id and address, so reusing a network costs one inspect.
    known: Mutex<BTreeMap<u32, Known>>,
    /// Slots whose last container (this process's) exited or was removed:
    /// their network is known empty and is reused without an inspect. A network
    /// removed meanwhile fails the create, which makes it again
    /// (`EngineFailure::NetworkMissing`, `forget`).
    vacant: Arc<Mutex<BTreeSet<u32>>>,
    /// One acquire at a time: two launches would otherwise pick one slot.
    /// (A tokio mutex: held across the engine calls on purpose.)
    one: tokio::sync::Mutex<()>,
    /// The slots' pause containers (pause.rs).
    pub pauses: Arc<Pauses>,
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
    /// The pool of networks `<prefix>-N`, `internal` or not, locked in `lock_dir`.
    pub fn new(prefix: String, internal: bool, lock_dir: PathBuf) -> Self {
        Pool {
            prefix,
            internal,
            lock_dir: Some(lock_dir),
            ..Default::default()
        }
    }

    /// The prefix of this pool's network names.
    pub fn prefix(&self) -> &str {
        &self.prefix
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

    /// The lowest free slot whose network exists (made if needed), is ours,
    /// of this pool's kind and has no container on it (one of another
    /// process, or a leftover that still runs, makes it skipped). `join`:
    /// the job can join a pause, so a free slot with one comes first;
    /// otherwise slots with a pause are left to such jobs.
    pub async fn acquire(&self, docker: &DockerClient, owner: &Ownership, join: bool) -> Result<Slot> {
        if join {
            self.pauses.settle(pause::JOIN_WAIT).await;
        }
        let _one = self.one.lock().await;
        if join && let Some(slot) = self.free_pause_slot() {
            return Ok(slot);
        }
        for n in 0..MAX_SLOTS {
            if self.busy.lock().is_ok_and(|b| b.contains(&n)) || self.pauses.has(n) {
                continue;
            }
            let Lock::Held(lock) = self.lock(n) else {
                continue;
            };
            let name = slot_name(&self.prefix, n);
            let cached = self.known.lock().ok().and_then(|k| k.get(&n).cloned());
            let vacant = self.vacant.lock().is_ok_and(|v| v.contains(&n));
            if let (Some(known), true) = (&cached, vacant) {
                return Ok(self.hold(n, known.clone(), name, lock));
            }
            let inspected = match cached {
                Some(known) => match docker.inspect_network(&known.id).await {
                    // One of the other kind (an older berth's) is made again.
                    Ok(i) if i.internal.unwrap_or(false) == self.internal => Some((known.id, i)),
                    Ok(_) => None,
                    // Removed meanwhile (teardown of another manager, the watchdog).
                    Err(e) if e.engine_status() == Some(404) => None,
                    Err(e) => return Err(e),
                },
                None => None,
            };
            let (id, inspected) = match inspected {
                Some(found) => found,
                None => {
                    let id = ensure(docker, &name, owner, self.internal).await?;
                    let i = docker.inspect_network(&id).await?;
                    (id, i)
                }
            };
            let known = Known {
                id,
                addr: NetAddr::of(&inspected),
            };
            if let Ok(mut k) = self.known.lock() {
                k.insert(n, known.clone());
            }
            if inspected.containers.as_ref().is_some_and(|c| !c.is_empty()) {
                continue;
            }
            return Ok(self.hold(n, known, name, lock));
        }
        Err(fail(
            &self.prefix,
            format!("all {MAX_SLOTS} job networks are in use"),
        ))
    }

    /// A free slot whose network has a pause (known, so never inspected).
    fn free_pause_slot(&self) -> Option<Slot> {
        let candidates: Vec<u32> = self.vacant.lock().ok()?.iter().copied().collect();
        for n in candidates {
            if !self.pauses.has(n) || self.busy.lock().is_ok_and(|b| b.contains(&n)) {
                continue;
            }
            let Some(known) = self.known.lock().ok().and_then(|k| k.get(&n).cloned()) else {
                continue;
            };
            if let Lock::Held(lock) = self.lock(n) {
                return Some(self.hold(n, known, slot_name(&self.prefix, n), lock));
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

    /// Hold the slot of network `name` (at `addr`) for an adopted container
    /// running on it; `None` when `name` is not this pool's.
    pub fn claim(&self, name: &str, id: String, addr: NetAddr) -> Option<Slot> {
        let n: u32 = name.strip_prefix(&self.prefix)?.strip_prefix('-')?.parse().ok()?;
        if self.busy.lock().is_ok_and(|b| b.contains(&n)) {
            return None;
        }
        // Its manager died, so nobody else should hold the lock; if someone
        // does, the slot stays theirs.
        let Lock::Held(lock) = self.lock(n) else {
            return None;
        };
        Some(self.hold(n, Known { id, addr }, name.to_string(), lock))
    }

    fn hold(&self, n: u32, known: Known, name: String, lock: Option<File>) -> Slot {
        if let Ok(mut b) = self.busy.lock() {
            b.insert(n);
        }
        if let Ok(mut v) = self.vacant.lock() {
            v.remove(&n);
        }
        Slot {
            n,
            id: known.id,
            name,
            addr: known.addr,
            pause: self.pauses.of(n),
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
