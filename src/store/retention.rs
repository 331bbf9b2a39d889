//! What the store keeps, and for how long: the per-job output cap and
//! history pruning.
//!
//! The cap. Each job may keep at most `cap` bytes of lines in the store
//! (as printed: text and newline). The writer thread accounts every batch it
//! inserts in coarse chunks (about 1/64 of the cap each, so the bookkeeping is
//! ~64 entries per job however the job prints); once a job is over its cap
//! the blocks holding its oldest chunks are deleted and the first seq still
//! stored is recorded in `output_meta.dropped_before`. Readers use it to say `truncated_before`
//! instead of silently starting later. A job the writer has not seen since
//! it started (a restart, an adopted container) is accounted from the table
//! once, as one chunk.
//!
//! Pruning deletes whole finished runs (their record, lines, events and
//! `output_meta`) in one transaction; which runs is the manager's decision.

use std::collections::{HashMap, VecDeque};

use rusqlite::{Connection, params};

/// What a stored line counts beyond its text: its newline, so the cap
/// counts the bytes the job printed. (Its record's stream, timestamp and
/// length cost a few bytes more before compression and next to nothing
/// in a run of one read's lines; the cap is what the job said, not the
/// disk's account of it, which the store's full-disk handling covers.)
pub const LINE_OVERHEAD: u64 = 1;
/// How finely a job's stored output is accounted (and dropped): cap / CHUNKS.
const CHUNKS: u64 = 64;

/// Per-job accounting of stored output, owned by the writer thread.
pub(super) struct Budgets {
    cap: u64,
    jobs: HashMap<String, JobBudget>,
}

#[derive(Default)]
struct JobBudget {
    total: u64,
    /// (last seq, bytes) of each accounted chunk, oldest first.
    chunks: VecDeque<(u64, u64)>,
}

impl Budgets {
    pub fn new(cap: u64) -> Self {
        Budgets {
            cap: cap.max(1),
            jobs: HashMap::new(),
        }
    }

    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Account what `job` already has in the table, the first time it is seen.
    pub fn ensure(&mut self, conn: &Connection, job: &str) -> rusqlite::Result<()> {
        if self.jobs.contains_key(job) {
            return Ok(());
        }
        let (bytes, last): (i64, i64) = conn.query_row(
            "SELECT COALESCE(SUM(LENGTH(data) + (n_stdout + n_stderr) * ?2), 0), COALESCE(MAX(last_seq), 0)
             FROM blocks WHERE job = ?1",
            params![job, LINE_OVERHEAD as i64],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let mut b = JobBudget::default();
        if bytes > 0 {
            b.total = bytes as u64;
            b.chunks.push_back((last as u64, bytes as u64));
        }
        self.jobs.insert(job.to_string(), b);
        Ok(())
    }

    /// Account `bytes` of lines up to `last_seq` just stored for `job`.
    /// Returns the seq below which lines must now be dropped, if any.
    pub fn add(&mut self, job: &str, last_seq: u64, bytes: u64) -> Option<u64> {
        let chunk = (self.cap / CHUNKS).max(1);
        let b = self.jobs.entry(job.to_string()).or_default();
        b.total += bytes;
        match b.chunks.back_mut() {
            Some((last, size)) if *size < chunk => {
                *last = last_seq;
                *size += bytes;
            }
            _ => b.chunks.push_back((last_seq, bytes)),
        }
        let mut cut = None;
        // Always keep the newest chunk, however large: the tail of a job is
        // what its reader wants most.
        while b.total > self.cap && b.chunks.len() > 1 {
            let (last, size) = b.chunks.pop_front().expect("len > 1");
            b.total -= size;
            cut = Some(last + 1);
        }
        cut
    }

    /// Forget pruned jobs.
    pub fn forget(&mut self, job: &str) {
        self.jobs.remove(job);
    }
}

/// Drop `job`'s blocks that end below `cut` and remember where its output
/// now starts: the first seq of the oldest block kept (a block is kept or
/// dropped whole, so the start is exact even when `cut` falls inside one).
pub(super) fn drop_before(conn: &Connection, job: &str, cut: u64) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM blocks WHERE job = ?1 AND last_seq < ?2")?
        .execute(params![job, cut as i64])?;
    let start: i64 = conn
        .prepare_cached("SELECT COALESCE(MIN(first_seq), ?2) FROM blocks WHERE job = ?1")?
        .query_row(params![job, cut as i64], |r| r.get(0))?;
    conn.prepare_cached(
        "INSERT INTO output_meta (job, dropped_before) VALUES (?1, ?2)
         ON CONFLICT (job) DO UPDATE SET dropped_before = MAX(dropped_before, ?2)",
    )?
    .execute(params![job, start])?;
    Ok(())
}

/// Delete every trace of the runs `jobs`.
pub(super) fn prune(conn: &Connection, jobs: &[String]) -> rusqlite::Result<()> {
    for job in jobs {
        for sql in [
            "DELETE FROM blocks WHERE job = ?1",
            "DELETE FROM events WHERE job = ?1",
            "DELETE FROM output_meta WHERE job = ?1",
            "DELETE FROM runs WHERE id = ?1",
        ] {
            conn.prepare_cached(sql)?.execute([job])?;
        }
    }
    Ok(())
}

/// After a prune: return freed pages to the file system (databases created
/// with incremental auto-vacuum) and shrink the WAL back.
pub(super) fn give_back_space(conn: &Connection) -> rusqlite::Result<()> {
    {
        // The pragma frees one page per step: step it to the end (and drop
        // the statement, so it holds no read lock during the checkpoint).
        let mut stmt = conn.prepare("PRAGMA incremental_vacuum")?;
        let mut rows = stmt.query([])?;
        while rows.next()?.is_some() {}
    }
    let (busy, _, _): (i64, i64, i64) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })?;
    if busy != 0 {
        tracing::debug!(
            busy,
            "checkpoint after prune was busy; the WAL shrinks at the next one"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_chunks_go_first_and_the_newest_always_stays() {
        let mut b = Budgets::new(6400);
        // 100-byte chunks merge into 100-byte accounting chunks (cap/64).
        let mut cut = None;
        for seq in 1..=100u64 {
            cut = b.add("job-1", seq, 100).or(cut);
        }
        // 10 000 bytes stored against a cap of 6 400: the oldest 36 lines went.
        assert_eq!(cut, Some(37));
        assert_eq!(b.jobs["job-1"].total, 6400);
        // One chunk far over the cap drops everything older but itself.
        assert_eq!(b.add("job-1", 101, 1_000_000), Some(101));
        assert_eq!(b.jobs["job-1"].chunks.len(), 1);
        // Jobs are accounted apart.
        assert_eq!(b.add("job-2", 1, 10), None);
    }
}
