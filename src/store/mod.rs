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
//!
//! The handle's side of the queue (room, bounded waits, health) is
//! `queue.rs`. Faults are a state, not a crash (`held.rs`): when the disk is full or
//! failing the writer keeps taking writes, holds the newest output of each
//! job in memory, keeps records waiting, says the store is degraded
//! ([`StoreHealth`]), and tries again until it can write. A writer that
//! takes nothing for [`STUCK_LIMIT`] while writes wait (a hung disk) is
//! reported the same way, and writes stop waiting for it: no job, reader or
//! shutdown ever waits on the disk for good.

mod blocks;
mod commit;
pub mod damage;
mod held;
mod persist;
pub mod private;
mod queue;
mod read;
mod reserve;
mod retention;
mod scan;
mod schema;
mod wait;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

pub use crate::persist::StoredPage;
pub use held::StoreHealth;
use queue::Shared;
pub use queue::off_worker;
pub use read::find_run;
pub use reserve::HeldNote;
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

/// Output held in memory per job while the store cannot write (the size of
/// a job's ring by default, see `output::DEFAULT_RING_BYTES`).
pub const DEFAULT_HELD_PER_JOB: usize = 4 * 1024 * 1024;

/// How long a write waits for room in a full queue before the store is
/// reported stuck and writes stop waiting (they are dropped, said as lost
/// lines, until the writer takes writes again).
pub const STUCK_LIMIT: Duration = Duration::from_secs(10);

/// How long [`Store::flush`] waits for the writer.
const FLUSH_LIMIT: Duration = Duration::from_secs(10);

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
type PruneReply = oneshot::Sender<std::result::Result<(), String>>;

enum Op {
    Lines(JobId, Vec<Line>),
    /// A read's lines, shared with the job's ring (encoded, never copied).
    Chunk(JobId, Arc<Chunk>),
    Event(Box<Event>),
    Run(Box<RunRow>),
    Flush(oneshot::Sender<()>),
    /// Fold the write-ahead log into the database and empty it (a clean
    /// shutdown: the next start finds no log to trust or doubt).
    Checkpoint(oneshot::Sender<()>),
    /// Shutting down while degraded: give the reserve back and write what
    /// can be written, the records first (see `reserve.rs`).
    Settle(oneshot::Sender<()>),
    /// Delete these runs and everything stored for them; answer when done
    /// (after the freed space went back to the file system).
    Prune(Vec<String>, PruneReply),
}

/// Handle to an instance's database.
pub struct Store {
    path: PathBuf,
    /// The per-job output budget: lines here plus the job's raw log files.
    max_job_bytes: u64,
    tx: mpsc::Sender<Op>,
    shared: Arc<Shared>,
    reader: Mutex<Connection>,
    /// Held shared while the store is open: only a process that has the
    /// store alone checks it for damage (`damage.rs`).
    _lock: Option<std::fs::File>,
    /// What to tell the user about the store's history: found damaged and
    /// started afresh, records found missing at recovery.
    notices: Mutex<Vec<String>>,
    /// Output a manager that died held in memory (`reserve.rs`).
    held_note: Option<HeldNote>,
}

fn db_err(path: &Path, e: rusqlite::Error) -> Error {
    let hint = match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            " (the store is damaged: `berth doctor` checks it and moves it aside)"
        }
        _ => "",
    };
    Error::Store {
        path: path.to_path_buf(),
        message: format!("{e}{hint}"),
    }
}

fn connect(path: &Path) -> Result<Connection> {
    connect_raw(path).map_err(|e| db_err(path, e))
}

fn connect_raw(path: &Path) -> rusqlite::Result<Connection> {
    // Connections opened at once on a new file (parallel `berth run`s with no
    // daemon) race to turn on WAL; SQLite answers the loser "locked" without
    // waiting on its busy timeout, so the loser tries again for a while.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match configure(path) {
            Err(e) if commit::is_transient(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// The writer's connection, the store migrated: its schema version before.
fn open_writer(path: &Path) -> rusqlite::Result<(Connection, u32)> {
    let mut writer = connect_raw(path)?;
    let from = schema::migrate(&mut writer)?;
    Ok((writer, from))
}

/// [`open_writer`]; on a full disk (a manager that stopped or died while
/// degraded left it full: opening a store whose log must be replayed needs
/// room) the reserve's ballast is given back and the open tried again; if
/// the ballast went already (a manager that settled at shutdown spent it),
/// the jobs' rotated raw logs (`*.log.1`, copies the store does not need:
/// the next rotation removes them anyway) are removed for room. So the next
/// manager starts degraded instead of not at all.
fn open_writer_or_give_back(path: &Path) -> Result<(Connection, u32)> {
    let full = |r: &rusqlite::Result<(Connection, u32)>| matches!(r, Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull));
    let mut opened = open_writer(path);
    if full(&opened) && reserve::give_back(path) {
        tracing::warn!(path = %path.display(), "the disk is full: the store's reserve was given back to open it");
        opened = open_writer(path);
    }
    if full(&opened) && remove_rotated_logs(path) > 0 {
        tracing::warn!(path = %path.display(), "the disk is full: the jobs' rotated raw logs were removed to open the store");
        opened = open_writer(path);
    }
    opened.map_err(|e| db_err(path, e))
}

/// Remove the rotated raw logs (`jobs/*/std{out,err}.log.1`) beside
/// database `db`; how many went.
fn remove_rotated_logs(db: &Path) -> usize {
    let jobs = db.with_file_name("jobs");
    let Ok(dirs) = std::fs::read_dir(&jobs) else {
        return 0;
    };
    let rotated = dirs
        .flatten()
        .flat_map(|job| ["stdout.log.1", "stderr.log.1"].map(|f| job.path().join(f)));
    rotated.filter(|f| std::fs::remove_file(f).is_ok()).count()
}

/// One connection with berth's settings (see [`connect`]).
fn configure(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    // Only takes effect on a new database: pages that fit a whole 4 KiB line
    // (SQLite's default 4 KiB page would spill each such row to overflow pages).
    conn.pragma_update(None, "page_size", 16384)?;
    // Only takes effect on a new database: lets a prune give space back to
    // the file system page by page instead of a blocking VACUUM.
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Keep the WAL small: checkpoint every 4 MiB (256 pages of 16 KiB) and
    // truncate the file back to 4 MiB after a checkpoint.
    conn.pragma_update(None, "wal_autocheckpoint", 256)?;
    conn.pragma_update(None, "journal_size_limit", 4 * 1024 * 1024)?;
    // A small page cache (512 KiB, not SQLite's 2 MiB) per connection: output
    // is appended and read once in order, so a big cache mostly holds pages
    // of jobs that ended, and a long-lived daemon would keep it for good.
    conn.pragma_update(None, "cache_size", -512)?;
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
        Self::open_with(path, max_job_bytes, DEFAULT_HELD_PER_JOB)
    }

    /// [`Store::open_capped`] holding at most `held_per_job` bytes of each
    /// job's output in memory while the store cannot write.
    pub fn open_with(path: &Path, max_job_bytes: u64, held_per_job: usize) -> Result<Arc<Store>> {
        Self::open_inner(path, max_job_bytes, held_per_job, true)
    }

    /// [`Store::open`] without the damage check (the crash watchdog: it
    /// reaps what records it can read and leaves repairs to the next manager).
    pub fn open_unchecked(path: &Path) -> Result<Arc<Store>> {
        Self::open_inner(path, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_HELD_PER_JOB, false)
    }

    fn open_inner(path: &Path, max_job_bytes: u64, held_per_job: usize, check: bool) -> Result<Arc<Store>> {
        if let Some(dir) = path.parent() {
            private::own_dir(dir).map_err(|e| Error::io("create state directory", dir, e))?;
        }
        let (lock, notice) = Self::check_alone(path, check)?;
        // Created 0600 before SQLite opens it: SQLite gives its -wal and -shm
        // files the database's mode; ones left by an older berth are fixed.
        private::open(
            std::fs::OpenOptions::new().read(true).append(true).create(true),
            path,
        )
        .map_err(|e| Error::io("create", path, e))?;
        let (writer, from) = open_writer_or_give_back(path)?;
        for suffix in ["-wal", "-shm", "-journal"] {
            let mut side = path.as_os_str().to_owned();
            side.push(suffix);
            let side = PathBuf::from(side);
            private::restrict(&side, private::FILE_MODE).map_err(|e| Error::io("restrict", &side, e))?;
        }
        if from != current_version() {
            tracing::info!(path = %path.display(), from, to = current_version(), "store upgraded");
        }
        let reader = connect(path)?;
        let (tx, rx) = mpsc::channel(QUEUE_BOUND);
        let wpath = path.to_path_buf();
        // The watchdog (no check) reads the note and leaves it to the next
        // manager; it never writes the note nor the ballast back.
        let (reserve, held_note) = reserve::Reserve::open(path, check);
        let shared = Arc::new(Shared::new(held_per_job, Some(reserve)));
        let wshared = shared.clone();
        std::thread::Builder::new()
            .name("berth-store".into())
            .spawn(move || writer::Writer::new(writer, max_job_bytes / 8 * 7, wshared).run(rx, &wpath))
            .map_err(|e| Error::io("start store writer for", path, e))?;
        Ok(Arc::new(Store {
            path: path.to_path_buf(),
            max_job_bytes,
            tx,
            shared,
            reader: Mutex::new(reader),
            _lock: Some(lock),
            notices: Mutex::new(notice.into_iter().collect()),
            held_note,
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
            // A damaged file can read as any version: say which it is.
            if let Err(damage::Damage(what)) = damage::quick_check(path) {
                return Err(Error::Store {
                    path: path.to_path_buf(),
                    message: format!(
                        "{what} (the store is damaged: `berth doctor` checks it and moves it aside)"
                    ),
                });
            }
            return Err(Error::Store {
                path: path.to_path_buf(),
                message: format!(
                    "schema version {version}, this berth reads {}: start a daemon (`berth up`) to upgrade it",
                    current_version()
                ),
            });
        }
        // No writer: the receiving end is dropped at once.
        let (tx, _) = mpsc::channel(1);
        Ok(Arc::new(Store {
            shared: Arc::new(Shared::new(1, None)),
            path: path.to_path_buf(),
            max_job_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            tx,
            reader: Mutex::new(conn),
            _lock: None,
            notices: Mutex::default(),
            held_note: None,
        }))
    }

    /// When no other process has the store open: check it, and move a
    /// damaged one aside (saying so loudly) so that a fresh one starts.
    /// Returns the store's lock, held shared from then on, and what to say.
    fn check_alone(path: &Path, check: bool) -> Result<(std::fs::File, Option<String>)> {
        let lock = damage::lock_file(path).map_err(|e| Error::io("open", path, e))?;
        let mut notice = None;
        if check
            && lock.try_lock().is_ok()
            && let Err(damage::Damage(what)) = damage::check(path)
        {
            let aside =
                damage::move_aside(path).map_err(|e| Error::io("move aside the damaged store", path, e))?;
            let say = format!(
                "the store {} was damaged ({what}): it was moved aside to {} and a fresh one started; the runs it held are no longer listed, and what they left running is reaped",
                path.display(),
                aside.display()
            );
            tracing::error!("{say}");
            notice = Some(say);
        }
        lock.lock_shared().map_err(|e| Error::io("lock", path, e))?;
        Ok((lock, notice))
    }

    /// What to tell the user about the store, when it was found damaged
    /// and started afresh.
    pub fn notice(&self) -> Option<String> {
        let notices = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        (!notices.is_empty()).then(|| notices.join("; "))
    }

    /// Job `job`'s output reached seq `last`: noted in the reserve before
    /// any reader sees it, so a manager killed now leaves whoever reaps its
    /// runs how far their output went (`reserve.rs`).
    pub fn took(&self, job: &JobId, last: u64) {
        if let Some(r) = &self.shared.reserve {
            r.took(job.as_str(), last);
        }
    }

    /// Add to what [`Store::notice`] says (e.g. records found missing).
    pub fn add_notice(&self, say: String) {
        tracing::error!("{say}");
        self.notices.lock().unwrap_or_else(|p| p.into_inner()).push(say);
    }

    /// The last seq and reason a dead manager noted for `job`'s output
    /// held in memory while the store could not write (`reserve.rs`).
    pub fn held_at_death(&self, job: &JobId) -> Option<(u64, &str)> {
        let note = self.held_note.as_ref()?;
        Some((*note.jobs.get(job.as_str())?, note.reason.as_str()))
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
}

/// Hold the reader connection, as a long page read does (tests of callers
/// that must not wait for it on an async worker).
#[cfg(test)]
impl Store {
    pub(crate) fn hold_reader(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.reader.lock().unwrap()
    }
}

#[cfg(test)]
mod tests;
