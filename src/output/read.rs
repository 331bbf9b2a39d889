//! Lines out, by page: a [`LogQuery`] answered from the ring for recent
//! lines and from the store for older ones (in one page when it spans both),
//! a tail, and the snippet. Every answer is at most a page ([`PAGE_LINES`],
//! [`PAGE_BYTES`]), whatever was asked. Lines the output cap dropped are
//! said (`truncated_before`), lines lost while the store could not write
//! are said as gaps (`lost`): never skipped silently.

use super::{JobOutput, Line, LogPage, LogQuery, PAGE_BYTES, PAGE_LINES, SNIPPET_BYTES, Stream};
use crate::error::Result;
use crate::model::Gap;
use crate::persist::StoredPage;

/// A page being filled: lines, the gaps said, and its bounds.
struct Page {
    lines: Vec<Line>,
    lost: Vec<Gap>,
    bytes: usize,
    limit: usize,
}

impl Page {
    fn full(&self) -> bool {
        self.lines.len() >= self.limit || self.bytes >= PAGE_BYTES
    }

    /// Add gaps, joining one that continues the last.
    fn add_lost(&mut self, gaps: Vec<Gap>) {
        for g in gaps {
            match self.lost.last_mut() {
                Some(last) if last.to + 1 == g.from => last.to = g.to,
                _ => self.lost.push(g),
            }
        }
    }
}

impl JobOutput {
    /// Read a page of lines by seq, or a tail: recent lines from the ring,
    /// older ones from the store. At most [`PAGE_LINES`] lines (or `limit`)
    /// and about [`PAGE_BYTES`] of text: read on from `next_seq`.
    pub fn read(&self, query: &LogQuery) -> Result<LogPage> {
        let limit = query.limit.unwrap_or(PAGE_LINES).clamp(1, PAGE_LINES);
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
        let from = query.since.unwrap_or(1).max(1);
        let mut page = Page {
            lines: Vec::new(),
            lost: Vec::new(),
            bytes: 0,
            limit,
        };
        let mut cursor = from;
        loop {
            let ring_first = self.ring_first();
            if cursor < ring_first {
                // Older than the ring: from the store, up to the ring.
                let stored = self.read_store(cursor, ring_first, &page, query.stream)?;
                // The store's start, read with the lines: exact even while
                // the writer is dropping old lines.
                first_available = stored.start.min(ring_first);
                cursor = stored.next;
                page.bytes += stored.lines.iter().map(|l| l.text.len()).sum::<usize>();
                page.lines.extend(stored.lines);
                page.add_lost(stored.lost);
                if page.full() {
                    break;
                }
            }
            let ring = self.ring.lock().unwrap();
            if cursor < ring.first_seq() {
                // Lines were evicted since we looked: back to the store.
                continue;
            }
            for (chunk, seq, text) in ring.lines_from(cursor) {
                if page.full() {
                    break;
                }
                cursor = seq + 1;
                if query.stream.is_none_or(|s| s == chunk.stream) {
                    page.bytes += text.len();
                    page.lines.push(chunk.line_of(seq, text));
                }
            }
            break;
        }
        Ok(LogPage {
            has_more: cursor <= last_seq,
            next_seq: cursor,
            lines: page.lines,
            last_seq,
            first_available_seq: first_available,
            truncated_before: (from < first_available).then_some(first_available),
            lost: page.lost,
        })
    }

    fn tail(&self, n: usize, stream: Option<Stream>, last_seq: u64) -> Result<LogPage> {
        let (mut lines, complete) = {
            let ring = self.ring.lock().unwrap();
            let mut bytes = 0;
            let mut lines: Vec<Line> = ring
                .newest_first()
                .filter(|(c, _, _)| stream.is_none_or(|s| s == c.stream))
                .take(n)
                .take_while(|(_, _, text)| {
                    let fits = bytes < PAGE_BYTES;
                    bytes += text.len();
                    fits
                })
                .map(|(c, seq, text)| c.line_of(seq, text))
                .collect();
            lines.reverse();
            (lines, ring.first_seq() <= 1)
        };
        let mut lost = Vec::new();
        let bytes: usize = lines.iter().map(|l| l.text.len()).sum();
        if lines.len() < n && !complete && bytes < PAGE_BYTES {
            // The ring holds fewer than n matching lines: the rest are in the store.
            let until = lines.first().map(|l| l.seq).unwrap_or(last_seq + 1);
            self.store.flush();
            let (mut older, gaps) =
                self.store
                    .tail(&self.job, (n - lines.len(), until), PAGE_BYTES - bytes, stream)?;
            older.extend(lines);
            lines = older;
            lost = gaps;
        }
        Ok(LogPage {
            lines,
            next_seq: last_seq + 1,
            has_more: false,
            last_seq,
            first_available_seq: 1,
            truncated_before: None,
            lost,
        })
    }

    /// Lines from the store with seq in `[from, until)`, as many as `page`
    /// has room for. A hole may only be lines still queued for the store:
    /// the writer is waited for once before it is reported lost.
    fn read_store(&self, from: u64, until: u64, page: &Page, stream: Option<Stream>) -> Result<StoredPage> {
        let room = (
            page.limit.saturating_sub(page.lines.len()),
            PAGE_BYTES.saturating_sub(page.bytes),
        );
        let stored = self.store.page(&self.job, (from, until), room, stream)?;
        if stored.lost.is_empty() {
            return Ok(stored);
        }
        self.store.flush();
        self.store.page(&self.job, (from, until), room, stream)
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
            let (lines, _) = self
                .store
                .tail(&self.job, (64, u64::MAX), 64 * SNIPPET_BYTES, None)
                .unwrap_or_default();
            return snippet_of(lines.iter().rev().map(|l| l.text.as_str()));
        }
        snippet_of(ring.newest_first().map(|(_, _, text)| text))
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

/// A failing disk: batches the store cannot write leave gaps that every
/// read says, page by page, exactly once.
#[cfg(test)]
mod lost_tests;
