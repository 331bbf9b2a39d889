//! What a job's output and the event log need from durable storage, as two
//! small traits over the plain data of [`crate::model`]. The SQLite
//! [`crate::store::Store`] implements both; [`crate::output`] and
//! [`crate::events`] hold an `Arc<dyn …>` of them and never name the store,
//! so the store depends only on the model (and the errors), the data layer
//! has no cycle, and the ring and follow logic is unit-tested against the
//! in-memory [`memory::Memory`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::Result;
use crate::model::{Chunk, Event, Gap, JobId, Line, Stream};

/// A page of a job's stored output (see [`OutputStore::page`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredPage {
    pub lines: Vec<Line>,
    /// The first seq still stored (older lines were dropped by the output cap).
    pub start: u64,
    /// Seqs in the range read that no line covers: lost.
    pub lost: Vec<Gap>,
    /// Where to read on: after the last line looked at, or `until`.
    pub next: u64,
}

/// A future the caller awaits without knowing who made it.
pub type Wait<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Durable storage of jobs' output lines, written in seq order per job and
/// read back by seq. Writes are queued: readers that must see what was
/// queued call [`OutputStore::flush`] first.
pub trait OutputStore: Send + Sync {
    /// Queue a chunk of lines (its seqs follow the job's previous chunk). May
    /// block while the queue is full: that is the job's backpressure.
    fn put_chunk(&self, job: &JobId, chunk: Arc<Chunk>);

    /// Job `job`'s output reached seq `last`, before any reader sees it
    /// (a store notes it where a crash leaves it, see `store/reserve.rs`).
    fn took(&self, _job: &JobId, _last: u64) {}

    /// Resolves once a write would find room in the queue (an async producer
    /// awaits this so that [`OutputStore::put_chunk`] rarely blocks).
    fn room(&self) -> Wait<'_>;

    /// Wait until everything queued so far can be read back.
    fn flush(&self);

    /// Lines of `job` with seq in `[from, until)` (optionally of one stream),
    /// at most `limit` lines and about `max_bytes` of text (at least one
    /// line), oldest first; the seqs in between that no line covers (lost:
    /// the caller flushed, so every seq below `until` reached the store;
    /// `until = u64::MAX` reads as far as it goes); and, read in the same
    /// snapshot, the first seq still stored.
    fn page(
        &self,
        job: &JobId,
        range: (u64, u64),
        bounds: (usize, usize),
        stream: Option<Stream>,
    ) -> Result<StoredPage>;

    /// The last `n` lines of `job` before seq `until` (at most about
    /// `max_bytes` of text), oldest first, and the gaps among them.
    fn tail(
        &self,
        job: &JobId,
        range: (usize, u64),
        max_bytes: usize,
        stream: Option<Stream>,
    ) -> Result<(Vec<Line>, Vec<Gap>)>;

    /// The first seq of `job` still stored (1 when nothing was dropped).
    fn dropped_before(&self, job: &JobId) -> Result<u64>;

    /// Size at which a job's raw log file is rotated.
    fn raw_file_cap(&self) -> u64;
}

/// Durable storage of the event log.
pub trait EventStore: Send + Sync {
    /// Queue an event.
    fn put_event(&self, event: &Event);

    /// Wait until everything queued so far can be read back.
    fn flush(&self);

    /// Stored events with seq ≥ `since`, oldest first, at most `limit`.
    fn events(&self, since: u64, limit: usize) -> Result<Vec<Event>>;

    /// Highest stored event seq (0 = none).
    fn max_event_seq(&self) -> Result<u64>;
}

/// Storage in memory, for unit tests of what sits on top of the traits.
#[cfg(test)]
pub mod memory {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;

    /// Every line and event kept in maps; writes are read back at once.
    #[derive(Default)]
    pub struct Memory {
        lines: Mutex<BTreeMap<(String, u64), Line>>,
        dropped: Mutex<BTreeMap<String, u64>>,
        events: Mutex<BTreeMap<u64, Event>>,
    }

    impl Memory {
        pub fn new() -> Arc<Memory> {
            Arc::new(Memory::default())
        }

        /// Forget `job`'s lines below `seq`, as the output cap does.
        pub fn drop_before(&self, job: &JobId, seq: u64) {
            self.lines
                .lock()
                .unwrap()
                .retain(|(j, s), _| j != job.as_str() || *s >= seq);
            self.dropped.lock().unwrap().insert(job.to_string(), seq);
        }

        /// How many lines of `job` are stored.
        pub fn count(&self, job: &JobId) -> usize {
            let lines = self.lines.lock().unwrap();
            lines.keys().filter(|(j, _)| j == job.as_str()).count()
        }
    }

    impl OutputStore for Memory {
        fn put_chunk(&self, job: &JobId, chunk: Arc<Chunk>) {
            let mut lines = self.lines.lock().unwrap();
            for line in chunk.lines(0..chunk.len()) {
                lines.insert((job.to_string(), line.seq), line);
            }
        }

        fn room(&self) -> Wait<'_> {
            Box::pin(std::future::ready(()))
        }

        fn flush(&self) {}

        fn page(
            &self,
            job: &JobId,
            (from, until): (u64, u64),
            (limit, max_bytes): (usize, usize),
            stream: Option<Stream>,
        ) -> Result<StoredPage> {
            let start = self.dropped_before(job)?;
            let lines = self.lines.lock().unwrap();
            let key = |s| (job.to_string(), s);
            let mut page = StoredPage {
                start,
                next: from.max(start),
                ..Default::default()
            };
            let mut bytes = 0;
            let end = until.min(
                lines
                    .range(key(0)..key(u64::MAX))
                    .next_back()
                    .map_or(0, |(_, l)| l.seq + 1),
            );
            for (_, l) in lines.range(key(page.next)..key(until)) {
                if l.seq > page.next {
                    page.lost.push(Gap {
                        from: page.next,
                        to: l.seq - 1,
                    });
                }
                page.next = l.seq + 1;
                if stream.is_none_or(|s| s == l.stream) {
                    bytes += l.text.len();
                    page.lines.push(l.clone());
                    if page.lines.len() >= limit.max(1) || bytes >= max_bytes.max(1) {
                        return Ok(page);
                    }
                }
            }
            if until != u64::MAX && page.next < until {
                page.lost.push(Gap {
                    from: page.next,
                    to: until - 1,
                });
                page.next = until;
            } else {
                page.next = page.next.max(end);
            }
            Ok(page)
        }

        fn tail(
            &self,
            job: &JobId,
            (n, until): (usize, u64),
            _max_bytes: usize,
            stream: Option<Stream>,
        ) -> Result<(Vec<Line>, Vec<Gap>)> {
            let lines = self.lines.lock().unwrap();
            let mut got: Vec<Line> = lines
                .range((job.to_string(), 0)..(job.to_string(), until))
                .rev()
                .map(|(_, l)| l)
                .filter(|l| stream.is_none_or(|s| s == l.stream))
                .take(n)
                .cloned()
                .collect();
            got.reverse();
            Ok((got, Vec::new()))
        }

        fn dropped_before(&self, job: &JobId) -> Result<u64> {
            Ok(self
                .dropped
                .lock()
                .unwrap()
                .get(job.as_str())
                .copied()
                .unwrap_or(1))
        }

        fn raw_file_cap(&self) -> u64 {
            1 << 20
        }
    }

    impl EventStore for Memory {
        fn put_event(&self, event: &Event) {
            self.events.lock().unwrap().insert(event.seq, event.clone());
        }

        fn flush(&self) {}

        fn events(&self, since: u64, limit: usize) -> Result<Vec<Event>> {
            let events = self.events.lock().unwrap();
            Ok(events
                .range(since..)
                .take(limit)
                .map(|(_, e)| e.clone())
                .collect())
        }

        fn max_event_seq(&self) -> Result<u64> {
            Ok(self
                .events
                .lock()
                .unwrap()
                .keys()
                .next_back()
                .copied()
                .unwrap_or(0))
        }
    }
}
