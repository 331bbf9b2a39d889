//! What the store could not write yet, and whether it can write at all.
//!
//! A batch that fails for a reason that does not pass by itself (a full
//! disk, an I/O error, a database that stays locked) is not dropped. Its
//! records (runs, events) wait in the writer; each job's output is held
//! here, the newest kept, at most `per_job` bytes (the size of a job's ring):
//! older held output is let go, which leaves a hole in the job's seqs. Blocks
//! never have a hole otherwise, so readers report every hole as lost lines
//! (`scan.rs`), and held output reads as if it were stored. The writer tries
//! again with backoff, writes everything held in one transaction when it
//! can, and says the store is healthy again. The store's [`StoreHealth`] is
//! published on a watch channel: the manager turns it into events, card
//! lines, refusals of new jobs and `/v1/health`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Op;
use crate::model::{Chunk, JobId, Line};

/// Whether the store can write.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum StoreHealth {
    #[default]
    Ok,
    /// Writes fail: output is held in memory (the newest of each job), new
    /// jobs are refused, and the writer tries again by itself.
    Degraded { since: DateTime<Utc>, reason: String },
}

impl StoreHealth {
    pub fn is_degraded(&self) -> bool {
        matches!(self, StoreHealth::Degraded { .. })
    }
}

/// Output the writer holds for one job: lines in seq order, never written.
pub(super) enum Piece {
    Chunk(Arc<Chunk>),
    Lines(Arc<Vec<Line>>),
}

impl Piece {
    pub fn first_seq(&self) -> u64 {
        match self {
            Piece::Chunk(c) => c.first_seq,
            Piece::Lines(l) => l.first().map_or(0, |l| l.seq),
        }
    }

    pub fn last_seq(&self) -> u64 {
        match self {
            Piece::Chunk(c) => c.last_seq(),
            Piece::Lines(l) => l.last().map_or(0, |l| l.seq),
        }
    }

    /// What holding it costs: a chunk's memory, as the ring counts it; a
    /// line's text and a per-line estimate (a `Line` is its own allocation).
    fn cost(&self) -> usize {
        match self {
            Piece::Chunk(c) => c.cost(),
            Piece::Lines(l) => l.iter().map(|l| l.text.len() + 64).sum(),
        }
    }

    /// Its lines with seq at or above `from`, in order, until `f` says stop.
    pub fn each_from(&self, from: u64, mut f: impl FnMut(Line) -> bool) {
        match self {
            Piece::Chunk(c) => {
                for line in c.lines(c.index_of(from)..c.len()) {
                    if !f(line) {
                        return;
                    }
                }
            }
            Piece::Lines(lines) => {
                for l in lines.iter().filter(|l| l.seq >= from) {
                    if !f(l.clone()) {
                        return;
                    }
                }
            }
        }
    }

    fn shared(&self) -> Piece {
        match self {
            Piece::Chunk(c) => Piece::Chunk(c.clone()),
            Piece::Lines(l) => Piece::Lines(l.clone()),
        }
    }

    /// The write that stores it.
    fn op(&self, job: &str) -> Op {
        match self {
            Piece::Chunk(c) => Op::Chunk(JobId::from(job), c.clone()),
            Piece::Lines(l) => Op::Lines(JobId::from(job), l.to_vec()),
        }
    }
}

#[derive(Default)]
struct HeldJob {
    pieces: VecDeque<Piece>,
    bytes: usize,
}

/// Output not written yet, by job, shared by the writer (which alone adds
/// and clears) and readers (which read it as if stored).
pub(super) struct Held {
    per_job: usize,
    jobs: Mutex<HashMap<String, HeldJob>>,
}

impl Held {
    pub fn new(per_job: usize) -> Held {
        Held {
            per_job: per_job.max(1),
            jobs: Mutex::default(),
        }
    }

    /// Keep `piece` of `job`'s output; let the oldest go beyond the bound
    /// (always keeping the newest piece).
    pub fn hold(&self, job: &str, piece: Piece) {
        let Ok(mut jobs) = self.jobs.lock() else { return };
        let held = jobs.entry(job.to_string()).or_default();
        held.bytes += piece.cost();
        held.pieces.push_back(piece);
        while held.bytes > self.per_job && held.pieces.len() > 1 {
            if let Some(old) = held.pieces.pop_front() {
                held.bytes -= old.cost();
            }
        }
    }

    /// `job`'s held pieces, oldest first (shared, not copied).
    pub fn of(&self, job: &str) -> Vec<Piece> {
        let Ok(jobs) = self.jobs.lock() else {
            return Vec::new();
        };
        jobs.get(job)
            .map(|h| h.pieces.iter().map(Piece::shared).collect())
            .unwrap_or_default()
    }

    /// Every held piece as the writes that store it, job by job in seq order.
    pub fn ops(&self) -> Vec<Op> {
        let Ok(jobs) = self.jobs.lock() else {
            return Vec::new();
        };
        jobs.iter()
            .flat_map(|(job, h)| h.pieces.iter().map(|p| p.op(job)))
            .collect()
    }

    /// Forget everything held (it was written).
    pub fn clear(&self) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.clear();
        }
    }

    /// Bytes held, all jobs together.
    pub fn bytes(&self) -> usize {
        self.jobs
            .lock()
            .map(|j| j.values().map(|h| h.bytes).sum())
            .unwrap_or(0)
    }
}
