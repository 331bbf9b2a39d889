//! The writer's queue, seen from the store's handle: a bounded tokio mpsc
//! channel whose capacity is the backpressure, writes that never wait for
//! good, the room an async producer waits for, flushes and checkpoints that
//! wait a bounded time, and what the store says about its health. A write
//! that finds the queue full waits for the writer; one that waited
//! [`STUCK_LIMIT`] in vain (a hung disk) marks the store stuck, and from then
//! on writes that find the queue full are dropped (their lines said as lost)
//! until the writer takes writes again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::oneshot;

use super::wait::block_until;
use super::{FLUSH_LIMIT, Op, RunRow, STUCK_LIMIT, Store, StoreHealth, held};
use crate::error::{Error, Result};
use crate::model::{Chunk, Event, JobId, Line};

/// What the store's handle and its writer thread share.
pub(crate) struct Shared {
    /// A write waited [`STUCK_LIMIT`] in vain: writes stop waiting (the
    /// writer clears it when it takes writes again).
    pub(super) stuck: AtomicBool,
    pub(super) held: held::Held,
    /// Disk space to give back at shutdown, and the note of held output.
    pub(super) reserve: Option<super::reserve::Reserve>,
    pub(super) health: tokio::sync::watch::Sender<StoreHealth>,
    /// How long a write waits for room before the store counts as stuck
    /// ([`STUCK_LIMIT`]; shorter in unit tests).
    pub(super) stuck_after: std::sync::atomic::AtomicU64,
    /// Unit tests: every commit fails while set (a failing disk on demand).
    #[cfg(test)]
    pub(super) fail_writes: AtomicBool,
    /// Unit tests: the writer takes nothing while set (a hung disk).
    #[cfg(test)]
    pub(super) stall_writes: AtomicBool,
}

impl Shared {
    pub(super) fn new(held_per_job: usize, reserve: Option<super::reserve::Reserve>) -> Shared {
        Shared {
            stuck: AtomicBool::new(false),
            held: held::Held::new(held_per_job),
            reserve,
            health: tokio::sync::watch::channel(StoreHealth::Ok).0,
            stuck_after: (STUCK_LIMIT.as_millis() as u64).into(),
            #[cfg(test)]
            fail_writes: AtomicBool::new(false),
            #[cfg(test)]
            stall_writes: AtomicBool::new(false),
        }
    }
}

impl Store {
    /// Whether the store can write (see [`StoreHealth`]).
    pub fn health(&self) -> StoreHealth {
        self.shared.health.borrow().clone()
    }

    /// Told of every change of [`Store::health`].
    pub fn watch_health(&self) -> tokio::sync::watch::Receiver<StoreHealth> {
        self.shared.health.subscribe()
    }

    /// Why writes are being dropped right now (the writer took none for
    /// [`STUCK_LIMIT`]), if they are: unlike a degraded store that holds
    /// output, a stuck one keeps nothing.
    pub fn unavailable(&self) -> Option<String> {
        if !self.shared.stuck.load(Ordering::SeqCst) {
            return None;
        }
        match self.health() {
            StoreHealth::Degraded { reason, .. } => Some(reason),
            StoreHealth::Ok => Some("the store takes no writes".into()),
        }
    }

    /// Bytes of output held in memory because the store could not write.
    pub fn held_bytes(&self) -> usize {
        self.shared.held.bytes()
    }

    /// Unit tests: make every commit fail (`true`) or succeed again.
    #[cfg(test)]
    pub fn fail_writes(&self, fail: bool) {
        self.shared.fail_writes.store(fail, Ordering::SeqCst);
    }

    /// Unit tests: the writer takes nothing (`true`, a hung disk) or takes
    /// again; a write then counts the store stuck after `after`.
    #[cfg(test)]
    pub fn stall_writes(&self, stall: bool, after: Duration) {
        self.shared
            .stuck_after
            .store(after.as_millis() as u64, Ordering::SeqCst);
        self.shared.stall_writes.store(stall, Ordering::SeqCst);
    }

    /// Queue `op`, waiting (without stalling other tasks) while the queue is
    /// full, but never for good: after [`STUCK_LIMIT`] without room the
    /// store is reported stuck and `op` is dropped (as are later writes that
    /// find the queue full, until the writer takes writes again).
    fn send(&self, op: Op) {
        let op = match self.tx.try_send(op) {
            Ok(()) => return,
            Err(TrySendError::Full(op)) => op,
            Err(TrySendError::Closed(_)) => {
                tracing::error!("store writer is gone");
                return;
            }
        };
        if self.shared.stuck.load(Ordering::SeqCst) {
            return; // dropped: its lines read as lost
        }
        let limit = Duration::from_millis(self.shared.stuck_after.load(Ordering::SeqCst));
        let deadline = Instant::now() + limit;
        // The writer is its own thread: blocking here cannot deadlock. The
        // wait holds a place in the channel's line, so room goes to the
        // writes that waited longest.
        let sent = off_worker(|| match block_until(self.tx.reserve(), Some(deadline)) {
            Some(Ok(permit)) => {
                permit.send(op);
                true
            }
            Some(Err(_)) | None => false,
        });
        if !sent && !self.shared.stuck.swap(true, Ordering::SeqCst) {
            tracing::error!(path = %self.path.display(), "the store writer took no write for {STUCK_LIMIT:?}; writes are dropped until it does");
            self.shared.health.send_replace(StoreHealth::Degraded {
                since: chrono::Utc::now(),
                reason: format!(
                    "the store took no write for {}s (a hung disk?)",
                    STUCK_LIMIT.as_secs()
                ),
            });
        }
    }

    /// Wait until the write queue has room. An async producer (a pipe's
    /// reader) waits here, so that its next write rarely finds the queue
    /// full: blocking then takes its worker thread out of the runtime, and
    /// the threads started in its place each grew a malloc arena of their
    /// own that a long-lived daemon kept.
    pub async fn room(&self) {
        while !self.shared.stuck.load(Ordering::SeqCst) {
            // Looked at again now and then: a stuck writer never frees room.
            match tokio::time::timeout(Duration::from_secs(1), self.tx.reserve()).await {
                // The slot goes back at once: the write that follows takes it
                // (or finds it taken and waits, bounded, in `send`).
                Ok(Ok(_permit)) => return,
                Ok(Err(_closed)) => return,
                Err(_elapsed) => {}
            }
        }
    }

    pub fn put_lines(&self, job: &JobId, lines: Vec<Line>) {
        if !lines.is_empty() {
            self.send(Op::Lines(job.clone(), lines));
        }
    }

    /// Queue a chunk of lines (the live path: the ring keeps sharing it).
    pub fn put_chunk(&self, job: &JobId, chunk: Arc<Chunk>) {
        if !chunk.is_empty() {
            self.send(Op::Chunk(job.clone(), chunk));
        }
    }

    pub fn put_event(&self, event: &Event) {
        self.send(Op::Event(Box::new(event.clone())));
    }

    pub fn put_run(&self, row: RunRow) {
        self.send(Op::Run(Box::new(row)));
    }

    /// Wait until everything queued so far is committed, or held in memory
    /// while the store cannot write (readable either way); at most
    /// [`FLUSH_LIMIT`], so that no reader or shutdown waits on a hung disk.
    pub fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        self.send(Op::Flush(tx));
        let deadline = Instant::now() + FLUSH_LIMIT;
        if !matches!(off_worker(|| block_until(rx, Some(deadline))), Some(Ok(()))) {
            tracing::warn!(path = %self.path.display(), "the store did not finish its writes within {FLUSH_LIMIT:?}");
        }
    }

    /// Fold the write-ahead log into the database and truncate it, after
    /// everything queued so far (at a clean shutdown); at most [`FLUSH_LIMIT`].
    pub fn checkpoint(&self) {
        let (tx, rx) = oneshot::channel();
        self.send(Op::Checkpoint(tx));
        let deadline = Instant::now() + FLUSH_LIMIT;
        let _ = off_worker(|| block_until(rx, Some(deadline)));
    }

    /// At shutdown, after the last records were queued: when the store
    /// cannot write, give the reserve back and write what fits, the
    /// records (with each job's last seq) first, so that no held line
    /// vanishes unmarked (`reserve.rs`); at most [`FLUSH_LIMIT`].
    pub fn settle(&self) {
        if !self.health().is_degraded() {
            return;
        }
        let (tx, rx) = oneshot::channel();
        self.send(Op::Settle(tx));
        let deadline = Instant::now() + FLUSH_LIMIT;
        let _ = off_worker(|| block_until(rx, Some(deadline)));
    }

    /// Delete the runs `jobs` and everything stored for them (lines, events).
    pub fn prune(&self, jobs: &[JobId]) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let (tx, rx) = oneshot::channel();
        let ids = jobs.iter().map(|j| j.to_string()).collect();
        self.send(Op::Prune(ids, tx));
        // Unbounded as before: a degraded writer refuses a prune at once,
        // and a dropped one (a stuck store) closes the reply.
        let message = match off_worker(|| block_until(rx, None)) {
            Some(Ok(Ok(()))) => return Ok(()),
            Some(Ok(Err(message))) => message,
            Some(Err(_)) | None => "the store writer is gone".into(),
        };
        Err(Error::Store {
            path: self.path.clone(),
            message,
        })
    }
}

/// Run `wait` (a blocking wait on the writer thread, or a small blocking
/// write elsewhere: the security log's line) without stalling the other
/// tasks of a multi-threaded runtime: the worker hands them on first. The
/// work is still done when this returns, which its callers rely on.
pub fn off_worker<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}
