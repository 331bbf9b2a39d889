//! A job's output: bytes from stdout and stderr become numbered lines.
//!
//! Theory of operation. Each stream has its own [`StreamWriter`], owned by the
//! task that reads the stream; it appends raw bytes to `stdout.log`/`stderr.log`
//! (so `tail -f` works), splits them into lines ([`LineSplitter`]) and hands the
//! lines of each read, as one [`Chunk`] (one buffer, not a string per line), to
//! the shared [`JobOutput`]. There, under one short lock per chunk, the lines
//! get the job's next `seq`s (one contiguous space for both streams, in
//! arrival order), are checked by the watchers, and the chunk is pushed into
//! a ring bounded in bytes (whole chunks leave it) and queued, shared, for the
//! durable [`Store`] in seq order. Readers page by seq: recent lines come from
//! the ring, older ones from the store, so the whole output stays pageable
//! (also after a restart) while memory stays bounded. Once both streams ended
//! the ring is let go (only the snippet is kept): a finished job's output is
//! read from the store, so it costs O(1) memory however much it printed.

mod split;
mod writer;

pub use crate::model::{Chunk, LineBuf};
pub use split::LineSplitter;
pub use writer::StreamWriter;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::Utc;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::events::{EventKind, EventLog};
use crate::model::{JobId, LogPaths};
pub use crate::model::{Line, LogPage, LogQuery, Stream};
use crate::store::Store;
use crate::watch::Watchers;

/// Lines longer than this are split into several lines.
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Default bound of the in-memory ring per job.
pub const DEFAULT_RING_BYTES: usize = 4 * 1024 * 1024;
/// Size of a snippet (the tail shown on cards and in polls).
pub const SNIPPET_BYTES: usize = 1536;
/// Bookkeeping cost charged per line in the ring on top of its text.
const LINE_OVERHEAD: usize = 64;

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

struct Ring {
    /// Whole chunks, oldest first, seqs contiguous.
    chunks: VecDeque<Arc<Chunk>>,
    bytes: usize,
    max_bytes: usize,
    next_seq: u64,
    open_streams: u8,
}

/// The output of one job, shared by its stream writers and its readers.
pub struct JobOutput {
    job: JobId,
    dir: PathBuf,
    ring: Mutex<Ring>,
    watchers: Watchers,
    events: Arc<EventLog>,
    store: Arc<Store>,
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
}

impl Ring {
    fn first_seq(&self) -> u64 {
        self.chunks.front().map(|c| c.first_seq).unwrap_or(self.next_seq)
    }

    /// Lines from `seq` on, oldest first: `(chunk, index)` pairs.
    fn lines_from(&self, seq: u64) -> impl Iterator<Item = (&Chunk, usize)> + '_ {
        let at = self.chunks.partition_point(|c| c.last_seq() < seq);
        self.chunks
            .range(at..)
            .flat_map(move |c| (c.index_of(seq)..c.len()).map(move |i| (&**c, i)))
    }

    /// Every line, newest first.
    fn newest_first(&self) -> impl Iterator<Item = (&Chunk, usize)> + '_ {
        self.chunks
            .iter()
            .rev()
            .flat_map(|c| (0..c.len()).rev().map(move |i| (&**c, i)))
    }
}

impl JobOutput {
    /// Hold watch-hit events back until [`JobOutput::release_events`]: output
    /// can flow while a runner is still launching, and a job's `started`
    /// event must come before every other event of that job.
    pub fn hold_events(&self) {
        let mut held = self.held.lock().unwrap();
        held.get_or_insert_with(Vec::new);
    }

    /// Emit the held events, in order, and emit later ones at once.
    pub fn release_events(&self) {
        let mut held = self.held.lock().unwrap();
        for hit in held.take().unwrap_or_default() {
            self.events.emit(self.job.clone(), hit);
        }
    }

    fn emit_hits(&self, hits: Vec<EventKind>) {
        if hits.is_empty() {
            return;
        }
        // Under the lock, so a release in between cannot reorder them.
        let mut held = self.held.lock().unwrap();
        match held.as_mut() {
            Some(buf) => buf.extend(hits),
            None => {
                for hit in hits {
                    self.events.emit(self.job.clone(), hit);
                }
            }
        }
    }

    /// Create the job's output, its directory `dir` (`<state>/jobs/<id>`) and
    /// its first line number `first_seq` (1, or the next one when re-adopting).
    pub fn create(
        job: JobId,
        dir: &Path,
        max_bytes: usize,
        watchers: Watchers,
        events: Arc<EventLog>,
        store: Arc<Store>,
        first_seq: u64,
    ) -> Result<Arc<Self>> {
        if let Some(jobs) = dir.parent() {
            crate::store::private::own_dir(jobs).map_err(|e| Error::io("create log directory", jobs, e))?;
        }
        crate::store::private::own_dir(dir).map_err(|e| Error::io("create log directory", dir, e))?;
        let ring = Ring {
            chunks: VecDeque::new(),
            bytes: 0,
            max_bytes: max_bytes.max(1),
            next_seq: first_seq.max(1),
            open_streams: 2,
        };
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
        store: Arc<Store>,
        last_seq: u64,
    ) -> Arc<Self> {
        let ring = Ring {
            chunks: VecDeque::new(),
            bytes: 0,
            max_bytes: 1,
            next_seq: last_seq + 1,
            open_streams: 0,
        };
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
        store: Arc<Store>,
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

    fn append(&self, stream: Stream, lines: &mut LineBuf) {
        if lines.is_empty() {
            return;
        }
        let ts = Utc::now();
        let mut hits = Vec::new();
        let order = self.to_store.lock().unwrap();
        let chunk = {
            let mut ring = self.ring.lock().unwrap();
            let chunk = Arc::new(lines.seal(ring.next_seq, stream, ts));
            ring.next_seq += chunk.len() as u64;
            if !self.watchers.is_empty() {
                for (seq, text) in chunk.iter() {
                    for pattern in self.watchers.matches(text) {
                        hits.push(EventKind::WatchHit {
                            line_seq: seq,
                            stream,
                            line: text.to_string(),
                            pattern,
                        });
                    }
                }
            }
            ring.bytes += chunk_cost(&chunk);
            ring.chunks.push_back(chunk.clone());
            // Whole chunks leave: the ring may pass its bound by up to one
            // read's worth of lines.
            while ring.bytes > ring.max_bytes && ring.chunks.len() > 1 {
                let old = ring.chunks.pop_front().expect("ring not empty");
                ring.bytes -= chunk_cost(&old);
            }
            chunk
        };
        let last_seq = chunk.last_seq();
        // Outside the ring's lock: this may wait when the store is behind
        // (backpressure), and readers must not wait with it.
        self.store.put_chunk(&self.job, chunk);
        drop(order);
        self.emit_hits(hits);
        self.progress.send_modify(|p| p.last_seq = last_seq);
    }

    fn close_stream(&self) {
        let closed = {
            let mut ring = self.ring.lock().unwrap();
            ring.open_streams = ring.open_streams.saturating_sub(1);
            ring.open_streams == 0
        };
        if closed {
            // Every line is queued for the store: keep the snippet, let the
            // ring go, and read this job from the store from now on.
            let snippet = self.snippet();
            *self.final_snippet.lock().unwrap() = Some(snippet);
            {
                let mut ring = self.ring.lock().unwrap();
                ring.chunks = VecDeque::new();
                ring.bytes = 0;
            }
            self.progress.send_modify(|p| p.closed = true);
        }
    }

    /// Bytes held in the ring right now (for tests and memory checks).
    pub fn ring_bytes(&self) -> usize {
        self.ring.lock().unwrap().bytes
    }

    fn ring_first(&self) -> u64 {
        self.ring.lock().unwrap().first_seq()
    }

    /// Read lines by seq or tail. Lines that left the ring are read from `lines.log`.
    pub fn read(&self, query: &LogQuery) -> Result<LogPage> {
        let limit = query.limit.unwrap_or(usize::MAX).max(1);
        let last_seq = self
            .progress()
            .last_seq
            .max(self.ring.lock().unwrap().next_seq - 1);
        // Lines the output cap dropped from the store are gone, unless the
        // ring still holds them.
        let mut first_available = self.store.dropped_before(&self.job)?.min(self.ring_first());
        if let Some(n) = query.tail {
            let mut page = self.tail(n.min(limit), query.stream, last_seq)?;
            page.first_available_seq = first_available;
            return Ok(page);
        }
        let asked = query.since.unwrap_or(1).max(1);
        let from = asked;
        let mut lines = Vec::new();
        let mut cursor = from;
        loop {
            let ring_first = self.ring_first();
            if cursor < ring_first {
                // Older than the ring: page through the store up to the ring.
                let (next, start) = self.read_store(cursor, ring_first, limit, query.stream, &mut lines)?;
                // The store's start, read with the lines: exact even while
                // the writer is dropping old lines.
                first_available = start.min(ring_first);
                cursor = next;
                if lines.len() >= limit {
                    break;
                }
                // A store that could not be written leaves a gap; step over it
                // rather than loop.
                cursor = cursor.max(ring_first);
            }
            let ring = self.ring.lock().unwrap();
            if cursor < ring.first_seq() {
                // Lines were evicted since we looked: go back to the spill.
                continue;
            }
            for (chunk, i) in ring.lines_from(cursor) {
                if lines.len() >= limit {
                    break;
                }
                cursor = chunk.first_seq + i as u64 + 1;
                if query.stream.is_none_or(|s| s == chunk.stream) {
                    lines.push(chunk.line(i));
                }
            }
            break;
        }
        Ok(LogPage {
            has_more: cursor <= last_seq,
            next_seq: cursor,
            lines,
            last_seq,
            first_available_seq: first_available,
            truncated_before: (from < first_available).then_some(first_available),
        })
    }

    /// Up to `limit` lines (about `max_bytes` of text while they are in the
    /// ring) from seq `since` on, both streams, as pieces of chunks (`(chunk,
    /// index range)`), and the seq to ask for next: what a stream to a
    /// terminal sends, without making a [`Line`] per line.
    pub fn read_chunks(&self, since: u64, limit: usize, max_bytes: usize) -> Result<(Vec<ChunkPiece>, u64)> {
        let since = since.max(1);
        let limit = limit.max(1);
        {
            let ring = self.ring.lock().unwrap();
            if since >= ring.first_seq() {
                let at = ring.chunks.partition_point(|c| c.last_seq() < since);
                let (mut pieces, mut next, mut n, mut bytes) = (Vec::new(), since, 0, 0);
                for c in ring.chunks.range(at..) {
                    if n >= limit || bytes >= max_bytes {
                        break;
                    }
                    let start = c.index_of(since);
                    let mut end = start;
                    while end < c.len() && n < limit && bytes < max_bytes {
                        bytes += c.text(end).len() + 1;
                        end += 1;
                        n += 1;
                    }
                    pieces.push((c.clone(), start..end));
                    next = c.first_seq + end as u64;
                }
                return Ok((pieces, next));
            }
        }
        // Older than the ring: from the store, as lines.
        let page = self.read(&LogQuery {
            since: Some(since),
            limit: Some(limit),
            ..Default::default()
        })?;
        let pieces = page
            .lines
            .chunk_by(|a, b| a.stream == b.stream && b.seq == a.seq + 1)
            .map(|run| {
                let c = Arc::new(Chunk::from_lines(run));
                let n = c.len();
                (c, 0..n)
            })
            .collect();
        Ok((pieces, page.next_seq))
    }

    fn tail(&self, n: usize, stream: Option<Stream>, last_seq: u64) -> Result<LogPage> {
        let (mut lines, complete) = {
            let ring = self.ring.lock().unwrap();
            let mut lines: Vec<Line> = ring
                .newest_first()
                .filter(|(c, _)| stream.is_none_or(|s| s == c.stream))
                .take(n)
                .map(|(c, i)| c.line(i))
                .collect();
            lines.reverse();
            (lines, ring.first_seq() <= 1)
        };
        if lines.len() < n && !complete {
            // The ring holds fewer than n matching lines: the rest are in the store.
            let until = lines.first().map(|l| l.seq).unwrap_or(last_seq + 1);
            self.store.flush();
            let mut older = self.store.tail(&self.job, n - lines.len(), until, stream)?;
            older.extend(lines);
            lines = older;
        }
        Ok(LogPage {
            lines,
            next_seq: last_seq + 1,
            has_more: false,
            last_seq,
            first_available_seq: 1,
            truncated_before: None,
        })
    }

    /// Lines from the store with seq in `[from, until)`, until `out` holds
    /// `limit`. Returns the cursor after the last line looked at and the
    /// first seq the store still has.
    fn read_store(
        &self,
        from: u64,
        until: u64,
        limit: usize,
        stream: Option<Stream>,
        out: &mut Vec<Line>,
    ) -> Result<(u64, u64)> {
        let want = limit.saturating_sub(out.len());
        let mut read = self.store.lines_and_start(&self.job, from, until, want, stream)?;
        // Lines that just left the ring may still be queued for the store:
        // wait for the writer only when the page came back short (a follower
        // behind a busy job then reads at the store's pace, not the flush's).
        let whole = |got: &Vec<Line>| {
            got.len() >= want || (stream.is_none() && got.last().is_some_and(|l| l.seq + 1 >= until))
        };
        if !whole(&read.0) {
            self.store.flush();
            read = self.store.lines_and_start(&self.job, from, until, want, stream)?;
        }
        let (got, start) = read;
        let full = got.len() >= want;
        let cursor = match (full, got.last()) {
            (true, Some(last)) => last.seq + 1,
            _ => until,
        };
        out.extend(got);
        Ok((cursor, start))
    }

    /// The last ~[`SNIPPET_BYTES`] of output, whole lines, both streams.
    pub fn snippet(&self) -> String {
        if let Some(s) = self.final_snippet.lock().unwrap().as_ref() {
            return s.clone();
        }
        let ring = self.ring.lock().unwrap();
        if ring.chunks.is_empty() && ring.next_seq > 1 {
            // A job that ended before this manager started: from the store.
            drop(ring);
            let lines = self.store.tail(&self.job, 64, u64::MAX, None).unwrap_or_default();
            return snippet_of(lines.iter().rev().map(|l| l.text.as_str()));
        }
        snippet_of(ring.newest_first().map(|(c, i)| c.text(i)))
    }
}

/// What a chunk counts against the ring's bound.
fn chunk_cost(chunk: &Chunk) -> usize {
    chunk.text_bytes() + chunk.len() * LINE_OVERHEAD
}

/// The snippet of lines given newest first.
fn snippet_of<'a>(newest_first: impl Iterator<Item = &'a str>) -> String {
    let mut size = 0;
    let mut picked = Vec::new();
    for text in newest_first {
        if size + text.len() + 1 > SNIPPET_BYTES && !picked.is_empty() {
            break;
        }
        size += text.len() + 1;
        picked.push(text);
    }
    picked.reverse();
    let mut s = picked.join("\n");
    if s.len() > SNIPPET_BYTES {
        let mut cut = s.len() - SNIPPET_BYTES;
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        s = format!("…{}", &s[cut..]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn output(ring: usize) -> (tempfile::TempDir, Arc<JobOutput>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("berth.db")).unwrap();
        let out = JobOutput::create(
            JobId::from_number(1),
            &dir.path().join("job-1"),
            ring,
            Watchers::default(),
            EventLog::new(),
            store,
            1,
        )
        .unwrap();
        (dir, out)
    }

    #[test]
    fn watch_hits_held_during_launch_follow_the_started_event() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("berth.db")).unwrap();
        let events = EventLog::new();
        let job = JobId::from_number(1);
        let out = JobOutput::create(
            job.clone(),
            &dir.path().join("job-1"),
            4096,
            Watchers::new(&["hit".to_string()]).unwrap(),
            events.clone(),
            store,
            1,
        )
        .unwrap();
        out.hold_events();
        let mut w = out.writer(Stream::Stdout).unwrap();
        w.write(b"early hit\n");
        assert!(events.since(0, 10).is_empty(), "held while launching");
        events.emit(
            job.clone(),
            EventKind::Started {
                runner: crate::model::RunnerKind::Host,
                start_mode: crate::model::StartMode::Background,
                ports: vec![],
            },
        );
        out.release_events();
        w.write(b"late hit\n");
        w.finish();
        let kinds: Vec<(u64, &str)> = events
            .since(0, 10)
            .iter()
            .map(|e| (e.seq, e.kind.name()))
            .collect();
        let names: Vec<&str> = kinds.iter().map(|(_, k)| *k).collect();
        assert_eq!(names, ["started", "watch_hit", "watch_hit"]);
        assert!(kinds.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn pages_across_ring_and_store() {
        let (_d, out) = output(4096);
        let mut w = out.writer(Stream::Stdout).unwrap();
        let mut e = out.writer(Stream::Stderr).unwrap();
        for i in 1..=5000 {
            if i % 7 == 0 {
                e.write(format!("err {i}\n").as_bytes());
            } else {
                w.write(format!("line {i}\n").as_bytes());
            }
        }
        w.finish();
        e.finish();
        assert!(out.ring_bytes() <= 4096);
        assert!(out.progress().closed);
        let mut seen = Vec::new();
        let mut since = 1;
        loop {
            let page = out
                .read(&LogQuery {
                    since: Some(since),
                    limit: Some(333),
                    ..Default::default()
                })
                .unwrap();
            seen.extend(page.lines.iter().map(|l| l.seq));
            since = page.next_seq;
            if !page.has_more {
                break;
            }
        }
        assert_eq!(seen, (1..=5000).collect::<Vec<u64>>());
        let errs = out
            .read(&LogQuery {
                since: Some(1),
                stream: Some(Stream::Stderr),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(errs.lines.len(), 5000 / 7);
        assert_eq!(errs.lines[0].text, "err 7");
        let tail = out
            .read(&LogQuery {
                tail: Some(2),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            tail.lines.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(),
            vec!["line 4999", "line 5000"]
        );
        assert!(out.snippet().ends_with("line 5000"));
        assert!(out.snippet().len() <= SNIPPET_BYTES + 3);
    }
}
