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
mod retention;
mod schema;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

pub use retention::LINE_OVERHEAD;
pub use schema::{MIGRATIONS, current_version};

use crate::error::{Error, Result};
use crate::model::{Chunk, Event, JobId, JobInfo, Line, Stream};

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

    /// Lines of `job` with seq in `[from, until)`, at most `limit`, oldest first.
    pub fn lines(
        &self,
        job: &JobId,
        from: u64,
        until: u64,
        limit: usize,
        stream: Option<Stream>,
    ) -> Result<Vec<Line>> {
        Ok(self.lines_and_start(job, from, until, limit, stream)?.0)
    }

    /// [`Store::lines`] and, read in the same snapshot, the first seq still
    /// stored ([`Store::dropped_before`]): the writer may drop older lines at
    /// any moment, and a reader must say exactly where its page starts.
    pub fn lines_and_start(
        &self,
        job: &JobId,
        from: u64,
        until: u64,
        limit: usize,
        stream: Option<Stream>,
    ) -> Result<(Vec<Line>, u64)> {
        let mut conn = self.reader.lock().unwrap();
        let err = |e| db_err(&self.path, e);
        let tx = conn.transaction().map_err(err)?;
        let start = dropped_before(&tx, job).map_err(err)?;
        let lines = blocks::lines(&tx, job.as_str(), from.max(start), until, limit, stream).map_err(err)?;
        tx.commit().map_err(err)?;
        Ok((lines, start))
    }

    /// The last `n` lines of `job` before seq `until`, oldest first.
    pub fn tail(&self, job: &JobId, n: usize, until: u64, stream: Option<Stream>) -> Result<Vec<Line>> {
        let conn = self.reader.lock().unwrap();
        blocks::tail(&conn, job.as_str(), n, until, stream).map_err(|e| db_err(&self.path, e))
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

    /// The first seq of `job` still stored after the per-job cap dropped its
    /// oldest lines (1 when nothing was dropped).
    pub fn dropped_before(&self, job: &JobId) -> Result<u64> {
        let conn = self.reader.lock().unwrap();
        dropped_before(&conn, job).map_err(|e| db_err(&self.path, e))
    }

    /// Highest stored seq of `job` (0 = none).
    pub fn last_seq(&self, job: &JobId) -> Result<u64> {
        let conn = self.reader.lock().unwrap();
        blocks::last_seq(&conn, job.as_str()).map_err(|e| db_err(&self.path, e))
    }

    /// Stored line counts of `job` per stream: (stdout, stderr).
    pub fn line_counts(&self, job: &JobId) -> Result<(u64, u64)> {
        let conn = self.reader.lock().unwrap();
        blocks::line_counts(&conn, job.as_str()).map_err(|e| db_err(&self.path, e))
    }

    /// Every stored run, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRow>> {
        let conn = self.reader.lock().unwrap();
        let mut stmt = conn
            .prepare("SELECT info, instance, owner, pgid, pid_start_time FROM runs ORDER BY number")
            .map_err(|e| db_err(&self.path, e))?;
        let rows = stmt
            .query_map([], |r| {
                let info: String = r.get(0)?;
                Ok((info, r.get(1)?, r.get(2)?, r.get(3)?, r.get::<_, Option<i64>>(4)?))
            })
            .map_err(|e| db_err(&self.path, e))?;
        let mut out = Vec::new();
        for row in rows {
            let (info, instance, owner, pgid, start) = row.map_err(|e| db_err(&self.path, e))?;
            match serde_json::from_str::<JobInfo>(&info) {
                Ok(info) => out.push(RunRow {
                    info,
                    instance,
                    owner,
                    pgid,
                    pid_start_time: start.map(|s| s as u64),
                }),
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable run record"),
            }
        }
        Ok(out)
    }

    /// Stored events with seq ≥ `since`, at most `limit`.
    pub fn events(&self, since: u64, limit: usize) -> Result<Vec<Event>> {
        let conn = self.reader.lock().unwrap();
        let mut stmt = conn
            .prepare_cached("SELECT body FROM events WHERE seq >= ?1 ORDER BY seq LIMIT ?2")
            .map_err(|e| db_err(&self.path, e))?;
        let rows = stmt
            .query_map(params![since as i64, limit as i64], |r| r.get::<_, String>(0))
            .map_err(|e| db_err(&self.path, e))?;
        let mut out = Vec::new();
        for body in rows {
            let body = body.map_err(|e| db_err(&self.path, e))?;
            if let Ok(e) = serde_json::from_str(&body) {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// Highest stored event seq (0 = none).
    pub fn max_event_seq(&self) -> Result<u64> {
        let conn = self.reader.lock().unwrap();
        conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| {
            r.get::<_, i64>(0)
        })
        .map(|v| v as u64)
        .map_err(|e| db_err(&self.path, e))
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

fn dropped_before(conn: &Connection, job: &JobId) -> rusqlite::Result<u64> {
    conn.query_row(
        "SELECT COALESCE(MAX(dropped_before), 1) FROM output_meta WHERE job = ?1",
        [job.as_str()],
        |r| r.get::<_, i64>(0),
    )
    .map(|v| v.max(1) as u64)
}

/// Look up one stored run by id (for tests and tools).
pub fn find_run(store: &Store, id: &JobId) -> Result<Option<RunRow>> {
    Ok(store.runs()?.into_iter().find(|r| &r.info.id == id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{JobSpec, JobStatus, LogPaths, StartMode};
    use chrono::Utc;

    fn info(n: u64) -> JobInfo {
        JobInfo {
            id: JobId::from_number(n),
            label: "x".into(),
            command: "x".into(),
            spec: JobSpec::argv(["x"]),
            runner: None,
            runner_note: None,
            workspace: None,
            project_note: None,
            recovered: false,
            status: JobStatus::Exited { code: 0 },
            start_mode: StartMode::Background,
            created_at: Utc::now(),
            started_at: None,
            ended_at: None,
            exit_code: Some(0),
            ended_by: None,
            reason: None,
            promotion_reason: None,
            pid: Some(42),
            container_id: None,
            ports: vec![],
            limits: Default::default(),
            usage: None,
            logs: LogPaths {
                stdout: "/o".into(),
                stderr: "/e".into(),
            },
            last_seq: 0,
            queue_position: None,
            image: None,
            pulling: None,
            building: None,
        }
    }

    #[test]
    fn an_older_schema_is_upgraded_in_place_keeping_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("berth.db");
        {
            // A database as version 1 of berth left it.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            let body = serde_json::to_string(&info(7)).unwrap();
            conn.execute(
                "INSERT INTO runs (id, number, status, info, updated_at) VALUES ('job-7', 7, 'success', ?1, 'then')",
                [body],
            )
            .unwrap();
            conn.execute("INSERT INTO lines VALUES ('job-7', 1, 0, 0, 'kept')", [])
                .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let version: u32 = store
            .reader
            .lock()
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, current_version());
        let runs = store.runs().unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].info.id.as_str(), "job-7");
        assert_eq!(runs[0].pgid, None, "new columns start empty");
        let lines = store.lines(&JobId::from_number(7), 1, 10, 10, None).unwrap();
        assert_eq!(lines[0].text, "kept");
        // Writing the new columns works on the upgraded database.
        store.put_run(RunRow {
            info: info(8),
            instance: "i".into(),
            owner: "1:2".into(),
            pgid: Some(42),
            pid_start_time: Some(99),
        });
        store.flush();
        let row = find_run(&store, &JobId::from_number(8)).unwrap().unwrap();
        assert_eq!(
            (row.pgid, row.pid_start_time, row.owner.as_str()),
            (Some(42), Some(99), "1:2")
        );
    }

    #[test]
    fn replays_never_duplicate_and_pages_come_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("berth.db")).unwrap();
        let job = JobId::from_number(1);
        let line = |seq: u64| Line {
            seq,
            stream: if seq.is_multiple_of(2) {
                Stream::Stderr
            } else {
                Stream::Stdout
            },
            ts: Utc::now(),
            text: format!("l{seq}"),
        };
        store.put_lines(&job, (1..=10).map(line).collect());
        store.put_lines(&job, (5..=12).map(line).collect()); // a replay overlapping
        store.flush();
        let all = store.lines(&job, 1, u64::MAX, 100, None).unwrap();
        assert_eq!(
            all.iter().map(|l| l.seq).collect::<Vec<_>>(),
            (1..=12).collect::<Vec<_>>()
        );
        assert_eq!(store.last_seq(&job).unwrap(), 12);
        assert_eq!(store.line_counts(&job).unwrap(), (6, 6));
        let tail = store.tail(&job, 3, 13, Some(Stream::Stdout)).unwrap();
        assert_eq!(tail.iter().map(|l| l.seq).collect::<Vec<_>>(), vec![7, 9, 11]);
    }

    /// The writer forgets a job once its end is recorded (a finished job
    /// costs it no memory); a line that still comes continues its output
    /// from the table, without a gap or a duplicate.
    #[test]
    fn lines_after_a_jobs_recorded_end_continue_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("berth.db")).unwrap();
        let job = JobId::from_number(3);
        let line = |seq: u64| Line {
            seq,
            stream: Stream::Stdout,
            ts: Utc::now(),
            text: format!("l{seq}"),
        };
        store.put_lines(&job, (1..=5).map(line).collect());
        let row = |info| RunRow {
            info,
            instance: "i".into(),
            owner: "1:2".into(),
            pgid: None,
            pid_start_time: None,
        };
        store.put_run(row(info(3)));
        // Its own batch: the writer has forgotten the job by then.
        store.flush();
        store.put_lines(&job, (4..=8).map(line).collect());
        store.flush();
        let all = store.lines(&job, 1, u64::MAX, 100, None).unwrap();
        assert_eq!(
            all.iter().map(|l| l.seq).collect::<Vec<_>>(),
            (1..=8).collect::<Vec<_>>()
        );
        assert_eq!(store.last_seq(&job).unwrap(), 8);
    }
}
