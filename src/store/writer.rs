//! The store's one writer thread: it takes whatever is queued and commits it
//! as one transaction (`commit.rs`), so under load batches grow by
//! themselves and under light load each write lands within a few
//! milliseconds.
//!
//! When a commit fails for good (a full or failing disk, a database locked
//! longer than [`RETRY_FOR`]) the writer does not stop and drops nothing it
//! can keep: it becomes degraded (`held.rs`). It keeps taking writes so that
//! no job waits on it, holds each job's newest output in memory, keeps run
//! records and events waiting, answers flushes at once (held output reads as
//! stored) and refuses prunes, and tries everything again with backoff until
//! one commit takes it all; then the store is healthy again. A panic in a
//! commit is a failed commit too: the thread never dies.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::Receiver;

use super::blocks::BLOCK_AGE;
use super::commit::{Committer, PruneOutcome, is_transient};
use super::held::Piece;
use super::reserve::free_space;
use super::wait::block_until;
use super::{Op, QUEUE_BOUND, RunRow, Shared, StoreHealth};
use crate::model::Event;

/// How long a batch is tried again while the database stays busy (on top of
/// each attempt's own busy timeout) before the store counts as degraded, and
/// the backoff between attempts.
const RETRY_FOR: Duration = Duration::from_secs(5);
const RETRY_FIRST: Duration = Duration::from_millis(20);
const RETRY_MAX_DELAY: Duration = Duration::from_secs(1);

/// While degraded: the first pause before trying again, and the longest.
const DEGRADED_FIRST: Duration = Duration::from_millis(100);
const DEGRADED_MAX_DELAY: Duration = Duration::from_secs(2);

/// Events kept waiting while degraded (the newest; the event log keeps
/// its own recent ones in memory too).
const MAX_WAITING_EVENTS: usize = 10_000;

/// Why a commit failed, and whether waiting a little may fix it.
struct Failure {
    reason: String,
    transient: bool,
}

/// Records that wait while the store cannot write.
#[derive(Default)]
struct Waiting {
    /// The newest record of each run.
    runs: BTreeMap<String, Box<RunRow>>,
    events: VecDeque<Box<Event>>,
}

/// When to try again while degraded.
struct Retry {
    at: Instant,
    delay: Duration,
}

pub(super) struct Writer {
    committer: Committer,
    shared: Arc<Shared>,
    waiting: Waiting,
    /// Set while degraded.
    retry: Option<Retry>,
    /// The database file's device and inode, and when they were last
    /// compared with what its path names now.
    file: Option<(u64, u64)>,
    looked: Instant,
    /// The last failure was a full disk.
    full: bool,
}

/// Free space a full disk must have again before held output is written
/// back: a little room (a checkpoint that shrank the log) would take a
/// write, fill up at once and flap the store between degraded and not.
const ROOM: u64 = 2 * super::reserve::BALLAST;

/// How often the writer checks that its database file is still there.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The device and inode `path` names now.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Writer {
    pub fn new(conn: rusqlite::Connection, cap: u64, shared: Arc<Shared>) -> Self {
        Writer {
            committer: Committer::new(conn, cap),
            shared,
            waiting: Waiting::default(),
            retry: None,
            file: None,
            looked: Instant::now(),
            full: false,
        }
    }

    /// A database file removed under the writer (its state directory
    /// deleted) takes writes that no later start will find: the store is
    /// degraded, new jobs are refused, and the reason says what to do.
    fn look(&mut self, path: &Path) {
        if self.looked.elapsed() < LOOK_EVERY {
            return;
        }
        self.looked = Instant::now();
        let now = file_id(path);
        if self.file.is_none() {
            self.file = now;
            return;
        }
        if now == self.file || self.shared.health.borrow().is_degraded() {
            return;
        }
        let reason = format!(
            "its file {} was removed (was the state directory deleted?); jobs under way stay readable until the manager stops, nothing after; stop it (`berth down`) and start again for a fresh store",
            path.display()
        );
        tracing::error!("{reason}");
        self.shared.health.send_replace(StoreHealth::Degraded {
            since: chrono::Utc::now(),
            reason,
        });
    }

    pub fn run(mut self, mut rx: Receiver<Op>, path: &Path) {
        self.file = file_id(path);
        loop {
            self.look(path);
            let wait = match &self.retry {
                Some(r) => r.at.saturating_duration_since(Instant::now()),
                None => BLOCK_AGE,
            };
            #[cfg(test)]
            while self.shared.stall_writes.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            let mut batch = match block_until(rx.recv(), Some(Instant::now() + wait)) {
                Some(Some(op)) => vec![op],
                None => Vec::new(),
                Some(None) => {
                    if self.retry.is_some() {
                        self.try_again(path, true); // a last chance before the handle goes
                    }
                    return;
                }
            };
            // Take whatever else is queued: the busier the jobs, the bigger the batch.
            while !batch.is_empty() && batch.len() < QUEUE_BOUND {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            if !batch.is_empty() {
                self.unstick();
            }
            if self.retry.is_some() {
                self.keep(batch, path);
                if self.retry.as_ref().is_some_and(|r| Instant::now() >= r.at) {
                    self.try_again(path, false);
                }
                continue;
            }
            if batch.is_empty() {
                self.committer.forget_idle();
                continue;
            }
            match self.write_with_retries(&batch, path) {
                Ok(outcomes) => {
                    if batch.iter().any(|op| matches!(op, Op::Checkpoint(_)))
                        && let Err(e) = self.committer.checkpoint()
                    {
                        tracing::warn!(path = %path.display(), error = %e, "could not fold the log into the store");
                    }
                    if !outcomes.is_empty()
                        && let Err(e) = self.committer.give_back_space()
                    {
                        tracing::warn!(path = %path.display(), error = %e, "could not shrink the store after a prune");
                    }
                    self.forget_ended(&batch);
                    answer(batch, Some(outcomes));
                }
                Err(failure) => {
                    self.degrade(&failure, path);
                    self.keep(batch, path);
                }
            }
            self.committer.forget_idle();
        }
    }

    /// Commit `batch`, trying again for a while when the database is busy
    /// or locked (another berth process sharing the state dir holds the
    /// write lock longer than the busy timeout).
    fn write_with_retries(&mut self, batch: &[Op], path: &Path) -> Result<Vec<PruneOutcome>, Failure> {
        let mut delay = RETRY_FIRST;
        let started = Instant::now();
        loop {
            match self.commit(batch) {
                Ok(outcomes) => return Ok(outcomes),
                Err(f) if f.transient && started.elapsed() < RETRY_FOR => {
                    tracing::warn!(path = %path.display(), error = %f.reason, "store busy; writing the batch again");
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(RETRY_MAX_DELAY);
                }
                Err(f) => return Err(f),
            }
        }
    }

    /// One commit; a failure (or a panic) leaves the table as it was.
    fn commit(&mut self, batch: &[Op]) -> Result<Vec<PruneOutcome>, Failure> {
        #[cfg(test)]
        if self.shared.fail_writes.load(std::sync::atomic::Ordering::SeqCst) {
            self.committer.reset();
            return Err(Failure {
                reason: "injected write failure".into(),
                transient: false,
            });
        }
        let committer = &mut self.committer;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| committer.write_batch(batch)));
        let failure = match result {
            Ok(Ok(outcomes)) => return Ok(outcomes),
            Ok(Err(e)) => {
                // Held while degraded: recovery waits for room (`try_again`).
                self.full = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull);
                Failure {
                    transient: is_transient(&e),
                    reason: e.to_string(),
                }
            }
            Err(panic) => Failure {
                reason: panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .map_or_else(
                        || "the writer panicked".into(),
                        |p| format!("the writer panicked: {p}"),
                    ),
                transient: false,
            },
        };
        self.committer.reset();
        Err(failure)
    }

    /// The store cannot write: say so, and try again soon.
    fn degrade(&mut self, failure: &Failure, path: &Path) {
        tracing::error!(
            path = %path.display(),
            error = %failure.reason,
            "the store cannot be written; holding new output in memory and trying again"
        );
        self.shared.health.send_replace(StoreHealth::Degraded {
            since: chrono::Utc::now(),
            reason: failure.reason.clone(),
        });
        if let Some(reserve) = &self.shared.reserve {
            reserve.reason(&failure.reason);
        }
        self.retry = Some(Retry {
            at: Instant::now() + DEGRADED_FIRST,
            delay: DEGRADED_FIRST,
        });
    }

    /// While degraded: hold output, keep records waiting, answer flushes
    /// (held output reads as stored) and refuse prunes.
    fn keep(&mut self, batch: Vec<Op>, path: &Path) {
        let held = &self.shared.held;
        let mut settles = Vec::new();
        for op in batch {
            match op {
                Op::Lines(job, lines) => held.hold(job.as_str(), Piece::Lines(Arc::new(lines))),
                Op::Chunk(job, chunk) => held.hold(job.as_str(), Piece::Chunk(chunk)),
                Op::Event(e) => {
                    if self.waiting.events.len() >= MAX_WAITING_EVENTS {
                        self.waiting.events.pop_front();
                    }
                    self.waiting.events.push_back(e);
                }
                Op::Run(r) => {
                    self.waiting.runs.insert(r.info.id.to_string(), r);
                }
                Op::Flush(f) | Op::Checkpoint(f) => {
                    let _ = f.send(());
                }
                Op::Settle(reply) => settles.push(reply),
                Op::Prune(_, reply) => {
                    let why = match &*self.shared.health.borrow() {
                        StoreHealth::Degraded { reason, .. } => reason.clone(),
                        StoreHealth::Ok => "a write failed".into(),
                    };
                    let _ = reply.send(Err(format!(
                        "the store cannot be written ({why}); nothing was pruned, try again once it recovers"
                    )));
                }
            }
        }
        if !settles.is_empty() {
            self.settle(path);
            for s in settles {
                let _ = s.send(());
            }
        }
    }

    /// Jobs whose end is committed: their record says how far their output
    /// went, the note need not.
    fn forget_ended(&self, batch: &[Op]) {
        let ended: Vec<String> = batch
            .iter()
            .filter_map(|op| match op {
                Op::Run(r) if r.info.status.is_terminal() => Some(r.info.id.to_string()),
                _ => None,
            })
            .collect();
        if !ended.is_empty()
            && let Some(reserve) = &self.shared.reserve
        {
            reserve.ended(&ended);
        }
    }

    /// Shutting down while degraded: give the reserve back, then write
    /// everything; if that still fails, the records alone (each ended run
    /// says its last seq, so its held lines read as lost, not as absent).
    fn settle(&mut self, path: &Path) {
        if let Some(reserve) = &self.shared.reserve {
            reserve.release();
        }
        if self.try_again(path, true) {
            return;
        }
        let mut ops: Vec<Op> = self.waiting.runs.values().map(|r| Op::Run(r.clone())).collect();
        ops.extend(self.waiting.events.iter().map(|e| Op::Event(e.clone())));
        match self.commit(&ops) {
            Ok(_) => {
                self.forget_ended(&ops);
                self.waiting = Waiting::default();
                tracing::warn!(
                    "the store could not take the held output at shutdown; the records say where it ends"
                );
            }
            Err(f) => {
                tracing::error!(error = %f.reason, "the store could not take even the records at shutdown")
            }
        }
    }

    /// Write everything waiting and held in one commit; healthy again when
    /// it takes, else try again later (backoff).
    fn try_again(&mut self, path: &Path, now: bool) -> bool {
        if !now && self.full && free_space(path).is_some_and(|free| free < ROOM) {
            self.later();
            return false;
        }
        let mut ops: Vec<Op> = self.waiting.runs.values().map(|r| Op::Run(r.clone())).collect();
        ops.extend(self.waiting.events.iter().map(|e| Op::Event(e.clone())));
        ops.extend(self.shared.held.ops());
        match self.commit(&ops) {
            Ok(_) => {
                let runs: Vec<Op> = self.waiting.runs.values().map(|r| Op::Run(r.clone())).collect();
                self.forget_ended(&runs);
                if let Some(reserve) = &self.shared.reserve {
                    reserve.reason("");
                }
                self.shared.held.clear();
                self.waiting = Waiting::default();
                self.retry = None;
                self.shared.health.send_replace(StoreHealth::Ok);
                tracing::warn!(path = %path.display(), "the store can be written again; held output and records are stored");
                true
            }
            Err(f) => {
                tracing::debug!(path = %path.display(), error = %f.reason, "the store still cannot be written");
                self.later();
                self.shared.health.send_if_modified(|h| match h {
                    StoreHealth::Degraded { reason, .. } if *reason != f.reason => {
                        *reason = f.reason;
                        true
                    }
                    _ => false,
                });
                false
            }
        }
    }

    /// Try again after a longer pause.
    fn later(&mut self) {
        if let Some(r) = &mut self.retry {
            r.delay = (r.delay * 2).min(DEGRADED_MAX_DELAY);
            r.at = Instant::now() + r.delay;
        }
    }

    /// The writer takes writes again after a sender gave up waiting on it.
    fn unstick(&self) {
        use std::sync::atomic::Ordering;
        if self.shared.stuck.swap(false, Ordering::SeqCst) && self.retry.is_none() {
            self.shared.health.send_replace(StoreHealth::Ok);
        }
    }
}

/// Answer the flushes and prunes of a committed batch.
fn answer(batch: Vec<Op>, outcomes: Option<Vec<PruneOutcome>>) {
    let mut outcomes = outcomes.unwrap_or_default().into_iter();
    for op in batch {
        match op {
            Op::Flush(f) | Op::Checkpoint(f) | Op::Settle(f) => {
                let _ = f.send(());
            }
            Op::Prune(_, reply) => {
                let _ = reply.send(outcomes.next().unwrap_or(Ok(())));
            }
            _ => {}
        }
    }
}
