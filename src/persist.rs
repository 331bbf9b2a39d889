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
use crate::model::{Chunk, Event, JobId, Line, Stream};

/// A future the caller awaits without knowing who made it.
pub type Wait<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Durable storage of jobs' output lines, written in seq order per job and
/// read back by seq. Writes are queued: readers that must see what was
/// queued call [`OutputStore::flush`] first.
pub trait OutputStore: Send + Sync {
    /// Queue a chunk of lines (its seqs follow the job's previous chunk). May
    /// block while the queue is full: that is the job's backpressure.
    fn put_chunk(&self, job: &JobId, chunk: Arc<Chunk>);

    /// Resolves once a write would find room in the queue (an async producer
    /// awaits this so that [`OutputStore::put_chunk`] rarely blocks).
    fn room(&self) -> Wait<'_>;

    /// Wait until everything queued so far can be read back.
    fn flush(&self);

    /// Lines of `job` with seq in `[from, until)` (optionally of one stream),
    /// at most `limit`, oldest first; and, read in the same snapshot, the
    /// first seq still stored (older lines were dropped by the output cap).
    fn lines_and_start(
        &self,
        job: &JobId,
        from: u64,
        until: u64,
        limit: usize,
        stream: Option<Stream>,
    ) -> Result<(Vec<Line>, u64)>;

    /// The last `n` lines of `job` before seq `until`, oldest first.
    fn tail(&self, job: &JobId, n: usize, until: u64, stream: Option<Stream>) -> Result<Vec<Line>>;

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
            for i in 0..chunk.len() {
                let line = chunk.line(i);
                lines.insert((job.to_string(), line.seq), line);
            }
        }

        fn room(&self) -> Wait<'_> {
            Box::pin(std::future::ready(()))
        }

        fn flush(&self) {}

        fn lines_and_start(
            &self,
            job: &JobId,
            from: u64,
            until: u64,
            limit: usize,
            stream: Option<Stream>,
        ) -> Result<(Vec<Line>, u64)> {
            let start = self.dropped_before(job)?;
            let lines = self.lines.lock().unwrap();
            let key = |s| (job.to_string(), s);
            let from = from.max(start);
            let got = if from < until {
                lines
                    .range(key(from)..key(until))
                    .map(|(_, l)| l)
                    .filter(|l| stream.is_none_or(|s| s == l.stream))
                    .take(limit)
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            };
            Ok((got, start))
        }

        fn tail(&self, job: &JobId, n: usize, until: u64, stream: Option<Stream>) -> Result<Vec<Line>> {
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
            Ok(got)
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
