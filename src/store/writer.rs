//! The store's one writer thread: it takes whatever is queued and commits it
//! as one transaction, so under load batches grow by themselves and under
//! light load each write lands within a few milliseconds.
//!
//! Output goes into blocks (see `blocks.rs`). Each job with output in flight
//! has one open block here; every commit writes it (inserting it the first
//! time, replacing it with more lines after), so a line is durable as soon as
//! its batch commits, as before blocks, while a busy job costs one row per
//! ~64 KiB. A block is sealed — forgotten here, final on disk — when it is
//! full or a second old, and open blocks idle that long are forgotten even
//! when no more writes come, so an ended job holds nothing here.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError};

use std::time::{Duration, Instant};

use chrono::Utc;
use rusqlite::{Connection, TransactionBehavior, params};

use super::blocks::{self, BLOCK_AGE, OpenBlock};
use super::{LINE_OVERHEAD, Op, QUEUE_BOUND, Room, retention};

/// How long a batch is tried again while the database stays busy (on top of
/// each attempt's own busy timeout), and the backoff between attempts.
const RETRY_FOR: Duration = Duration::from_secs(60);
const RETRY_FIRST: Duration = Duration::from_millis(20);
const RETRY_MAX_DELAY: Duration = Duration::from_secs(1);

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

pub(super) struct Writer {
    conn: Connection,
    budgets: retention::Budgets,
    jobs: HashMap<String, JobState>,
}

impl Writer {
    pub fn new(conn: Connection, cap: u64) -> Self {
        Writer {
            conn,
            budgets: retention::Budgets::new(cap),
            jobs: HashMap::new(),
        }
    }

    pub fn run(mut self, rx: Receiver<Op>, room: &Room, path: &Path) {
        loop {
            let first = match rx.recv_timeout(BLOCK_AGE) {
                Ok(op) => op,
                Err(RecvTimeoutError::Timeout) => {
                    self.forget_idle();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let mut batch = vec![first];
            // Take whatever else is queued: the busier the jobs, the bigger the batch.
            while batch.len() < QUEUE_BOUND {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            room.taken(batch.len());
            let result = self.write_with_retries(&batch, path);
            let pruned_any = matches!(&result, Ok(p) if !p.is_empty());
            if pruned_any && let Err(e) = retention::give_back_space(&self.conn) {
                tracing::warn!(path = %path.display(), error = %e, "could not shrink the store after a prune");
            }
            let mut outcomes = match &result {
                Ok(p) => p.clone().into_iter(),
                Err(_) => Vec::new().into_iter(),
            };
            for op in batch {
                match op {
                    Op::Flush(f) => {
                        let _ = f.send(());
                    }
                    Op::Prune(_, reply) => {
                        let answer = match &result {
                            Err(e) => Err(e.to_string()),
                            Ok(_) => outcomes.next().unwrap_or(Ok(())),
                        };
                        let _ = reply.send(answer);
                    }
                    _ => {}
                }
            }
            self.forget_idle();
        }
    }

    /// Commit `batch`, trying again while the database is busy or locked
    /// (another berth process sharing the state dir holds the write lock
    /// longer than the busy timeout): output is never dropped for a
    /// contention that passes. Any other failure is logged and the batch is
    /// lost (what is in memory may not be on disk: start over from the table).
    fn write_with_retries(
        &mut self,
        batch: &[Op],
        path: &Path,
    ) -> Result<Vec<PruneOutcome>, rusqlite::Error> {
        let mut delay = RETRY_FIRST;
        let started = Instant::now();
        loop {
            let result = self.write_batch(batch);
            if let Err(e) = &result {
                // In-memory block state may be ahead of the rolled-back table.
                self.jobs.clear();
                self.budgets = retention::Budgets::new(self.budgets.cap());
                if is_transient(e) && started.elapsed() < RETRY_FOR {
                    tracing::warn!(path = %path.display(), error = %e, "store busy; writing the batch again");
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(RETRY_MAX_DELAY);
                    continue;
                }
                tracing::error!(path = %path.display(), error = %e, "store write failed");
            }
            return result;
        }
    }

    /// Seal open blocks that are a second old (they are on disk already),
    /// and forget jobs that have nothing open.
    fn forget_idle(&mut self) {
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
    fn write_batch(&mut self, batch: &[Op]) -> rusqlite::Result<Vec<PruneOutcome>> {
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
                        let (code, ts) = (blocks::stream_code(chunk.stream), chunk.ts.timestamp_millis());
                        let mut bytes = 0;
                        for (seq, text) in chunk.iter() {
                            bytes += state.push(&tx, job, (seq, code, ts, text))?;
                        }
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
                        let info = serde_json::to_string(&r.info).unwrap_or_default();
                        let number: i64 = r.info.id.as_str().trim_start_matches("job-").parse().unwrap_or(0);
                        run.execute(params![
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
                    }
                    Op::Flush(_) => {}
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
            for (job, state) in known.jobs.iter_mut() {
                if state.dirty
                    && let Some(b) = &state.open
                {
                    b.write(&tx, job)?;
                    state.dirty = false;
                }
            }
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

/// The writer's per-job knowledge (apart from its connection, which the
/// open transaction holds).
struct Jobs<'a> {
    budgets: &'a mut retention::Budgets,
    jobs: &'a mut HashMap<String, JobState>,
}

impl Jobs<'_> {
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
        self.open.insert(next).push(stream, ts, text);
        self.last_seq = seq;
        self.dirty = true;
        Ok(text.len() as u64 + LINE_OVERHEAD)
    }
}

/// What one prune in a batch came to (the database's message on failure).
type PruneOutcome = Result<(), String>;

/// Busy or locked: another connection holds the database; it will pass.
fn is_transient(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use crate::model::JobId;
    use crate::model::{Line, Stream};
    use crate::store::Store;

    fn line(seq: u64) -> Line {
        Line {
            seq,
            stream: if seq.is_multiple_of(3) {
                Stream::Stderr
            } else {
                Stream::Stdout
            },
            ts: chrono::Utc::now(),
            text: format!("{seq:0>99}"),
        }
    }

    /// Under a small cap, whole blocks go and the recorded start is exactly
    /// the first line still readable; from there on nothing is missing.
    #[test]
    fn the_cap_drops_whole_blocks_and_says_exactly_where_output_starts() {
        let dir = tempfile::tempdir().unwrap();
        // 7/8 of 8 MiB for lines: about 53k of these 132-byte accounted lines.
        let store = Store::open_capped(&dir.path().join("berth.db"), 8 << 20).unwrap();
        let job = JobId::from_number(1);
        let n = 200_000u64;
        for chunk in (1..=n).collect::<Vec<_>>().chunks(500) {
            store.put_lines(&job, chunk.iter().map(|&s| line(s)).collect());
        }
        store.flush();
        let (lines, start) = store
            .lines_and_start(&job, 1, u64::MAX, usize::MAX, None)
            .unwrap();
        assert!(start > 1, "the cap dropped something");
        assert_eq!(lines.first().map(|l| l.seq), Some(start));
        let seqs: Vec<u64> = lines.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, (start..=n).collect::<Vec<_>>());
        assert!(lines.iter().all(|l| l.text == format!("{:0>99}", l.seq)));
        assert_eq!(store.last_seq(&job).unwrap(), n);
        let (out, err) = store.line_counts(&job).unwrap();
        assert_eq!(out + err, n - start + 1);
        // Tail and a stream filter read the same blocks.
        let tail = store.tail(&job, 4, u64::MAX, Some(Stream::Stderr)).unwrap();
        let tail: Vec<u64> = tail.iter().map(|l| l.seq).collect();
        assert_eq!(tail, vec![n - 11, n - 8, n - 5, n - 2]);
        // A replay of stored lines adds nothing.
        store.put_lines(&job, ((n - 10)..=n).map(line).collect());
        store.flush();
        assert_eq!(store.last_seq(&job).unwrap(), n);
        let again = store.lines(&job, n - 20, u64::MAX, 100, None).unwrap();
        assert_eq!(again.len(), 21);
    }

    /// Two managers (a daemon and a `--no-daemon` run, or a test's several
    /// stores) writing one database at once: every line of both lands.
    /// Deferred transactions lost whole batches here (SQLITE_BUSY with no
    /// busy handler when the other writer committed between read and write).
    #[test]
    fn two_writers_on_one_database_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("berth.db");
        let stores = [Store::open(&path).unwrap(), Store::open(&path).unwrap()];
        let n = 3000u64;
        std::thread::scope(|s| {
            for (i, store) in stores.iter().enumerate() {
                s.spawn(move || {
                    for k in 0..4u64 {
                        let job = JobId::from_number(1 + i as u64 * 10 + k);
                        for seq in 1..=n / 4 {
                            store.put_lines(&job, vec![line(seq)]);
                        }
                    }
                    store.flush();
                });
            }
        });
        for (i, store) in stores.iter().enumerate() {
            for k in 0..4u64 {
                let job = JobId::from_number(1 + i as u64 * 10 + k);
                let got = store.lines(&job, 1, u64::MAX, usize::MAX, None).unwrap();
                let seqs: Vec<u64> = got.iter().map(|l| l.seq).collect();
                assert_eq!(seqs, (1..=n / 4).collect::<Vec<_>>(), "{job} from store {i}");
            }
        }
    }
}
