//! Reading the store: output lines by seq (pages, tails, what the cap
//! dropped, what was lost; the scans are `scan.rs`), runs and events. Reads
//! use the store's own reader connection, beside the writer thread (WAL),
//! and never wait on it.

use rusqlite::{Connection, params};

use super::{RunRow, Store, blocks, db_err, scan};
use crate::error::Result;
use crate::model::{Event, Gap, JobId, JobInfo, Line, Stream};
use crate::persist::StoredPage;

impl Store {
    /// Lines of `job` with seq in `[from, until)`, at most `limit`, oldest
    /// first (lines lost on the way are left out: [`Store::page`] says where).
    pub fn lines(
        &self,
        job: &JobId,
        from: u64,
        until: u64,
        limit: usize,
        stream: Option<Stream>,
    ) -> Result<Vec<Line>> {
        Ok(self.page(job, (from, until), (limit, usize::MAX), stream)?.lines)
    }

    /// A page of `job`'s output (see [`crate::persist::OutputStore::page`]):
    /// stored blocks, then output held in memory while the store cannot
    /// write, every hole said as lost. The first seq still stored is read in
    /// the same snapshot: the writer may drop older lines at any moment, and
    /// a reader must say exactly where its page starts.
    pub fn page(
        &self,
        job: &JobId,
        (from, until): (u64, u64),
        (limit, max_bytes): (usize, usize),
        stream: Option<Stream>,
    ) -> Result<StoredPage> {
        // Taken before the snapshot: output written meanwhile is then in both
        // (read once), never in neither.
        let held = self.shared.held.of(job.as_str());
        let mut conn = self.reader.lock().unwrap();
        let err = |e| db_err(&self.path, e);
        let tx = conn.transaction().map_err(err)?;
        let start = dropped_before(&tx, job).map_err(err)?;
        let bounds = scan::Bounds {
            limit,
            max_bytes,
            stream,
        };
        let page = scan::page(&tx, job.as_str(), &held, (from, until), start, bounds).map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(page)
    }

    /// The last `n` lines of `job` before seq `until`, oldest first.
    pub fn tail(&self, job: &JobId, n: usize, until: u64, stream: Option<Stream>) -> Result<Vec<Line>> {
        Ok(self.tail_page(job, (n, until), usize::MAX, stream)?.0)
    }

    /// [`Store::tail`] of at most about `max_bytes` of text, with the gaps
    /// among the lines (and up to `until`, unless it is `u64::MAX`).
    pub fn tail_page(
        &self,
        job: &JobId,
        (n, until): (usize, u64),
        max_bytes: usize,
        stream: Option<Stream>,
    ) -> Result<(Vec<Line>, Vec<Gap>)> {
        let held = self.shared.held.of(job.as_str());
        let conn = self.reader.lock().unwrap();
        scan::tail(&conn, job.as_str(), &held, (n, until), max_bytes, stream)
            .map_err(|e| db_err(&self.path, e))
    }

    /// The first seq of `job` still stored after the per-job cap dropped its
    /// oldest lines (1 when nothing was dropped).
    pub fn dropped_before(&self, job: &JobId) -> Result<u64> {
        let conn = self.reader.lock().unwrap();
        dropped_before(&conn, job).map_err(|e| db_err(&self.path, e))
    }

    /// Highest stored seq of `job` (0 = none).
    pub fn last_seq(&self, job: &JobId) -> Result<u64> {
        let conn = self.reader.lock().unwrap();
        blocks::last_seq(&conn, job.as_str()).map_err(|e| db_err(&self.path, e))
    }

    /// Stored line counts of `job` per stream: (stdout, stderr).
    pub fn line_counts(&self, job: &JobId) -> Result<(u64, u64)> {
        let conn = self.reader.lock().unwrap();
        blocks::line_counts(&conn, job.as_str()).map_err(|e| db_err(&self.path, e))
    }

    /// Every stored run, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRow>> {
        let conn = self.reader.lock().unwrap();
        let mut stmt = conn
            .prepare("SELECT info, instance, owner, pgid, pid_start_time FROM runs ORDER BY number")
            .map_err(|e| db_err(&self.path, e))?;
        let rows = stmt
            .query_map([], |r| {
                let info: String = r.get(0)?;
                Ok((info, r.get(1)?, r.get(2)?, r.get(3)?, r.get::<_, Option<i64>>(4)?))
            })
            .map_err(|e| db_err(&self.path, e))?;
        let mut out = Vec::new();
        for row in rows {
            let (info, instance, owner, pgid, start) = row.map_err(|e| db_err(&self.path, e))?;
            match serde_json::from_str::<JobInfo>(&info) {
                Ok(info) => out.push(RunRow {
                    info,
                    instance,
                    owner,
                    pgid,
                    pid_start_time: start.map(|s| s as u64),
                }),
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable run record"),
            }
        }
        Ok(out)
    }

    /// One stored run by id.
    pub fn run(&self, id: &JobId) -> Result<Option<RunRow>> {
        let conn = self.reader.lock().unwrap();
        let row = conn
            .prepare_cached("SELECT info, instance, owner, pgid, pid_start_time FROM runs WHERE id = ?1")
            .and_then(|mut stmt| {
                let mut rows = stmt.query([id.as_str()])?;
                let Some(r) = rows.next()? else {
                    return Ok(None);
                };
                Ok(Some((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<i32>>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                )))
            })
            .map_err(|e| db_err(&self.path, e))?;
        Ok(row.and_then(|(info, instance, owner, pgid, start)| {
            Some(RunRow {
                info: serde_json::from_str(&info).ok()?,
                instance,
                owner,
                pgid,
                pid_start_time: start.map(|s| s as u64),
            })
        }))
    }

    /// Stored events with seq ≥ `since`, at most `limit`.
    pub fn events(&self, since: u64, limit: usize) -> Result<Vec<Event>> {
        let conn = self.reader.lock().unwrap();
        let mut stmt = conn
            .prepare_cached("SELECT body FROM events WHERE seq >= ?1 ORDER BY seq LIMIT ?2")
            .map_err(|e| db_err(&self.path, e))?;
        let rows = stmt
            .query_map(params![since as i64, limit as i64], |r| r.get::<_, String>(0))
            .map_err(|e| db_err(&self.path, e))?;
        let mut out = Vec::new();
        for body in rows {
            let body = body.map_err(|e| db_err(&self.path, e))?;
            if let Ok(e) = serde_json::from_str(&body) {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// Highest stored event seq (0 = none).
    pub fn max_event_seq(&self) -> Result<u64> {
        let conn = self.reader.lock().unwrap();
        conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| {
            r.get::<_, i64>(0)
        })
        .map(|v| v as u64)
        .map_err(|e| db_err(&self.path, e))
    }
}

pub(super) fn dropped_before(conn: &Connection, job: &JobId) -> rusqlite::Result<u64> {
    conn.query_row(
        "SELECT COALESCE(MAX(dropped_before), 1) FROM output_meta WHERE job = ?1",
        [job.as_str()],
        |r| r.get::<_, i64>(0),
    )
    .map(|v| v.max(1) as u64)
}

/// Look up one stored run by id (for tests and tools).
pub fn find_run(store: &Store, id: &JobId) -> Result<Option<RunRow>> {
    store.run(id)
}
