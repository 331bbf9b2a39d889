//! Following a job's output: one stream of [`Batch`]es from a seq on, for
//! every face that shows output as it comes (`berth run` in process, the
//! `POST /v1/run` frames, SSE `logs --follow`). It reads like any reader —
//! the ring for recent lines, the store for older ones — and waits for new
//! lines between reads, so a slow follower never holds the job up: it only
//! reads older lines from the store later. Each line comes exactly once, in
//! seq order; lines the output cap dropped before they were read are said
//! on the next batch (`truncated_before`); the stream ends once the job's
//! output is closed and every line was given out. Reads from the store run
//! on the blocking pool: no SQLite read holds an async worker.

use std::sync::Arc;

use futures_util::stream;
use tokio::sync::watch;

use super::batch::{Batch, FollowPage};
use super::{Chunk, JobOutput, LogQuery, Progress};
use crate::error::Result;

/// Where a follow stands between batches.
struct Cursor {
    output: Arc<JobOutput>,
    progress: watch::Receiver<Progress>,
    since: u64,
    /// A gap met by a read that gave no line yet: said on the next batch.
    gap: Option<u64>,
    /// Set for the foreground's follow: the ring keeps what it has not read.
    hold: Option<Hold>,
}

/// The foreground reader's hold on the ring, let go when its follow ends
/// or is dropped.
struct Hold(Arc<JobOutput>);

impl Drop for Hold {
    fn drop(&mut self) {
        self.0.hold_for_reader(None);
    }
}

impl JobOutput {
    /// The job's lines from seq `since` on, in batches of `page`, as they
    /// come: ends after the last line once the output is closed (at once
    /// when it already was), or after an error reading the store.
    pub fn follow(
        self: &Arc<Self>,
        since: u64,
        page: FollowPage,
    ) -> impl futures_util::Stream<Item = Result<Batch>> + Send + use<> {
        let hold = page.hold.then(|| {
            self.hold_for_reader(Some(since.max(1)));
            Hold(self.clone())
        });
        let start = Cursor {
            progress: self.subscribe(),
            output: self.clone(),
            since: since.max(1),
            gap: None,
            hold,
        };
        stream::unfold(Some(start), move |cursor| async move {
            let mut c = cursor?;
            loop {
                // Looked at before reading: a close seen here means every
                // line is in, so the read below gets the last of them.
                let progress = *c.progress.borrow_and_update();
                let read = match c.output.ring_batch(c.since, &page) {
                    Some(read) => Ok(read),
                    // Older than the ring: SQLite, on the blocking pool.
                    None => {
                        let (output, since) = (c.output.clone(), c.since);
                        match tokio::task::spawn_blocking(move || output.store_batch(since, &page)).await {
                            Ok(read) => read,
                            // A panic in the read goes on here, as when it ran
                            // in this task; a runtime shutting down ends the stream.
                            Err(e) => match e.try_into_panic() {
                                Ok(panic) => std::panic::resume_unwind(panic),
                                Err(_) => return None,
                            },
                        }
                    }
                };
                let (mut batch, next) = match read {
                    Ok(read) => read,
                    Err(e) => return Some((Err(e), None)),
                };
                c.since = next;
                if let Some(Hold(output)) = &c.hold {
                    output.hold_for_reader(Some(next));
                }
                c.gap = c.gap.or(batch.truncated_before);
                if !batch.is_empty() {
                    batch.truncated_before = c.gap.take();
                    return Some((Ok(batch), Some(c)));
                }
                if progress.closed && c.since > progress.last_seq {
                    return None;
                }
                if c.progress.changed().await.is_err() {
                    return None;
                }
            }
        })
    }

    /// Up to `page` of lines from seq `since` on, as pieces of chunks, and
    /// the seq to ask for next (past lines of the other stream looked at);
    /// `None` when `since` is older than the ring ([`JobOutput::store_batch`]).
    fn ring_batch(&self, since: u64, page: &FollowPage) -> Option<(Batch, u64)> {
        let since = since.max(1);
        let limit = page.lines.max(1);
        {
            let ring = self.ring.lock().unwrap();
            if since >= ring.first_seq() {
                let (mut pieces, mut next, mut n, mut bytes) = (Vec::new(), since, 0, 0);
                for c in ring.chunks_from(since) {
                    if n >= limit || bytes >= page.bytes {
                        break;
                    }
                    if page.stream.is_some_and(|s| s != c.stream) {
                        next = c.last_seq() + 1;
                        continue;
                    }
                    let start = c.index_of(since);
                    let end = c.fit(start, limit - n, page.bytes - bytes);
                    n += end - start;
                    bytes += c.lines_text(start..end).len();
                    pieces.push((c.clone(), start..end));
                    next = c.first_seq + end as u64;
                }
                let batch = Batch {
                    pieces,
                    ..Default::default()
                };
                return Some((batch, next));
            }
        }
        None
    }

    /// [`JobOutput::ring_batch`] older than the ring: from the store (and on
    /// into the ring), as lines. Reads SQLite: not on an async worker.
    fn store_batch(&self, since: u64, page: &FollowPage) -> Result<(Batch, u64)> {
        let (since, limit) = (since.max(1), page.lines.max(1));
        let page = self.read(&LogQuery {
            since: Some(since),
            limit: Some(limit),
            stream: page.stream,
            ..Default::default()
        })?;
        // Runs of one stream and one timestamp become chunks: a line made
        // from a piece again is the line the store gave.
        let pieces = page
            .lines
            .chunk_by(|a, b| a.stream == b.stream && b.seq == a.seq + 1 && a.ts == b.ts)
            .map(|run| {
                let c = Arc::new(Chunk::from_lines(run));
                let n = c.len();
                (c, 0..n)
            })
            .collect();
        let batch = Batch {
            pieces,
            truncated_before: page.truncated_before,
            lost: page.lost,
        };
        Ok((batch, page.next_seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventLog;
    use crate::model::JobId;
    use crate::output::{Line, Stream, StreamWriter};
    use crate::persist::memory::Memory;
    use crate::watch::Watchers;
    use futures_util::{FutureExt, StreamExt};
    use pretty_assertions::assert_eq;

    const ALL: FollowPage = FollowPage {
        lines: 30,
        bytes: usize::MAX,
        stream: None,
        hold: false,
    };

    fn output(dir: &tempfile::TempDir, store: Arc<Memory>) -> Arc<JobOutput> {
        // A ring of about fifteen one-line chunks: the rest is in the store only.
        JobOutput::create(
            JobId::from_number(1),
            &dir.path().join("job-1"),
            2048,
            Watchers::default(),
            EventLog::new(),
            store,
            1,
        )
        .unwrap()
    }

    /// Lines `from..=to`, one write (one chunk) each, every third on stderr.
    fn print(w: &mut StreamWriter, e: &mut StreamWriter, from: u64, to: u64) {
        for i in from..=to {
            let text = format!("line {i}\n");
            if i % 3 == 0 {
                e.write(text.as_bytes());
            } else {
                w.write(text.as_bytes());
            }
        }
    }

    /// Seqs of the lines of `batches`, checking each line's text and stream.
    fn seqs(batches: &[Batch]) -> Vec<u64> {
        let mut seqs = Vec::new();
        for line in batches.iter().flat_map(|b| b.lines()) {
            assert_eq!(line.text, format!("line {}", line.seq));
            let stream = if line.seq % 3 == 0 {
                Stream::Stderr
            } else {
                Stream::Stdout
            };
            assert_eq!(line.stream, stream, "stream of line {}", line.seq);
            seqs.push(line.seq);
        }
        seqs
    }

    #[tokio::test]
    async fn follow_reads_the_store_then_the_ring_then_live_lines_once_and_ends_at_close() {
        let dir = tempfile::tempdir().unwrap();
        let store = Memory::new();
        let out = output(&dir, store.clone());
        let mut w = out.writer(Stream::Stdout).unwrap();
        let mut e = out.writer(Stream::Stderr).unwrap();
        // The follower exists but does not read: the job prints on regardless.
        let batches = out.follow(1, ALL);
        tokio::pin!(batches);
        print(&mut w, &mut e, 1, 100);
        let ring_first = out.ring_first();
        assert!(
            ring_first > 31 && ring_first <= 100,
            "most lines left the ring: {ring_first}"
        );
        assert_eq!(store.count(&JobId::from_number(1)), 100);

        let mut got = Vec::new();
        while got.iter().map(Batch::len).sum::<usize>() < 100 {
            got.push(batches.next().await.unwrap().unwrap());
        }
        assert!(
            got.iter()
                .all(|b| b.len() <= ALL.lines && b.truncated_before.is_none())
        );
        let first = got[0].pieces[0].0.clone();
        assert!(
            !out.ring
                .lock()
                .unwrap()
                .chunks_from(1)
                .any(|c| Arc::ptr_eq(c, &first)),
            "the first batch came from the store"
        );
        let last = got.last().unwrap().pieces.last().unwrap().0.clone();
        assert!(
            out.ring
                .lock()
                .unwrap()
                .chunks_from(1)
                .any(|c| Arc::ptr_eq(c, &last)),
            "the last batch came from the ring"
        );
        // Everything is read and the output is open: the follower waits.
        assert!(batches.next().now_or_never().is_none());

        print(&mut w, &mut e, 101, 110);
        while got.iter().map(Batch::len).sum::<usize>() < 110 {
            got.push(batches.next().await.unwrap().unwrap());
        }
        assert!(batches.next().now_or_never().is_none());
        w.finish();
        assert!(batches.next().now_or_never().is_none(), "stderr is still open");
        e.finish();
        assert!(batches.next().await.is_none(), "ends once the output is closed");
        assert_eq!(seqs(&got), (1..=110).collect::<Vec<u64>>());
    }

    #[tokio::test]
    async fn a_follower_after_the_end_gets_every_line_as_stored_and_ends() {
        let dir = tempfile::tempdir().unwrap();
        let out = output(&dir, Memory::new());
        let mut w = out.writer(Stream::Stdout).unwrap();
        let mut e = out.writer(Stream::Stderr).unwrap();
        print(&mut w, &mut e, 1, 100);
        w.finish();
        e.finish();
        let got: Vec<Batch> = out.follow(1, ALL).map(|b| b.unwrap()).collect().await;
        assert_eq!(seqs(&got), (1..=100).collect::<Vec<u64>>());
        // The lines are the ones a page gives (timestamps included).
        let lines: Vec<Line> = got.iter().flat_map(|b| b.lines()).collect();
        let page = out.read(&LogQuery::default()).unwrap();
        assert_eq!(lines, page.lines);
        // From a seq on, and of one stream.
        let stderr = FollowPage {
            stream: Some(Stream::Stderr),
            ..ALL
        };
        let got: Vec<Batch> = out.follow(50, stderr).map(|b| b.unwrap()).collect().await;
        assert_eq!(seqs(&got), (51..=99).step_by(3).collect::<Vec<u64>>());
        // Past the last line: nothing, and the stream ends.
        assert_eq!(out.follow(101, ALL).count().await, 0);
    }

    #[tokio::test]
    async fn lines_dropped_by_the_cap_are_said_on_the_first_batch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Memory::new();
        let out = output(&dir, store.clone());
        let mut w = out.writer(Stream::Stdout).unwrap();
        let mut e = out.writer(Stream::Stderr).unwrap();
        print(&mut w, &mut e, 1, 60);
        store.drop_before(&JobId::from_number(1), 40);
        let batches = out.follow(1, ALL);
        tokio::pin!(batches);
        let first = batches.next().await.unwrap().unwrap();
        assert_eq!(first.truncated_before, Some(40));
        assert_eq!(first.lines().next().unwrap().seq, 40);
        w.finish();
        e.finish();
        let mut got = vec![first];
        while let Some(b) = batches.next().await {
            let b = b.unwrap();
            assert_eq!(b.truncated_before, None);
            got.push(b);
        }
        assert_eq!(seqs(&got), (40..=60).collect::<Vec<u64>>());
    }

    #[tokio::test]
    async fn a_follower_of_one_stream_reads_it_from_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let out = output(&dir, Memory::new());
        let mut w = out.writer(Stream::Stdout).unwrap();
        let mut e = out.writer(Stream::Stderr).unwrap();
        let stderr = FollowPage {
            stream: Some(Stream::Stderr),
            lines: 2,
            ..ALL
        };
        let batches = out.follow(1, stderr);
        tokio::pin!(batches);
        print(&mut w, &mut e, 1, 12);
        assert_eq!(out.ring_first(), 1, "every line is still in the ring");
        let mut got = Vec::new();
        while got.iter().map(Batch::len).sum::<usize>() < 4 {
            let batch = batches.next().await.unwrap().unwrap();
            assert!(batch.len() <= 2);
            let ring = out.ring.lock().unwrap();
            for (chunk, _) in &batch.pieces {
                assert!(
                    ring.chunks_from(1).any(|c| Arc::ptr_eq(c, chunk)),
                    "shared with the ring"
                );
            }
            drop(ring);
            got.push(batch);
        }
        assert!(batches.next().now_or_never().is_none());
        print(&mut w, &mut e, 13, 15);
        w.finish();
        e.finish();
        while let Some(b) = batches.next().await {
            got.push(b.unwrap());
        }
        assert_eq!(seqs(&got), [3, 6, 9, 12, 15]);
    }
}
