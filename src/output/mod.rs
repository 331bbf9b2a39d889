//! A job's output: bytes from stdout and stderr become numbered lines.
//!
//! Theory of operation. Each stream has its own [`StreamWriter`], owned by the
//! task that reads the stream; it appends raw bytes to `stdout.log`/`stderr.log`
//! (so `tail -f` works), splits them into lines ([`LineSplitter`]) and hands the
//! lines of each read, as one [`Chunk`] (one buffer, not a string per line), to
//! the shared [`JobOutput`]. There (`ingest.rs`), under one short lock per
//! chunk, the lines get the job's next `seq`s (one contiguous space for both
//! streams, in arrival order), are checked by the watchers, and the chunk is
//! pushed into a ring bounded in bytes (whole chunks leave it) and queued,
//! shared, for durable storage (an [`OutputStore`], the SQLite store in
//! practice) in seq order. Readers page by seq (`read.rs`): recent lines come
//! from the ring, older ones from the store, so the whole output stays
//! pageable (also after a restart) while memory stays bounded. Followers
//! (`follow.rs`) get one stream of batches that pages the same way and waits
//! for new lines, so a slow reader never holds the job up. Once both streams
//! ended the ring is let go (only the snippet is kept): a finished job's
//! output is read from the store, so it costs O(1) memory however much it
//! printed.

mod batch;
mod follow;
mod ingest;
mod read;
mod split;
mod writer;

pub use crate::model::{Chunk, LineBuf};
pub use batch::{Batch, FollowPage};
pub use split::LineSplitter;
pub use writer::StreamWriter;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::events::{EventKind, EventLog};
use crate::model::{JobId, LogPaths};
pub use crate::model::{Line, LogPage, LogQuery, Stream};
use crate::persist::OutputStore;
use crate::watch::Watchers;
use ingest::Ring;

/// Lines longer than this are split into several lines.
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Default bound of the in-memory ring per job.
pub const DEFAULT_RING_BYTES: usize = 4 * 1024 * 1024;
/// Size of a snippet (the tail shown on cards and in polls).
pub const SNIPPET_BYTES: usize = 1536;
/// Most lines one read answers (a page): a reader asks again from
/// `next_seq`, so one read never holds a whole big job in memory.
pub const PAGE_LINES: usize = 10_000;
/// Most text one read answers (at least one line, so about this much).
pub const PAGE_BYTES: usize = 2 * 1024 * 1024;

impl std::str::FromStr for Stream {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "stdout" => Ok(Stream::Stdout),
            "stderr" => Ok(Stream::Stderr),
            _ => Err(Error::InvalidValue {
                what: "stream",
                input: s.into(),
                message: "expected stdout or stderr".into(),
            }),
        }
    }
}

/// Lines `range` of a chunk.
pub type ChunkPiece = (Arc<Chunk>, std::ops::Range<usize>);

/// Progress published to waiters after every chunk.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Progress {
    pub last_seq: u64,
    /// Both streams have ended and every line is in.
    pub closed: bool,
}

/// The output of one job, shared by its stream writers and its readers.
pub struct JobOutput {
    job: JobId,
    dir: PathBuf,
    ring: Mutex<Ring>,
    watchers: Watchers,
    events: Arc<EventLog>,
    store: Arc<dyn OutputStore>,
    progress: watch::Sender<Progress>,
    /// Watch hits held back until the job's `started` event is out (see
    /// [`JobOutput::hold_events`]); `None` when events go out at once.
    held: Mutex<Option<Vec<EventKind>>>,
    /// Held from taking seqs until the lines are queued for the store, so the
    /// store receives each job's lines in seq order (its blocks have no holes).
    /// Readers never take it: only the two stream writers wait on each other.
    to_store: Mutex<()>,
    /// The snippet of a job whose output ended (its ring is gone by then).
    final_snippet: Mutex<Option<String>>,
    /// Told when the foreground reader read on (or went).
    reader_moved: tokio::sync::Notify,
}

impl JobOutput {
    /// The job's private directory (raw logs, and files berth makes for it).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Create the job's output, its directory `dir` (`<state>/jobs/<id>`) and
    /// its first line number `first_seq` (1, or the next one when re-adopting).
    pub fn create(
        job: JobId,
        dir: &Path,
        max_bytes: usize,
        watchers: Watchers,
        events: Arc<EventLog>,
        store: Arc<dyn OutputStore>,
        first_seq: u64,
    ) -> Result<Arc<Self>> {
        if let Some(jobs) = dir.parent() {
            crate::store::private::own_dir(jobs).map_err(|e| Error::io("create log directory", jobs, e))?;
        }
        crate::store::private::own_dir(dir).map_err(|e| Error::io("create log directory", dir, e))?;
        let ring = Ring::new(max_bytes, first_seq.max(1), 2);
        let progress = Progress {
            last_seq: first_seq.saturating_sub(1),
            closed: false,
        };
        Ok(Self::assemble(job, dir, ring, progress, watchers, events, store))
    }

    /// The output of a job that ended before this manager started: every line
    /// is in the store.
    pub fn finished(
        job: JobId,
        dir: &Path,
        events: Arc<EventLog>,
        store: Arc<dyn OutputStore>,
        last_seq: u64,
    ) -> Arc<Self> {
        let ring = Ring::new(1, last_seq + 1, 0);
        let progress = Progress {
            last_seq,
            closed: true,
        };
        Self::assemble(job, dir, ring, progress, Watchers::default(), events, store)
    }

    fn assemble(
        job: JobId,
        dir: &Path,
        ring: Ring,
        progress: Progress,
        watchers: Watchers,
        events: Arc<EventLog>,
        store: Arc<dyn OutputStore>,
    ) -> Arc<Self> {
        Arc::new(JobOutput {
            job,
            dir: dir.to_path_buf(),
            ring: Mutex::new(ring),
            watchers,
            events,
            store,
            progress: watch::channel(progress).0,
            held: Mutex::new(None),
            to_store: Mutex::new(()),
            final_snippet: Mutex::new(None),
            reader_moved: tokio::sync::Notify::new(),
        })
    }

    pub fn paths(&self) -> LogPaths {
        LogPaths {
            stdout: self.dir.join("stdout.log"),
            stderr: self.dir.join("stderr.log"),
        }
    }

    /// A writer for one stream; give it to the task reading that stream.
    pub fn writer(self: &Arc<Self>, stream: Stream) -> Result<StreamWriter> {
        StreamWriter::new(self, stream)
    }

    /// Watch progress (new lines, end of output).
    pub fn subscribe(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
    }

    pub fn progress(&self) -> Progress {
        *self.progress.borrow()
    }

    /// Watch hits over the job's budget, counted and not stored.
    pub fn watch_hits_dropped(&self) -> u64 {
        self.watchers.dropped()
    }

    /// Bytes held in the ring right now (for tests and memory checks).
    pub fn ring_bytes(&self) -> usize {
        self.ring.lock().unwrap().bytes
    }

    fn ring_first(&self) -> u64 {
        self.ring.lock().unwrap().first_seq()
    }
}
