//! What a job holds of the network pool (`pool.rs`): a [`Slot`] (one pool
//! network, given back when dropped), where that network is ([`NetAddr`])
//! and the pause container the job may join ([`Pause`], made in
//! `pause.rs`). Plain data below both, so the pool and the pauses need
//! not know each other's insides.

use std::collections::BTreeSet;
use std::fs::File;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use bollard::models::NetworkInspect;

/// Where a pool network is, as the engine's IPAM gave it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetAddr {
    /// The bridge's own address on the network (this machine's side).
    pub gateway: Option<IpAddr>,
    /// (network address, prefix length).
    pub subnet: Option<(IpAddr, u8)>,
}

impl NetAddr {
    /// Read from an inspected network (its first IPv4 config).
    pub fn of(inspected: &NetworkInspect) -> NetAddr {
        let configs = inspected.ipam.as_ref().and_then(|i| i.config.as_ref());
        let mut addr = NetAddr::default();
        for c in configs.into_iter().flatten() {
            let gateway = c.gateway.as_deref().and_then(|g| g.parse::<IpAddr>().ok());
            let subnet = c.subnet.as_deref().and_then(|s| {
                let (net, len) = s.split_once('/')?;
                Some((net.parse::<IpAddr>().ok()?, len.parse::<u8>().ok()?))
            });
            if gateway.is_some_and(|g| g.is_ipv4()) || addr.gateway.is_none() {
                addr = NetAddr { gateway, subnet };
            }
        }
        addr
    }
}

/// A running pause: the container and its address on the pool network
/// (what readiness probes of a job that joined it connect to).
#[derive(Clone, Debug)]
pub struct Pause {
    pub id: String,
    pub ip: Option<IpAddr>,
}

/// Slot N, held by one container until it was removed; dropping it gives
/// the slot back to the pool.
pub struct Slot {
    pub(super) n: u32,
    pub id: String,
    pub name: String,
    pub addr: NetAddr,
    /// The network's pause when the slot was taken: the job joins its namespace.
    pub pause: Option<Pause>,
    pub(super) busy: Arc<Mutex<BTreeSet<u32>>>,
    pub(super) vacant: Arc<Mutex<BTreeSet<u32>>>,
    /// The slot's flock, released when the file closes.
    pub(super) _lock: Option<File>,
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
