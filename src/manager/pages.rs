//! Pages of the job list and of the event log, bounded by count and by
//! bytes, whatever a caller asks: one answer of `ps` or `events` can never
//! hold the whole history in memory at once (the red team's 2,000 queued
//! jobs with 100 KB labels made one list answer of 392 MB). A page says
//! where the next one starts (`more` for jobs, `next_seq` for events); the
//! API and the CLI page through.
//!
//! A page is cut before the item that would take it past
//! [`MAX_PAGE_BYTES`] of JSON, but always holds at least one item, so a
//! caller paging through always moves on.

use serde::Serialize;

use super::{ListFilter, Manager, number};
use crate::events::Event;
use crate::model::{JobId, JobInfo};

/// Most jobs or events in one answer, whatever the caller asks.
pub const MAX_PAGE_ITEMS: usize = 1000;
/// Most bytes of JSON in one page of jobs or events (one item may pass it alone).
pub const MAX_PAGE_BYTES: usize = 1 << 20;

/// A page of the job list, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobPage {
    pub jobs: Vec<JobInfo>,
    /// Set when older jobs of the same filter remain: the `before` of the
    /// next page (the id of this page's last job).
    pub more: Option<JobId>,
}

/// A page of the event log, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventPage {
    pub events: Vec<Event>,
    /// The `since` of the next page (the seq the next event gets when this
    /// page reached the newest).
    pub next_seq: u64,
    /// Newer events than this page's are in the log already.
    pub more: bool,
}

/// Adds up what `item` takes as JSON without building it.
fn json_len(item: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, item);
    c.0
}

/// Whether a page of `count` items and `bytes` bytes may take one more of `next` bytes.
fn fits(count: usize, bytes: usize, next: usize, limit: usize) -> bool {
    count == 0 || (count < limit && bytes + next <= MAX_PAGE_BYTES)
}

/// The first items of `items` that fit a page of `limit` (and
/// [`MAX_PAGE_ITEMS`]) items and [`MAX_PAGE_BYTES`] bytes, and whether any
/// is left. Only what the page takes (and one more) is drawn from `items`.
pub fn take_page<T: Serialize>(items: impl IntoIterator<Item = T>, limit: usize) -> (Vec<T>, bool) {
    let limit = limit.clamp(1, MAX_PAGE_ITEMS);
    let mut page = Vec::new();
    let mut bytes = 0;
    for item in items {
        let size = json_len(&item);
        if !fits(page.len(), bytes, size, limit) {
            return (page, true);
        }
        bytes += size;
        page.push(item);
    }
    (page, false)
}

/// A page of `jobs` (newest first) below `before`.
pub fn job_page(jobs: impl IntoIterator<Item = JobInfo>, before: Option<&JobId>, limit: usize) -> JobPage {
    let below = before.and_then(number).unwrap_or(u64::MAX);
    let older = jobs
        .into_iter()
        .filter(|j| number(&j.id).is_some_and(|n| n < below));
    let (jobs, more) = take_page(older, limit);
    JobPage {
        more: more.then(|| jobs.last().map(|j| j.id.clone())).flatten(),
        jobs,
    }
}

impl Manager {
    /// Jobs that `filter` admits, newest first, numbered below `before`: at
    /// most `limit` (and [`MAX_PAGE_ITEMS`]) and [`MAX_PAGE_BYTES`] of JSON.
    /// Only the jobs of the page are copied out of the registry.
    /// Finished jobs let go of memory (`finished.rs`) are read back from the
    /// store and listed in their place.
    pub fn list_page(&self, filter: ListFilter, before: Option<&JobId>, limit: usize) -> JobPage {
        let below = before.and_then(number).unwrap_or(u64::MAX);
        if filter == ListFilter::Running || !self.inner.some_let_go() {
            let reg = self.inner.registry.lock().unwrap();
            let admitted = reg
                .jobs
                .range(..below)
                .rev()
                .map(|(_, e)| e)
                .filter(|e| filter.admits(&e.info.status))
                .map(|e| reg.snapshot(e));
            return job_page(admitted, None, limit);
        }
        let mut jobs: Vec<JobInfo> = {
            let reg = self.inner.registry.lock().unwrap();
            reg.jobs
                .range(..below)
                .map(|(_, e)| e)
                .filter(|e| filter.admits(&e.info.status))
                .map(|e| reg.snapshot(e))
                .collect()
        };
        let stored = self.inner.stored_finished(|n| n >= below || self.in_registry(n));
        jobs.extend(stored.into_iter().filter(|i| filter.admits(&i.status)));
        jobs.sort_by_key(|j| std::cmp::Reverse(number(&j.id).unwrap_or(0)));
        job_page(jobs, None, limit)
    }

    /// Events with `seq >= since`, oldest first: at most `limit` (and
    /// [`MAX_PAGE_ITEMS`]) and [`MAX_PAGE_BYTES`] of JSON.
    pub fn events_page(&self, since: u64, limit: usize) -> EventPage {
        let log = &self.inner.events;
        let (events, _) = take_page(log.since(since, limit.clamp(1, MAX_PAGE_ITEMS)), limit);
        // Past the newest event, the answer is the seq the next one gets (how a
        // client follows "from now").
        let next = log.next_seq();
        let next_seq = events
            .last()
            .map(|e| e.seq + 1)
            .unwrap_or(since.clamp(1, next.max(1)));
        EventPage {
            more: next_seq < next,
            events,
            next_seq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_always_takes_one_item_and_stops_at_its_bounds() {
        assert!(fits(0, 0, MAX_PAGE_BYTES * 4, 10), "one item, however big");
        assert!(!fits(1, 10, MAX_PAGE_BYTES, 10), "the next would pass the bytes");
        assert!(!fits(10, 0, 1, 10), "the count is reached");
        assert!(fits(9, MAX_PAGE_BYTES - 5, 5, 10));
        assert_eq!(json_len(&serde_json::json!({"a": "bc"})), r#"{"a":"bc"}"#.len());
    }

    /// Pages by count and by bytes: 3 items of 600 KB are three pages of
    /// one, 10 small ones two pages of 5 (limit), the last saying no more.
    #[test]
    fn pages_are_cut_by_count_and_by_bytes() {
        let big = vec!["x".repeat(600 << 10); 3];
        let (page, more) = take_page(big.iter(), 50);
        assert_eq!((page.len(), more), (1, true));
        let (page, more) = take_page(big.iter().skip(2), 50);
        assert_eq!((page.len(), more), (1, false));
        let small: Vec<u32> = (0..10).collect();
        assert_eq!(take_page(small.iter(), 5), (vec![&0, &1, &2, &3, &4], true));
        assert!(!take_page(small.iter().skip(5), 5).1);
        assert_eq!(take_page(small.iter(), usize::MAX).0.len(), 10);
        assert_eq!(take_page(small.iter(), 0).0.len(), 1, "a page holds one at least");
    }
}
