//! Lines in: each read's chunk gets the job's next seqs, is checked by the
//! watchers, joins the ring (bounded in bytes: whole chunks leave it) and is
//! queued for the store in seq order; the end of both streams closes the
//! output and lets the ring go. Watch hits (within the job's budget: see
//! `crate::watch`) can be held back while the job is still launching, so its
//! `started` event comes first; the budget also bounds what is held.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;

use super::{Chunk, JobOutput, LineBuf, Stream};
use crate::events::EventKind;

/// Bookkeeping cost charged per line in the ring on top of its text.
const LINE_OVERHEAD: usize = 64;

/// The recent chunks of a job, and where its seqs and streams stand.
pub(super) struct Ring {
    /// Whole chunks, oldest first, seqs contiguous.
    chunks: VecDeque<Arc<Chunk>>,
    pub(super) bytes: usize,
    max_bytes: usize,
    pub(super) next_seq: u64,
    open_streams: u8,
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

    /// Lines from `seq` on, oldest first: `(chunk, index)` pairs.
    pub(super) fn lines_from(&self, seq: u64) -> impl Iterator<Item = (&Chunk, usize)> + '_ {
        self.chunks_from(seq)
            .flat_map(move |c| (c.index_of(seq)..c.len()).map(move |i| (&**c, i)))
    }

    /// Every line, newest first.
    pub(super) fn newest_first(&self) -> impl Iterator<Item = (&Chunk, usize)> + '_ {
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
            ring.bytes += chunk_cost(&chunk);
            ring.chunks.push_back(chunk.clone());
            // Whole chunks leave: the ring may pass its bound by up to one
            // read's worth of lines.
            while ring.bytes > ring.max_bytes && ring.chunks.len() > 1 {
                let old = ring.chunks.pop_front().expect("ring not empty");
                ring.bytes -= chunk_cost(&old);
            }
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
            {
                let mut ring = self.ring.lock().unwrap();
                ring.chunks = VecDeque::new();
                ring.bytes = 0;
            }
            self.progress.send_modify(|p| p.closed = true);
        }
    }
}

/// What a chunk counts against the ring's bound.
fn chunk_cost(chunk: &Chunk) -> usize {
    chunk.text_bytes() + chunk.len() * LINE_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventLog;
    use crate::model::JobId;
    use crate::store::Store;
    use crate::watch::Watchers;
    use pretty_assertions::assert_eq;

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
