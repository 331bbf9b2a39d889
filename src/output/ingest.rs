//! Lines in: each read's chunk gets the job's next seqs, is checked by the
//! watchers, joins the ring (bounded in bytes: whole chunks leave it) and is
//! queued for the store in seq order; the end of both streams closes the
//! output and lets the ring go. Watch hits (within the job's budget: see
//! `crate::watch`) can be held back while the job is still launching, so its
//! `started` event comes first; the budget also bounds what is held.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::{Chunk, JobOutput, LineBuf, Stream};
use crate::events::EventKind;

/// How far past its bound the ring keeps chunks the job's foreground reader
/// has not read yet (times the bound); a writer waits for that reader (see
/// [`JobOutput::reader_room`]) once one bound short of it.
const HOLD_FACTOR: usize = 3;

/// How long a writer waits for the foreground reader to read on before the
/// reader is let fall behind (and read on from the store): a reader that
/// stopped reading holds the job up this long, once.
const READER_PATIENCE: Duration = Duration::from_millis(100);

/// The recent chunks of a job, and where its seqs and streams stand.
pub(super) struct Ring {
    /// Whole chunks, oldest first, seqs contiguous.
    chunks: VecDeque<Arc<Chunk>>,
    pub(super) bytes: usize,
    max_bytes: usize,
    pub(super) next_seq: u64,
    open_streams: u8,
    /// The next seq the job's foreground reader reads, while one is
    /// attached: what it has not read stays here (up to [`HOLD_FACTOR`] ×
    /// the bound, and after the output closed), so a reader a little
    /// slower than the job reads on from memory, not from the store.
    hold: Option<u64>,
}

impl Ring {
    /// An empty ring of at most `max_bytes` whose next line gets `next_seq`.
    pub(super) fn new(max_bytes: usize, next_seq: u64, open_streams: u8) -> Ring {
        Ring {
            chunks: VecDeque::new(),
            bytes: 0,
            max_bytes: max_bytes.max(1),
            next_seq,
            open_streams,
            hold: None,
        }
    }

    /// The foreground reader reads within the ring and is a bound short of
    /// what the ring keeps for it: the writer waits for it.
    fn reader_behind(&self) -> bool {
        self.hold.is_some_and(|h| h >= self.first_seq())
            && self.bytes > self.max_bytes.saturating_mul(HOLD_FACTOR - 1)
    }

    /// Let the oldest chunks go while the ring is over its bound, or all of
    /// them once the output closed (it is read from the store then), but
    /// those the foreground reader has not read, within [`HOLD_FACTOR`].
    fn trim(&mut self) {
        let closed = self.open_streams == 0;
        while let Some(front) = self.chunks.front() {
            let over = closed || (self.bytes > self.max_bytes && self.chunks.len() > 1);
            let unread = self.hold.is_some_and(|h| front.last_seq() >= h)
                && self.bytes <= self.max_bytes.saturating_mul(HOLD_FACTOR);
            if !over || unread {
                break;
            }
            self.bytes -= front.cost();
            self.chunks.pop_front();
        }
        if self.chunks.is_empty() {
            // Its capacity too: a finished job costs O(1) memory.
            self.chunks = VecDeque::new();
        }
    }

    pub(super) fn first_seq(&self) -> u64 {
        self.chunks.front().map(|c| c.first_seq).unwrap_or(self.next_seq)
    }

    /// True when the ring holds no line (none yet, or the output ended).
    pub(super) fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// The chunks holding seq `seq` and after, oldest first.
    pub(super) fn chunks_from(&self, seq: u64) -> impl Iterator<Item = &Arc<Chunk>> + '_ {
        let at = self.chunks.partition_point(|c| c.last_seq() < seq);
        self.chunks.range(at..)
    }

    /// Lines from `seq` on, oldest first: `(chunk, seq, text)`.
    pub(super) fn lines_from(&self, seq: u64) -> impl Iterator<Item = (&Chunk, u64, &str)> + '_ {
        self.chunks_from(seq)
            .flat_map(move |c| c.texts_from(c.index_of(seq)).map(move |(s, t)| (&**c, s, t)))
    }

    /// Every line, newest first: `(chunk, seq, text)`.
    pub(super) fn newest_first(&self) -> impl Iterator<Item = (&Chunk, u64, &str)> + '_ {
        self.chunks
            .iter()
            .rev()
            .flat_map(|c| c.iter().rev().map(move |(s, t)| (&**c, s, t)))
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

    pub(super) fn append(&self, stream: Stream, lines: &mut LineBuf) {
        if lines.is_empty() {
            return;
        }
        let ts = Utc::now();
        let order = self.to_store.lock().unwrap();
        let (chunk, hits) = {
            let mut ring = self.ring.lock().unwrap();
            let chunk = Arc::new(lines.seal(ring.next_seq, stream, ts));
            // Noted before readers see it: a manager killed from now on
            // leaves these seqs marked lost, not silently absent.
            self.store.took(&self.job, chunk.last_seq());
            ring.next_seq += chunk.len() as u64;
            // Within the job's budget of hits; the rest only counted.
            let hits = self.watchers.hits(chunk.iter(), stream, Instant::now());
            // What the chunk holds: a chunk of short lines holds little
            // more than its text, so the ring keeps many of them.
            ring.bytes += chunk.cost();
            ring.chunks.push_back(chunk.clone());
            // Whole chunks leave: the ring may pass its bound by up to one
            // read's worth of lines.
            ring.trim();
            (chunk, hits)
        };
        let last_seq = chunk.last_seq();
        // Outside the ring's lock: this may wait when the store is behind
        // (backpressure), and readers must not wait with it.
        self.store.put_chunk(&self.job, chunk);
        drop(order);
        self.emit_hits(hits);
        self.progress.send_modify(|p| p.last_seq = last_seq);
    }

    /// The foreground reader reads on from `next` (`None`: it is gone).
    pub(super) fn hold_for_reader(&self, next: Option<u64>) {
        {
            let mut ring = self.ring.lock().unwrap();
            ring.hold = next;
            ring.trim();
        }
        self.reader_moved.notify_waiters();
    }

    /// Wait while the job's foreground reader is far behind (as a pipe to
    /// a slower reader makes its writer wait), so it reads every line from
    /// memory; a reader that does not read on within [`READER_PATIENCE`]
    /// is let go and reads on from the store.
    pub(super) async fn reader_room(&self) {
        loop {
            let moved = self.reader_moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if !self.ring.lock().unwrap().reader_behind() {
                return;
            }
            if tokio::time::timeout(READER_PATIENCE, moved).await.is_err() {
                self.hold_for_reader(None);
                return;
            }
        }
    }

    pub(super) fn close_stream(&self) {
        let closed = {
            let mut ring = self.ring.lock().unwrap();
            ring.open_streams = ring.open_streams.saturating_sub(1);
            ring.open_streams == 0
        };
        if closed {
            // What the watchers' budget dropped since its last report.
            self.emit_hits(self.watchers.final_report(Instant::now()).into_iter().collect());
            // Every line is queued for the store: keep the snippet, let the
            // ring go, and read this job from the store from now on.
            let snippet = self.snippet();
            *self.final_snippet.lock().unwrap() = Some(snippet);
            self.ring.lock().unwrap().trim();
            self.progress.send_modify(|p| p.closed = true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventLog;
    use crate::model::JobId;
    use crate::store::Store;
    use crate::watch::Watchers;
    use pretty_assertions::assert_eq;

    /// An output with a ring of `max` bytes, over the in-memory store.
    fn small(dir: &tempfile::TempDir, max: usize) -> Arc<JobOutput> {
        let store = crate::persist::memory::Memory::new();
        let events = EventLog::new();
        JobOutput::create(
            JobId::from_number(1),
            &dir.path().join("job-1"),
            max,
            Watchers::default(),
            events,
            store,
            1,
        )
        .unwrap()
    }

    const HELD: super::super::FollowPage = super::super::FollowPage {
        lines: usize::MAX,
        bytes: usize::MAX,
        stream: None,
        hold: true,
    };

    #[tokio::test]
    async fn the_foreground_reader_paces_the_job_and_reads_every_line_from_memory() {
        use futures_util::{FutureExt, StreamExt};
        let dir = tempfile::tempdir().unwrap();
        let out = small(&dir, 4096);
        let mut w = out.writer(Stream::Stdout).unwrap();
        let follow = out.follow(1, HELD);
        tokio::pin!(follow);
        let (mut read, mut waited) = (0u64, 0);
        for i in 0..2_000u64 {
            // A writer that finds the reader far behind waits for it to read on.
            if w.ready().now_or_never().is_none() {
                waited += 1;
                let batch = follow.next().await.unwrap().unwrap();
                read += batch.len() as u64;
                w.ready().now_or_never().expect("the reader read on: room again");
            }
            w.write(format!("line {i}\n").as_bytes());
            // Never past what the ring keeps for its reader (and one chunk),
            // and no line left it before the reader had it.
            assert!(
                out.ring_bytes() <= 4096 * HOLD_FACTOR + 256,
                "{}",
                out.ring_bytes()
            );
            assert!(
                out.ring_first() <= read + 1,
                "ring from {} after {read} read",
                out.ring_first()
            );
        }
        assert!(
            waited > 0,
            "the job printed past the ring: it waited for its reader"
        );
        w.finish();
        out.writer(Stream::Stderr).unwrap().finish();
        while let Some(b) = follow.next().await {
            read += b.unwrap().len() as u64;
        }
        assert_eq!(read, 2_000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_foreground_reader_that_stopped_is_let_go_and_reads_on_from_the_store() {
        use futures_util::StreamExt;
        let dir = tempfile::tempdir().unwrap();
        let out = small(&dir, 4096);
        let mut w = out.writer(Stream::Stdout).unwrap();
        let follow = out.follow(1, HELD);
        tokio::pin!(follow);
        let started = tokio::time::Instant::now();
        for i in 0..2_000u64 {
            w.ready().await;
            w.write(format!("line {i}\n").as_bytes());
        }
        // It held the job up once, for its patience, and no longer holds the ring.
        assert_eq!(started.elapsed(), READER_PATIENCE);
        assert!(out.ring_bytes() <= 4096 + 256, "{}", out.ring_bytes());
        w.finish();
        out.writer(Stream::Stderr).unwrap().finish();
        let mut seqs = Vec::new();
        while let Some(b) = follow.next().await {
            seqs.extend(b.unwrap().lines().map(|l| l.seq));
        }
        assert_eq!(
            seqs,
            (1..=2_000).collect::<Vec<u64>>(),
            "every line once, in order"
        );
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
}
