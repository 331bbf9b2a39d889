//! Reading a job's output by seq, with every hole said: the stored blocks
//! (`blocks.rs`) and, after them, the output held in memory while the store
//! could not write (`held.rs`), read as one sequence.
//!
//! A job's seqs have no hole unless lines were lost (a batch the store could
//! not write and memory could not keep): blocks never have one inside, the
//! writer never skips a seq, and held output is newer than anything stored.
//! So a seq in the range asked for that neither a block nor held output
//! covers is lost, and is reported as a [`Gap`], never stepped over. The
//! caller vouches that every seq below `until` reached the store (it
//! flushed); `until = u64::MAX` means "as far as it goes", with no trailing
//! gap. A page stops at `limit` lines or `max_bytes` of text (at least one
//! line), and says where to read on.

use rusqlite::{Connection, params};

use super::blocks::{decode, encoded, may_hold};
use super::held::Piece;
use crate::model::{Gap, Line, Stream};
use crate::persist::StoredPage;

/// How much a read may return.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    pub limit: usize,
    pub max_bytes: usize,
    pub stream: Option<Stream>,
}

/// A page being collected: lines, gaps, and the seq looked at next.
struct Acc {
    lines: Vec<Line>,
    lost: Vec<Gap>,
    cursor: u64,
    bytes: usize,
    bounds: Bounds,
    full: bool,
}

impl Acc {
    /// Seqs from the cursor up to `end` (exclusive) are lost.
    fn gap_to(&mut self, end: u64) {
        if end <= self.cursor {
            return;
        }
        match self.lost.last_mut() {
            Some(g) if g.to + 1 == self.cursor => g.to = end - 1,
            _ => self.lost.push(Gap {
                from: self.cursor,
                to: end - 1,
            }),
        }
        self.cursor = end;
    }

    /// Take `line` (of the next seq, or past a hole); false once full.
    fn line(&mut self, line: Line) -> bool {
        if line.seq < self.cursor {
            return true; // read twice (held output written meanwhile)
        }
        self.gap_to(line.seq);
        self.cursor = line.seq + 1;
        if self.bounds.stream.is_none_or(|s| s == line.stream) {
            self.bytes += line.text.len();
            self.lines.push(line);
            if self.lines.len() >= self.bounds.limit || self.bytes >= self.bounds.max_bytes {
                self.full = true;
            }
        }
        !self.full
    }

    /// Seqs `first..=last` exist but hold nothing for this reader.
    fn covered(&mut self, first: u64, last: u64) {
        self.gap_to(first);
        self.cursor = self.cursor.max(last + 1);
    }
}

type Row = (u64, u64, i64, i64, i64, Vec<u8>, Option<i64>);

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        r.get::<_, i64>(0)? as u64,
        r.get::<_, i64>(1)? as u64,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

/// A block's data checked and unpacked; a damaged one is logged once per
/// read (the reader is told through its page's `lost`).
fn opened(job: &str, first: u64, last: u64, data: &[u8], sum: Option<i64>) -> Option<Vec<u8>> {
    match encoded(data, sum) {
        Ok(data) => Some(data.into_owned()),
        Err(_) => {
            tracing::error!(
                job,
                first,
                last,
                "a stored output block is damaged: its lines are lost"
            );
            None
        }
    }
}

fn sql_seq(seq: u64) -> i64 {
    seq.min(i64::MAX as u64) as i64
}

/// Lines of `job` with seq in `[from, until)` from the blocks and then the
/// held pieces, the first seq still stored being `start`.
pub(super) fn page(
    conn: &Connection,
    job: &str,
    held: &[Piece],
    (from, until): (u64, u64),
    start: u64,
    bounds: Bounds,
) -> rusqlite::Result<StoredPage> {
    let from = from.max(start);
    let mut acc = Acc {
        lines: Vec::new(),
        lost: Vec::new(),
        cursor: from,
        bytes: 0,
        bounds: Bounds {
            limit: bounds.limit.max(1),
            max_bytes: bounds.max_bytes.max(1),
            ..bounds
        },
        full: false,
    };
    // Held output is newer than every block: the blocks end where it starts.
    let held_first = held.first().map_or(until, |p| p.first_seq().min(until));
    if from < held_first {
        let mut stmt = conn.prepare_cached(
            "SELECT first_seq, last_seq, ts0, n_stdout, n_stderr, data, sum FROM blocks
             WHERE job = ?1 AND last_seq >= ?2 AND first_seq < ?3 ORDER BY last_seq",
        )?;
        let mut rows = stmt.query(params![job, sql_seq(from), sql_seq(held_first)])?;
        while !acc.full
            && let Some(r) = rows.next()?
        {
            let (first, last, ts0, n_out, n_err, data, sum) = row(r)?;
            let last = last.min(held_first - 1);
            if !may_hold(bounds.stream, n_out, n_err) {
                acc.covered(first, last);
                continue;
            }
            let Some(data) = opened(job, first, last, &data, sum) else {
                acc.gap_to(last + 1);
                continue;
            };
            decode(first, ts0, &data, acc.cursor, |l| {
                l.seq < held_first && acc.line(l)
            });
            if !acc.full {
                // Lines past `held_first` in a block written meanwhile come from held.
                acc.covered(first, last);
            }
        }
        if !acc.full && held_first < until {
            acc.gap_to(held_first);
        }
    }
    for piece in held {
        if acc.full || piece.first_seq() >= until {
            break;
        }
        if piece.last_seq() < acc.cursor {
            continue;
        }
        piece.each_from(acc.cursor, |l| l.seq < until && acc.line(l));
    }
    if !acc.full && until != u64::MAX {
        acc.gap_to(until);
    }
    Ok(StoredPage {
        next: acc.cursor,
        lines: acc.lines,
        lost: acc.lost,
        start,
    })
}

/// The last `n` lines of `job` before seq `until` (at most `max_bytes` of
/// text), oldest first, and the gaps between them (and after them up to
/// `until`, unless it is `u64::MAX`).
pub(super) fn tail(
    conn: &Connection,
    job: &str,
    held: &[Piece],
    (n, until): (usize, u64),
    max_bytes: usize,
    stream: Option<Stream>,
) -> rusqlite::Result<(Vec<Line>, Vec<Gap>)> {
    let mut acc = Backward {
        out: Vec::new(),
        lost: Vec::new(),
        bytes: 0,
        expect: (until != u64::MAX).then(|| until.saturating_sub(1)),
        want: (n, max_bytes),
        until,
        stream,
    };
    if n == 0 {
        return Ok((acc.out, acc.lost));
    }
    let mut going = true;
    for piece in held.iter().rev().filter(|p| p.first_seq() < until) {
        let mut lines = Vec::new();
        piece.each_from(0, |l| {
            lines.push(l);
            true
        });
        going = acc.take(piece.first_seq(), piece.last_seq(), Some(lines));
        if !going {
            break;
        }
    }
    if going {
        let below = held.first().map_or(until, |p| p.first_seq().min(until));
        let mut stmt = conn.prepare_cached(
            "SELECT first_seq, last_seq, ts0, n_stdout, n_stderr, data, sum FROM blocks
             WHERE job = ?1 AND first_seq < ?2 ORDER BY last_seq DESC",
        )?;
        let mut rows = stmt.query(params![job, sql_seq(below)])?;
        while let Some(r) = rows.next()? {
            let (first, last, ts0, n_out, n_err, data, sum) = row(r)?;
            let last = last.min(below.saturating_sub(1));
            let mut lines = Vec::new();
            if may_hold(stream, n_out, n_err) {
                let Some(data) = opened(job, first, last, &data, sum) else {
                    acc.take(first, last, None);
                    continue;
                };
                decode(first, ts0, &data, 0, |l| {
                    lines.push(l);
                    true
                });
            }
            if !acc.take(first, last, Some(lines)) {
                break;
            }
        }
    }
    let (mut out, mut lost) = (acc.out, acc.lost);
    out.reverse();
    // Only the gaps among and after the lines returned (all of them when
    // none is: a tail of only lost lines says so).
    let oldest = out.first().map_or(0, |l| l.seq);
    lost.retain(|g| g.from > oldest);
    lost.reverse();
    Ok((out, lost))
}

/// What [`tail`] gathered so far, going down from `until`: lines newest
/// first, and the gaps met.
struct Backward {
    out: Vec<Line>,
    lost: Vec<Gap>,
    bytes: usize,
    /// The next seq expected going down; a segment ending below it leaves a gap.
    expect: Option<u64>,
    /// Most lines, and most bytes of text.
    want: (usize, usize),
    until: u64,
    stream: Option<Stream>,
}

impl Backward {
    /// One segment (a held piece or a block) going down: its gap above, then
    /// its lines of the stream, newest first; false once enough are taken.
    /// A damaged block (`lines: None`) is a gap of its own.
    fn take(&mut self, first: u64, last: u64, lines: Option<Vec<Line>>) -> bool {
        let (n, max_bytes) = self.want;
        let last = last.min(self.until.saturating_sub(1));
        if let Some(e) = self.expect
            && last < e
        {
            self.lost.push(Gap {
                from: last + 1,
                to: e,
            });
        }
        self.expect = Some(first.saturating_sub(1));
        let Some(lines) = lines else {
            match self.lost.last_mut() {
                Some(g) if g.from == last + 1 => g.from = first,
                _ => self.lost.push(Gap {
                    from: first,
                    to: last,
                }),
            }
            return true;
        };
        let (until, stream) = (self.until, self.stream);
        let block = lines
            .into_iter()
            .filter(|l| l.seq < until && stream.is_none_or(|s| s == l.stream));
        for l in block.rev() {
            if self.out.len() >= n || (self.bytes >= max_bytes && !self.out.is_empty()) {
                return false;
            }
            self.bytes += l.text.len();
            self.out.push(l);
        }
        self.out.len() < n && self.bytes < max_bytes
    }
}
