//! Lines out, by page: a [`LogQuery`] answered from the ring for recent
//! lines and from the store for older ones (in one page when it spans both),
//! a tail, and the snippet. Lines the output cap dropped are said
//! (`truncated_before`), never skipped silently.

use super::{JobOutput, Line, LogPage, LogQuery, SNIPPET_BYTES, Stream};
use crate::error::Result;

impl JobOutput {
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
        if ring.is_empty() && ring.next_seq > 1 {
            // A job that ended before this manager started: from the store.
            drop(ring);
            let lines = self.store.tail(&self.job, 64, u64::MAX, None).unwrap_or_default();
            return snippet_of(lines.iter().rev().map(|l| l.text.as_str()));
        }
        snippet_of(ring.newest_first().map(|(c, i)| c.text(i)))
    }
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
    use crate::events::EventLog;
    use crate::model::JobId;
    use crate::store::Store;
    use crate::watch::Watchers;
    use pretty_assertions::assert_eq;
    use std::sync::Arc;

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
