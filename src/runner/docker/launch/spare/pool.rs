//! The spares of one engine, by shape: kept until a job takes one, its
//! idle time passed or the manager shuts down; how many are made at once.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::super::super::{DockerClient, remove_container};
use super::super::prepare::Prepared;
use super::super::started::Made;

/// Most spares at once, of every shape: a caller who varies its jobs'
/// limits makes a shape per job, never more spares than this.
const MAX_SPARES: usize = 16;
/// A spare that died within this long after it was made could not run
/// its waiter: its shape is not made again.
const SOON: Duration = Duration::from_secs(10);

/// The spares of one engine, by shape.
pub struct Spares {
    state: Mutex<State>,
    /// Spares kept per shape; 0: none.
    size: usize,
    /// How long a spare waits for a job before it is removed.
    idle: Duration,
    /// Where spares keep their `/etc` files (`<instance>/warm`).
    pub(super) dir: PathBuf,
    pub(super) serial: AtomicU64,
    /// How many spares are being made, of every shape: shutdown waits
    /// for 0 (a spare made after it is removed at once).
    making: tokio::sync::watch::Sender<usize>,
    tasks: tokio_util::task::TaskTracker,
    /// Cancelled at shutdown: the idle timers end at once.
    closing: tokio_util::sync::CancellationToken,
}

#[derive(Default)]
struct State {
    ready: HashMap<String, Vec<Spare>>,
    /// Spares being made, by shape.
    making: HashMap<String, usize>,
    /// Shapes whose spare died unasked: not made again.
    refused: HashSet<String>,
    closed: bool,
}

/// One started spare and what its launch made.
pub(in super::super) struct Spare {
    pub(super) serial: u64,
    /// When it was made: one that died soon after could not run its
    /// waiter (no `sh` in the image); a later death is the engine's.
    pub(super) made_at: std::time::Instant,
    pub(super) dir: PathBuf,
    pub(super) prepared: Prepared,
    pub(super) made: Made,
    pub(super) protect_warnings: Vec<String>,
}

/// A spare being made, counted in `making` until dropped.
pub(super) struct Making<'a>(&'a Spares, String);

impl Drop for Making<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock().unwrap();
        if let Some(n) = st.making.get_mut(&self.1) {
            *n = n.saturating_sub(1);
        }
        self.0.making.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Spares {
    pub fn new(size: usize, idle: Duration, dir: PathBuf) -> Spares {
        Spares {
            state: Mutex::default(),
            size,
            idle,
            dir,
            serial: AtomicU64::new(0),
            making: tokio::sync::watch::channel(0).0,
            tasks: tokio_util::task::TaskTracker::new(),
            closing: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// Spares are kept at all.
    pub fn wanted(&self) -> bool {
        self.size > 0 && !self.state.lock().unwrap().closed
    }

    /// A ready spare of `shape`; one that died meanwhile is removed, and
    /// its shape not made again.
    pub(in super::super) fn take(self: &Arc<Self>, docker: &DockerClient, shape: &str) -> Option<Spare> {
        let mut st = self.state.lock().unwrap();
        while let Some(spare) = st.ready.get_mut(shape)?.pop() {
            if !spare.made.started.wait.is_finished() {
                return Some(spare);
            }
            if spare.made_at.elapsed() < SOON {
                tracing::warn!(
                    shape,
                    "a spare container ended at once (no /bin/sh in its image?); this shape starts cold from now on"
                );
                st.refused.insert(shape.to_string());
            }
            self.discard_later(docker, spare);
        }
        None
    }

    /// Count a spare of `shape` as being made, unless enough are.
    pub(super) fn begin(&self, shape: &str) -> Option<Making<'_>> {
        let mut st = self.state.lock().unwrap();
        let have = st.ready.get(shape).map_or(0, Vec::len) + st.making.get(shape).copied().unwrap_or(0);
        let all = st.ready.values().map(Vec::len).sum::<usize>() + *self.making.borrow();
        if st.closed || have >= self.size || all >= MAX_SPARES || st.refused.contains(shape) {
            return None;
        }
        *st.making.entry(shape.to_string()).or_default() += 1;
        self.making.send_modify(|n| *n += 1);
        Some(Making(self, shape.to_string()))
    }

    /// Keep a made spare until a job takes it or `idle` passed.
    pub(super) fn put(self: &Arc<Self>, docker: &DockerClient, shape: String, spare: Spare) {
        let serial = spare.serial;
        {
            let mut st = self.state.lock().unwrap();
            if !st.closed {
                st.ready.entry(shape.clone()).or_default().push(spare);
                drop(st);
                let (me, docker) = (self.clone(), docker.clone());
                self.tasks.spawn(async move {
                    tokio::select! {
                        _ = tokio::time::sleep(me.idle) => me.expire(&docker, &shape, serial),
                        // Shutdown removes every spare itself.
                        _ = me.closing.cancelled() => {}
                    }
                });
                return;
            }
        }
        self.discard_later(docker, spare);
    }

    /// Remove spare `serial` of `shape` if no job took it.
    fn expire(self: &Arc<Self>, docker: &DockerClient, shape: &str, serial: u64) {
        let mut st = self.state.lock().unwrap();
        let Some(list) = st.ready.get_mut(shape) else {
            return;
        };
        if let Some(i) = list.iter().position(|s| s.serial == serial) {
            let spare = list.swap_remove(i);
            self.discard_later(docker, spare);
        }
    }

    fn discard_later(&self, docker: &DockerClient, spare: Spare) {
        let docker = docker.clone();
        self.tasks.spawn(async move { discard(&docker, spare).await });
    }

    /// Shutdown: every spare removed, the ones being made waited for (a
    /// made one finds the pool closed and goes at once).
    pub async fn close(&self, docker: &DockerClient) {
        let spares: Vec<Spare> = {
            let mut st = self.state.lock().unwrap();
            st.closed = true;
            self.closing.cancel();
            st.ready.drain().flat_map(|(_, v)| v).collect()
        };
        futures_util::future::join_all(spares.into_iter().map(|s| discard(docker, s))).await;
        let mut making = self.making.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(10), making.wait_for(|n| *n == 0)).await;
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.tasks.wait()).await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Remove a spare's container, then give back its network and proxy.
pub(super) async fn discard(docker: &DockerClient, spare: Spare) {
    let Spare {
        dir, prepared, made, ..
    } = spare;
    made.started.wait.abort();
    remove_container(docker, &made.started.container_id).await;
    if let Some(p) = &made.proxy {
        p.close();
    }
    drop((made, prepared));
    let _ = std::fs::remove_dir_all(dir);
}
