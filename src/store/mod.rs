//! The durable store: one SQLite database per instance (`<instance>/berth.db`,
//! WAL) holding runs, events and every output line, so that output can be
//! paged by seq however long a job ran, records survive a restart, and the
//! crash watchdog knows which processes belong to the instance.
//!
//! Theory of operation. All writes go through one writer thread fed by a
//! bounded channel: it takes whatever is queued and commits it as one
//! transaction, so under load batches grow by themselves and under light load
//! each write lands within a few milliseconds (well inside the ~100 ms
//! promise). The bound is the backpressure that keeps memory flat when a job
//! prints faster than the disk takes it: its reader waits, and so does the job
//! on its pipe. Reads use their own connection (WAL lets them run beside the
//! writer). Output is stored in blocks of lines (`blocks.rs`), one row per
//! ~64 KiB, addressed by seq; the writer drops lines at or below a job's last
//! stored seq, so a replay never duplicates.

mod blocks;
mod persist;
pub mod private;
mod read;
mod retention;
mod schema;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

pub use read::find_run;
pub use retention::LINE_OVERHEAD;
pub use schema::{MIGRATIONS, current_version};

use crate::error::{Error, Result};
use crate::model::{Chunk, Event, JobId, JobInfo, Line};

/// Queued writes before a writer must wait. A write is one chunk of output
/// (up to 64 KiB of lines), so this bounds what waits for the disk to ~1 MiB.
const QUEUE_BOUND: usize = 16;

/// Most output stored per job (`max_output`); beyond it the oldest lines
/// are dropped (said as `truncated_before`).
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 256 * 1024 * 1024;

/// A run as stored, with what recovery and the watchdog need beside the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub info: JobInfo,
    pub instance: String,
    /// `pid:start_time` of the manager that owns the run.
    pub owner: String,
    pub pgid: Option<i32>,
    /// Start time (clock ticks since boot) of the job's leader process.
    pub pid_start_time: Option<u64>,
}

/// Where the writer answers a prune: `Err` carries the database's message.
type PruneReply = std::sync::mpsc::Sender<std::result::Result<(), String>>;

enum Op {
    Lines(JobId, Vec<Line>),
    /// A read's lines, shared with the job's ring (encoded, never copied).
    Chunk(JobId, Arc<Chunk>),
    Event(Box<Event>),
    Run(Box<RunRow>),
    Flush(std::sync::mpsc::Sender<()>),
    /// Delete these runs and everything stored for them; answer when done
    /// (after the freed space went back to the file system).
    Prune(Vec<String>, PruneReply),
}

/// How many writes are queued, so that an async producer can wait for room
/// without blocking its thread (see [`Store::room`]).
#[derive(Default)]
pub(crate) struct Room {
    queued: std::sync::atomic::AtomicUsize,
    freed: tokio::sync::Notify,
}

impl Room {
    /// The writer took `n` writes off the queue.
    fn taken(&self, n: usize) {
        self.queued.fetch_sub(n, std::sync::atomic::Ordering::SeqCst);
        self.freed.notify_waiters();
    }
}

/// Handle to an instance's database.
pub struct Store {
    path: PathBuf,
    /// The per-job output budget: lines here plus the job's raw log files.
    max_job_bytes: u64,
    tx: SyncSender<Op>,
    room: Arc<Room>,
    reader: Mutex<Connection>,
}

fn db_err(path: &Path, e: rusqlite::Error) -> Error {
    Error::Store {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

fn connect(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path).map_err(|e| db_err(path, e))?;
    // Only takes effect on a new database: pages that fit a whole 4 KiB line
    // (SQLite's default 4 KiB page would spill each such row to overflow pages).
    conn.pragma_update(None, "page_size", 16384)
        .map_err(|e| db_err(path, e))?;
    // Only takes effect on a new database: lets a prune give space back to
    // the file system page by page instead of a blocking VACUUM.
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
        .map_err(|e| db_err(path, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| db_err(path, e))?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| db_err(path, e))?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| db_err(path, e))?;
    // Keep the WAL small: checkpoint every 4 MiB (256 pages of 16 KiB) and
    // truncate the file back to 4 MiB after a checkpoint.
    conn.pragma_update(None, "wal_autocheckpoint", 256)
        .map_err(|e| db_err(path, e))?;
    conn.pragma_update(None, "journal_size_limit", 4 * 1024 * 1024)
        .map_err(|e| db_err(path, e))?;
    // A small page cache (512 KiB, not SQLite's 2 MiB) per connection: output
    // is appended and read once in order, so a big cache mostly holds pages
    // of jobs that ended, and a long-lived daemon would keep it for good.
    conn.pragma_update(None, "cache_size", -512)
        .map_err(|e| db_err(path, e))?;
    Ok(conn)
}

/// What an `env` value is stored as when `store_env` is off.
pub const REDACTED: &str = "***";

/// Replace every `env` value by [`REDACTED`], keeping the names.
pub fn redact_env(env: &mut std::collections::BTreeMap<String, String>) {
    for v in env.values_mut() {
        *v = REDACTED.to_string();
    }
}

/// True when `env` came back from the store redacted (it cannot be re-run).
pub fn env_redacted(env: &std::collections::BTreeMap<String, String>) -> bool {
    !env.is_empty() && env.values().all(|v| v == REDACTED)
}

impl Store {
    /// Open (creating or upgrading) the database at `path` and start its
    /// writer, with the default per-job output cap.
    pub fn open(path: &Path) -> Result<Arc<Store>> {
        Self::open_capped(path, DEFAULT_MAX_OUTPUT_BYTES)
    }

    /// [`Store::open`] keeping at most `max_job_bytes` of output per job: 7/8
    /// of it for lines in the database, 1/8 for the raw log files (two files
    /// per stream, rotated at [`Store::raw_file_cap`]).
    pub fn open_capped(path: &Path, max_job_bytes: u64) -> Result<Arc<Store>> {
        if let Some(dir) = path.parent() {
            private::own_dir(dir).map_err(|e| Error::io("create state directory", dir, e))?;
        }
        // Created 0600 before SQLite opens it: SQLite gives its -wal and -shm
        // files the database's mode; ones left by an older berth are fixed.
        private::open(
            std::fs::OpenOptions::new().read(true).append(true).create(true),
            path,
        )
        .map_err(|e| Error::io("create", path, e))?;
        let mut writer = connect(path)?;
        for suffix in ["-wal", "-shm", "-journal"] {
            let mut side = path.as_os_str().to_owned();
            side.push(suffix);
            let side = PathBuf::from(side);
            private::restrict(&side, private::FILE_MODE).map_err(|e| Error::io("restrict", &side, e))?;
        }
        let from = schema::migrate(&mut writer).map_err(|e| db_err(path, e))?;
        if from != current_version() {
            tracing::info!(path = %path.display(), from, to = current_version(), "store upgraded");
        }
        let reader = connect(path)?;
        let (tx, rx) = sync_channel(QUEUE_BOUND);
        let wpath = path.to_path_buf();
        let room = Arc::new(Room::default());
        let wroom = room.clone();
        std::thread::Builder::new()
            .name("berth-store".into())
            .spawn(move || writer::Writer::new(writer, max_job_bytes / 8 * 7).run(rx, &wroom, &wpath))
            .map_err(|e| Error::io("start store writer for", path, e))?;
        Ok(Arc::new(Store {
            path: path.to_path_buf(),
            max_job_bytes,
            tx,
            room,
            reader: Mutex::new(reader),
        }))
    }

    /// Open an existing database for reading only: no migration, no writer,
    /// nothing created or changed, so a reader (the CLI without a daemon)
    /// never gets in the way of a manager opening the same store. Writes
    /// through this handle are dropped with an error in the log.
    pub fn open_read_only(path: &Path) -> Result<Arc<Store>> {
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| db_err(path, e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| db_err(path, e))?;
        let version: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| db_err(path, e))?;
        if version != current_version() {
            return Err(Error::Store {
                path: path.to_path_buf(),
                message: format!(
                    "schema version {version}, this berth reads {}: start a daemon (`berth up`) to upgrade it",
                    current_version()
                ),
            });
        }
        // No writer: the receiving end is dropped at once.
        let (tx, _) = sync_channel(1);
        Ok(Arc::new(Store {
            room: Arc::default(),
            path: path.to_path_buf(),
            max_job_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            tx,
            reader: Mutex::new(conn),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size at which a job's raw `stdout.log`/`stderr.log` is rotated to
    /// `*.log.1` (the previous `.1` is dropped): the raw files of a job never
    /// hold more than 1/8 of its output budget. The store has every line.
    pub fn raw_file_cap(&self) -> u64 {
        (self.max_job_bytes / 32).max(64 * 1024)
    }

    /// Queue `op`, waiting (without stalling other tasks) while the queue is full.
    fn send(&self, op: Op) {
        self.room.queued.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match self.tx.try_send(op) {
            Ok(()) => {}
            Err(TrySendError::Full(op)) => {
                // The writer is its own thread: blocking here cannot deadlock.
                if wait_for_writer(|| self.tx.send(op)).is_err() {
                    self.room.taken(1);
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                self.room.taken(1);
                tracing::error!("store writer is gone");
            }
        }
    }

    /// Wait until the write queue has room. An async producer (a pipe's
    /// reader) waits here, so that its next write rarely finds the queue
    /// full: blocking then takes its worker thread out of the runtime, and
    /// the threads started in its place each grew a malloc arena of their
    /// own that a long-lived daemon kept.
    pub async fn room(&self) {
        loop {
            let freed = self.room.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.room.queued.load(std::sync::atomic::Ordering::SeqCst) < QUEUE_BOUND {
                return;
            }
            freed.await;
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

    /// Wait until everything queued so far is committed.
    pub fn flush(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        self.send(Op::Flush(tx));
        wait_for_writer(|| rx.recv().ok());
    }

    /// Delete the runs `jobs` and everything stored for them (lines, events).
    pub fn prune(&self, jobs: &[JobId]) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let ids = jobs.iter().map(|j| j.to_string()).collect();
        self.send(Op::Prune(ids, tx));
        let answer = wait_for_writer(|| rx.recv());
        let message = match answer {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(message)) => message,
            Err(_) => "the store writer is gone".into(),
        };
        Err(Error::Store {
            path: self.path.clone(),
            message,
        })
    }
}

/// Run `wait` (a blocking wait on the writer thread) without stalling the
/// other tasks of a multi-threaded runtime.
fn wait_for_writer<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

#[cfg(test)]
mod tests;
