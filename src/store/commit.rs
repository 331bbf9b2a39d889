//! One batch of writes as one transaction: output appended to each job's
//! open block (see `blocks.rs`), events, run records and prunes, and the
//! per-job cap applied as lines come in.
//!
//! Each job with output in flight has one open block here; every commit
//! writes it (inserting it the first time, replacing it with more lines
//! after), so a line is durable as soon as its batch commits, while a busy
//! job costs one row per ~64 KiB. A block is sealed — forgotten here, final
//! on disk — when it is full or a second old, and open blocks idle that
//! long are forgotten even when no more writes come, so an ended job holds
//! nothing here. Lines at or below a job's last stored seq are replays and
//! dropped; a line past a hole (output lost while the store could not
//! write) starts a new block, so holes stay visible to readers.

use std::collections::HashMap;
use std::time::Instant;

use chrono::Utc;
use rusqlite::{Connection, TransactionBehavior, params};

use super::blocks::{self, BLOCK_AGE, OpenBlock};
use super::{LINE_OVERHEAD, Op, RunRow, retention};
use crate::model::Chunk;

/// What the writer knows of a job's stored output.
#[derive(Default)]
struct JobState {
    /// Highest seq stored (lines at or below it are replays, dropped).
    last_seq: u64,
    open: Option<OpenBlock>,
    /// The open block has lines not yet written.
    dirty: bool,
    /// The open block was a [`BLOCK_AGE`] old when this batch of lines came
    /// (looked at once per batch, not per line).
    aged: bool,
}

pub(super) struct Committer {
    conn: Connection,
    budgets: retention::Budgets,
    jobs: HashMap<String, JobState>,
}

impl Committer {
    pub fn new(conn: Connection, cap: u64) -> Self {
        Committer {
            conn,
            budgets: retention::Budgets::new(cap),
            jobs: HashMap::new(),
        }
    }

    /// After a failed commit: what is in memory may be ahead of the
    /// rolled-back table, so start over from the table.
    pub fn reset(&mut self) {
        self.jobs.clear();
        self.budgets = retention::Budgets::new(self.budgets.cap());
    }

    /// Fold the log into the database and truncate it (what readers still
    /// use stays: a partial checkpoint is fine).
    pub fn checkpoint(&self) -> rusqlite::Result<()> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
    }

    /// Give space freed by a prune back to the file system.
    pub fn give_back_space(&self) -> rusqlite::Result<()> {
        retention::give_back_space(&self.conn)
    }

    /// Seal open blocks that are a second old (they are on disk already),
    /// and forget jobs that have nothing open.
    pub fn forget_idle(&mut self) {
        for state in self.jobs.values_mut() {
            if !state.dirty
                && state
                    .open
                    .as_ref()
                    .is_some_and(|b| b.opened.elapsed() >= BLOCK_AGE)
            {
                state.open = None;
            }
        }
        self.jobs.retain(|_, s| s.open.is_some());
    }

    /// One transaction for the whole batch, taken IMMEDIATE: a deferred one
    /// that reads first and then writes fails at once (SQLITE_BUSY, no busy
    /// handler) when another connection wrote in between.
    pub fn write_batch(&mut self, batch: &[Op]) -> rusqlite::Result<Vec<PruneOutcome>> {
        let mut pruned = Vec::new();
        let mut ended = Vec::new();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut known = Jobs {
            budgets: &mut self.budgets,
            jobs: &mut self.jobs,
        };
        {
            let mut event = tx.prepare_cached(
                "INSERT OR IGNORE INTO events (seq, job, ts, body) VALUES (?1, ?2, ?3, ?4)",
            )?;
            let mut run = tx.prepare_cached(
                "INSERT INTO runs (id, number, status, info, updated_at, instance, owner, container_id, pid, pgid, pid_start_time)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT (id) DO UPDATE SET status = ?3, info = ?4, updated_at = ?5, instance = ?6, owner = ?7,
                   container_id = ?8, pid = ?9, pgid = ?10, pid_start_time = ?11",
            )?;
            for op in batch {
                match op {
                    Op::Lines(job, lines) => {
                        let job = job.as_str();
                        let state = known.state(&tx, job)?;
                        let mut bytes = 0;
                        for l in lines {
                            let (code, ts) = (blocks::stream_code(l.stream), l.ts.timestamp_millis());
                            bytes += state.push(&tx, job, (l.seq, code, ts, &l.text))?;
                        }
                        known.account(&tx, job, bytes)?;
                    }
                    Op::Chunk(job, chunk) => {
                        let job = job.as_str();
                        let state = known.state(&tx, job)?;
                        let bytes = state.push_chunk(&tx, job, chunk)?;
                        known.account(&tx, job, bytes)?;
                    }
                    Op::Event(e) => {
                        let body = serde_json::to_string(e).unwrap_or_default();
                        event.execute(params![e.seq as i64, e.job.as_str(), e.ts.to_rfc3339(), body])?;
                    }
                    Op::Run(r) => {
                        if r.info.status.is_terminal() {
                            ended.push(r.info.id.as_str());
                        }
                        put_run(&mut run, r)?;
                    }
                    Op::Flush(_) | Op::Checkpoint(_) | Op::Settle(_) => {}
                    Op::Prune(jobs, _) => {
                        // A failed prune is answered, not a failed batch.
                        let result = retention::prune(&tx, jobs).map_err(|e| e.to_string());
                        for j in jobs {
                            known.budgets.forget(j);
                            known.jobs.remove(j);
                        }
                        pruned.push(result);
                    }
                }
            }
            // Everything appended in this batch is written with it.
            known.write_open(&tx)?;
        }
        tx.commit()?;
        // A finished job's output is complete (drained before its end is
        // recorded) and on disk: its open block (~65 KiB) need not wait for
        // the idle sweep, and its retention budget need not stay for ever
        // (a finished job costs the writer nothing). A line that still came
        // would be read back from the table first, as after a restart.
        for job in ended {
            self.jobs.remove(job);
            self.budgets.forget(job);
        }
        Ok(pruned)
    }
}

/// Insert or update a run's row.
fn put_run(stmt: &mut rusqlite::CachedStatement<'_>, r: &RunRow) -> rusqlite::Result<()> {
    let info = serde_json::to_string(&r.info).unwrap_or_default();
    let number: i64 = r.info.id.as_str().trim_start_matches("job-").parse().unwrap_or(0);
    stmt.execute(params![
        r.info.id.as_str(),
        number,
        r.info.status.name(),
        info,
        Utc::now().to_rfc3339(),
        r.instance,
        r.owner,
        r.info.container_id,
        r.info.pid,
        r.pgid,
        r.pid_start_time.map(|s| s as i64),
    ])?;
    Ok(())
}

/// The writer's per-job knowledge (apart from its connection, which the
/// open transaction holds).
struct Jobs<'a> {
    budgets: &'a mut retention::Budgets,
    jobs: &'a mut HashMap<String, JobState>,
}

impl Jobs<'_> {
    /// Write each open block that took lines since it was last written.
    fn write_open(&mut self, tx: &Connection) -> rusqlite::Result<()> {
        for (job, state) in self.jobs.iter_mut() {
            if state.dirty
                && let Some(b) = &state.open
            {
                b.write(tx, job)?;
                state.dirty = false;
            }
        }
        Ok(())
    }

    /// What the writer knows of `job`, read from the table the first time.
    fn state(&mut self, tx: &Connection, job: &str) -> rusqlite::Result<&mut JobState> {
        self.budgets.ensure(tx, job)?;
        if !self.jobs.contains_key(job) {
            let last_seq = blocks::last_seq(tx, job)?;
            self.jobs.insert(
                job.to_string(),
                JobState {
                    last_seq,
                    ..Default::default()
                },
            );
        }
        let state = self.jobs.get_mut(job).expect("inserted above");
        let now = Instant::now();
        state.aged = state
            .open
            .as_ref()
            .is_some_and(|b| now.duration_since(b.opened) >= BLOCK_AGE);
        Ok(state)
    }

    /// Count `bytes` of new lines against `job`'s cap, dropping its oldest
    /// blocks when it is over.
    fn account(&mut self, tx: &Connection, job: &str, bytes: u64) -> rusqlite::Result<()> {
        let Some(state) = self.jobs.get_mut(job) else {
            return Ok(());
        };
        if bytes > 0
            && let Some(cut) = self.budgets.add(job, state.last_seq, bytes)
        {
            // The open block's row must be current before blocks below the
            // cut are chosen.
            if let Some(b) = &state.open {
                b.write(tx, job)?;
                state.dirty = false;
            }
            retention::drop_before(tx, job, cut)?;
        }
        Ok(())
    }
}

impl JobState {
    /// Append one line to the job's open block (writing out the previous
    /// block when this one cannot go on). Returns the bytes it counts
    /// against the cap: 0 for a replay of a stored line.
    fn push(
        &mut self,
        tx: &Connection,
        job: &str,
        (seq, stream, ts, text): (u64, u8, i64, &str),
    ) -> rusqlite::Result<u64> {
        if seq <= self.last_seq {
            return Ok(0); // a replay of what is stored
        }
        self.block_for(tx, job, seq, ts)?.push(stream, ts, text);
        self.last_seq = seq;
        Ok(text.len() as u64 + LINE_OVERHEAD)
    }

    /// Append a chunk's lines (those not stored yet) as runs, one per block
    /// they fill: one copy of its text, not a record per line. Returns the
    /// bytes they count against the cap.
    fn push_chunk(&mut self, tx: &Connection, job: &str, chunk: &Chunk) -> rusqlite::Result<u64> {
        let (stream, ts) = (blocks::stream_code(chunk.stream), chunk.ts.timestamp_millis());
        let mut at = chunk.index_of(self.last_seq + 1);
        let mut bytes = 0;
        while at < chunk.len() {
            let seq = chunk.first_seq + at as u64;
            let block = self.block_for(tx, job, seq, ts)?;
            let end = chunk.fit(at, usize::MAX, block.room().max(1));
            let text = chunk.lines_text(at..end);
            block.push_run(stream, ts, end - at, text);
            let n = (end - at) as u64;
            bytes += text.len() as u64 - n + n * LINE_OVERHEAD;
            self.last_seq = chunk.first_seq + end as u64 - 1;
            at = end;
        }
        Ok(bytes)
    }

    /// The open block that line `seq` goes on (writing out the previous
    /// block when this one cannot go on), marked as having unwritten lines.
    fn block_for(
        &mut self,
        tx: &Connection,
        job: &str,
        seq: u64,
        ts: i64,
    ) -> rusqlite::Result<&mut OpenBlock> {
        let next = match self.open.take() {
            Some(b) if b.last_seq + 1 == seq && !b.is_full() && !self.aged => b,
            Some(b) => {
                if self.dirty {
                    b.write(tx, job)?;
                }
                self.aged = false;
                OpenBlock::new(seq, ts)
            }
            None => OpenBlock::new(seq, ts),
        };
        self.dirty = true;
        Ok(self.open.insert(next))
    }
}

/// What one prune in a batch came to (the database's message on failure).
pub(super) type PruneOutcome = Result<(), String>;

/// Busy or locked: another connection holds the database; it will pass.
pub(super) fn is_transient(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}
