//! Output as blocks: the store keeps a job's lines in rows of up to
//! [`BLOCK_BYTES`] (or [`BLOCK_AGE`] of output), each holding a contiguous
//! run of seqs of both streams in arrival order, so ingest costs one row per
//! ~64 KiB instead of one per line.
//!
//! A block is `(job, first_seq, last_seq, ts0, n_stdout, n_stderr, data)`.
//! `data` is a list of records. A line record is: stream (one byte, 0 or
//! 1), timestamp as a zigzag varint of milliseconds since the previous
//! record (the first since `ts0`), text length as a varint, then the text.
//! A run record holds lines of one stream and one timestamp, as a read gave
//! them: [`RUN`] + stream, the timestamp as above, the number of lines and
//! the text's length as varints, then the text, each line followed by `\n`
//! (a line never holds one): a chunk is encoded with one copy, not line by
//! line, whatever its lines' length. The seq of a line is `first_seq`
//! plus its index, so a block never has a hole; blocks of a job never overlap
//! (the writer drops replays) and are found by `(job, last_seq)`, which makes
//! `since`, `tail` and paging a range scan whatever the job's size (`scan.rs`).
//! Lines stay the unit of every reader.
//!
//! `data` is stored LZ4-compressed when that makes it smaller, marked by a
//! first byte of [`COMPRESSED`] (an encoded block starts with a stream byte,
//! 0 or 1, so blocks written before compression read as they are). Logs
//! compress several times over, and every byte not written is written three
//! times less (the WAL, the checkpoint into the database, the page cache).

use chrono::{TimeZone, Utc};
use rusqlite::{Connection, params};

use crate::model::{Line, Stream};

/// A block is sealed once its data reaches this size...
pub const BLOCK_BYTES: usize = 64 * 1024;
/// ...or once it has been open this long.
pub const BLOCK_AGE: std::time::Duration = std::time::Duration::from_secs(1);

/// Added to a record's stream byte: a run of lines (see the module doc).
const RUN: u8 = 2;

/// First byte of a compressed block's `data`; LZ4 (size prepended) follows.
const COMPRESSED: u8 = 0xFF;
/// Blocks smaller than this are stored as they are.
const COMPRESS_FROM: usize = 512;

/// What goes in the `data` column for an encoded block.
fn stored(data: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if data.len() >= COMPRESS_FROM {
        let packed = lz4_flex::block::compress_prepend_size(data);
        if packed.len() + 1 < data.len() {
            let mut out = Vec::with_capacity(packed.len() + 1);
            out.push(COMPRESSED);
            out.extend_from_slice(&packed);
            return out.into();
        }
    }
    data.into()
}

/// A stored block that cannot be read whole: its checksum does not match
/// what is stored, or its compressed data does not unpack. Its seqs are
/// lost, and said so by every reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Damaged;

/// The encoded lines of a stored `data` column and its checksum (`None`:
/// a block written before checksums; its compression is the only check).
pub(super) fn encoded(data: &[u8], sum: Option<i64>) -> Result<std::borrow::Cow<'_, [u8]>, Damaged> {
    if sum.is_some_and(|sum| sum != i64::from(crc32fast::hash(data))) {
        return Err(Damaged);
    }
    match data.split_first() {
        Some((&COMPRESSED, packed)) => lz4_flex::block::decompress_size_prepended(packed)
            .map(Into::into)
            .map_err(|_| Damaged),
        _ => Ok(data.into()),
    }
}

pub(super) fn stream_code(s: Stream) -> u8 {
    match s {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *data.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// A block being filled (by the writer, or by the migration).
#[derive(Debug)]
pub(super) struct OpenBlock {
    pub first_seq: u64,
    pub last_seq: u64,
    pub ts0: i64,
    last_ts: i64,
    pub counts: [u64; 2],
    pub data: Vec<u8>,
    pub opened: std::time::Instant,
}

impl OpenBlock {
    pub fn new(first_seq: u64, ts0: i64) -> Self {
        OpenBlock {
            first_seq,
            last_seq: first_seq - 1,
            ts0,
            last_ts: ts0,
            counts: [0, 0],
            data: Vec::with_capacity(BLOCK_BYTES + 1024),
            opened: std::time::Instant::now(),
        }
    }

    /// Append the next line (its seq must be `last_seq + 1`).
    pub fn push(&mut self, stream: u8, ts_ms: i64, text: &str) {
        self.record(stream, ts_ms);
        put_varint(&mut self.data, text.len() as u64);
        self.data.extend_from_slice(text.as_bytes());
        self.count(stream, 1);
    }

    /// Append the next `n` lines, of one stream and one timestamp, as one
    /// run: `text` is their text, each line followed by `\n`.
    pub fn push_run(&mut self, stream: u8, ts_ms: i64, n: usize, text: &str) {
        self.record(RUN + stream, ts_ms);
        put_varint(&mut self.data, n as u64);
        put_varint(&mut self.data, text.len() as u64);
        self.data.extend_from_slice(text.as_bytes());
        self.count(stream, n as u64);
    }

    /// A record's head: its kind and its timestamp.
    fn record(&mut self, kind: u8, ts_ms: i64) {
        self.data.push(kind);
        let delta = ts_ms.wrapping_sub(self.last_ts);
        put_varint(&mut self.data, ((delta << 1) ^ (delta >> 63)) as u64);
        self.last_ts = ts_ms;
    }

    fn count(&mut self, stream: u8, n: u64) {
        self.last_seq += n;
        self.counts[usize::from(stream.min(1))] += n;
    }

    /// Bytes the block can still take before it is full.
    pub fn room(&self) -> usize {
        BLOCK_BYTES.saturating_sub(self.data.len())
    }

    /// Full by size (its age is the writer's to look at, once per batch:
    /// a clock read per line was a visible part of ingest).
    pub fn is_full(&self) -> bool {
        self.data.len() >= BLOCK_BYTES
    }

    /// Insert the block, or replace it with more lines if it was written
    /// before; with the checksum of what is stored.
    pub fn write(&self, conn: &Connection, job: &str) -> rusqlite::Result<()> {
        let data = stored(&self.data);
        conn.prepare_cached(
            "INSERT INTO blocks (job, first_seq, last_seq, ts0, n_stdout, n_stderr, data, sum)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (job, first_seq) DO UPDATE SET
               last_seq = ?3, n_stdout = ?5, n_stderr = ?6, data = ?7, sum = ?8",
        )?
        .execute(params![
            job,
            self.first_seq as i64,
            self.last_seq as i64,
            self.ts0,
            self.counts[0] as i64,
            self.counts[1] as i64,
            data,
            crc32fast::hash(&data),
        ])?;
        Ok(())
    }

    /// Migration 4's insert: the table has no checksum column yet (the
    /// blocks it makes read as older blocks do).
    fn write_unsummed(&self, conn: &Connection, job: &str) -> rusqlite::Result<()> {
        conn.prepare_cached(
            "INSERT INTO blocks (job, first_seq, last_seq, ts0, n_stdout, n_stderr, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![
            job,
            self.first_seq as i64,
            self.last_seq as i64,
            self.ts0,
            self.counts[0] as i64,
            self.counts[1] as i64,
            stored(&self.data),
        ])?;
        Ok(())
    }
}

/// Decode a block's lines (`data` as `encoded` gave it) from seq `from`
/// on, calling `f` with each; `f` returns false to stop. Lines before
/// `from` are stepped over, not made: a page that starts inside a block
/// of short lines would otherwise make (and drop) thousands of them.
pub(super) fn decode(first_seq: u64, ts0: i64, data: &[u8], from: u64, mut f: impl FnMut(Line) -> bool) {
    let (mut pos, mut seq, mut ts) = (0, first_seq, ts0);
    while pos < data.len() {
        let kind = data[pos];
        pos += 1;
        let Some(delta) = get_varint(data, &mut pos) else {
            return;
        };
        let zz = delta as i64;
        ts = ts.wrapping_add((zz >> 1) ^ -(zz & 1));
        let run = kind >= RUN;
        let n = if run { get_varint(data, &mut pos) } else { Some(1) };
        let (Some(n), Some(len)) = (n, get_varint(data, &mut pos)) else {
            return;
        };
        let end = pos.saturating_add(len as usize).min(data.len());
        let mut text = &data[pos..end];
        pos = end;
        let skip = from.saturating_sub(seq).min(n);
        if skip == n {
            seq += n;
            continue;
        }
        let n = n - skip;
        if skip > 0 {
            text = &text[crate::model::after_newlines(text, skip as usize)..];
            seq += skip;
        }
        let stream = if kind & 1 == 1 {
            Stream::Stderr
        } else {
            Stream::Stdout
        };
        let ts = Utc.timestamp_millis_opt(ts).single().unwrap_or_default();
        let mut line = |text: &[u8]| {
            let line = Line {
                seq,
                stream,
                ts,
                text: String::from_utf8_lossy(text).into_owned(),
            };
            seq += 1;
            f(line)
        };
        let lines_said = if run {
            // `n` lines, each ended by `\n`; a damaged count reads as what is there.
            text.split(|&b| b == b'\n').take(n as usize).all(&mut line)
        } else {
            line(text)
        };
        if !lines_said {
            return;
        }
    }
}

/// Whether a block with these counts can hold a line of `stream`.
pub(super) fn may_hold(stream: Option<Stream>, n_stdout: i64, n_stderr: i64) -> bool {
    match stream {
        None => true,
        Some(Stream::Stdout) => n_stdout > 0,
        Some(Stream::Stderr) => n_stderr > 0,
    }
}

/// Highest stored seq of `job` (0 = none).
pub(super) fn last_seq(conn: &Connection, job: &str) -> rusqlite::Result<u64> {
    conn.prepare_cached("SELECT COALESCE(MAX(last_seq), 0) FROM blocks WHERE job = ?1")?
        .query_row([job], |r| r.get::<_, i64>(0))
        .map(|v| v as u64)
}

/// Stored line counts of `job` per stream: (stdout, stderr).
pub(super) fn line_counts(conn: &Connection, job: &str) -> rusqlite::Result<(u64, u64)> {
    conn.prepare_cached(
        "SELECT COALESCE(SUM(n_stdout), 0), COALESCE(SUM(n_stderr), 0) FROM blocks WHERE job = ?1",
    )?
    .query_row([job], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
    })
}

/// Migration 4: move the rows of the old `lines` table into blocks, job by
/// job in seq order (a gap in seq starts a new block).
pub(super) fn convert_lines(conn: &Connection) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare("SELECT job, seq, stream, ts, text FROM lines ORDER BY job, seq")?;
    let mut rows = stmt.query([])?;
    let mut current: Option<(String, OpenBlock)> = None;
    while let Some(r) = rows.next()? {
        let job: String = r.get(0)?;
        let seq = r.get::<_, i64>(1)? as u64;
        let stream: i64 = r.get(2)?;
        let ts: i64 = r.get(3)?;
        let text: String = r.get(4)?;
        let fits = matches!(&current, Some((j, b)) if *j == job && b.last_seq + 1 == seq
            && b.data.len() < BLOCK_BYTES && ts - b.ts0 < BLOCK_AGE.as_millis() as i64);
        if !fits {
            if let Some((j, b)) = current.take() {
                b.write_unsummed(conn, &j)?;
            }
            current = Some((job, OpenBlock::new(seq, ts)));
        }
        let (_, b) = current.as_mut().expect("set above");
        b.push(stream.clamp(0, 1) as u8, ts, &text);
    }
    if let Some((j, b)) = current {
        b.write_unsummed(conn, &j)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk goes in as runs cut where blocks fill, a replay of it adds
    /// nothing, and every line reads back as a line, in seq order.
    #[test]
    fn a_chunk_is_stored_as_runs_across_blocks_and_read_back_line_by_line() {
        use crate::model::{JobId, LineBuf};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("berth.db");
        let store = crate::store::Store::open(&db).unwrap();
        let job = JobId::from_number(1);
        let n = 50_000u64;
        let text: String = (1..=n).map(|i| format!("{i}\n")).collect();
        let mut buf = LineBuf::default();
        assert!(buf.push_lines(text.as_bytes(), 1024));
        let ts = Utc.timestamp_millis_opt(1_000).unwrap();
        let chunk = Arc::new(buf.seal(1, Stream::Stdout, ts));
        store.put_chunk(&job, chunk.clone());
        store.put_chunk(&job, chunk);
        buf.push(b"");
        buf.push(b"err");
        store.put_chunk(&job, Arc::new(buf.seal(n + 1, Stream::Stderr, ts)));
        store.flush();
        let page = store
            .page(&job, (1, u64::MAX), (usize::MAX, usize::MAX), None)
            .unwrap();
        let got: Vec<(u64, Stream, String)> = page
            .lines
            .into_iter()
            .map(|l| (l.seq, l.stream, l.text))
            .collect();
        let mut want: Vec<(u64, Stream, String)> =
            (1..=n).map(|i| (i, Stream::Stdout, i.to_string())).collect();
        want.push((n + 1, Stream::Stderr, String::new()));
        want.push((n + 2, Stream::Stderr, "err".into()));
        assert!(got == want, "{} lines read back, not as written", got.len());
        assert_eq!(store.line_counts(&job).unwrap(), (n, 2));
        let conn = Connection::open(&db).unwrap();
        let blocks: i64 = conn
            .query_row("SELECT COUNT(*) FROM blocks", [], |r| r.get(0))
            .unwrap();
        // ~290 KB of text: cut into blocks of about BLOCK_BYTES, not one.
        assert!((4..=6).contains(&blocks), "{blocks} blocks");
    }

    /// Decoding from a seq inside a block gives the lines a decode of the
    /// whole block gives from there: across runs and line records.
    #[test]
    fn a_block_decoded_from_a_seq_gives_the_lines_from_there() {
        let mut b = OpenBlock::new(10, 0);
        b.push(1, 0, "one");
        b.push_run(0, 5, 4, "a\nbb\n\nd\n");
        b.push(0, 7, "last");
        b.push_run(1, 9, 2, "x\ny\n");
        let all = |from| {
            let mut got = Vec::new();
            decode(b.first_seq, b.ts0, &b.data, from, |l| {
                got.push((l.seq, l.stream, l.ts.timestamp_millis(), l.text));
                true
            });
            got
        };
        let whole = all(0);
        assert_eq!(whole.len(), 8);
        for from in 0..=20 {
            let want: Vec<_> = whole.iter().filter(|l| l.0 >= from).cloned().collect();
            assert_eq!(all(from), want, "from {from}");
        }
    }

    #[test]
    fn a_block_decodes_to_what_was_pushed() {
        let mut b = OpenBlock::new(5, 1_000);
        b.push(0, 1_000, "one");
        b.push(1, 999, ""); // clocks may step back
        b.push(0, 70_000, &"é".repeat(300));
        let mut got = Vec::new();
        decode(b.first_seq, b.ts0, &b.data, 0, |l| {
            got.push((l.seq, l.stream, l.ts.timestamp_millis(), l.text));
            true
        });
        assert_eq!(
            got,
            vec![
                (5, Stream::Stdout, 1_000, "one".to_string()),
                (6, Stream::Stderr, 999, String::new()),
                (7, Stream::Stdout, 70_000, "é".repeat(300)),
            ]
        );
        assert_eq!((b.last_seq, b.counts), (7, [2, 1]));
        // Stored compressed (it shrinks) or as it is (too small): both read back.
        let stored_big = stored(&b.data);
        assert_eq!(stored_big[0], COMPRESSED);
        assert!(stored_big.len() < b.data.len());
        assert_eq!(&*encoded(&stored_big, None).unwrap(), &b.data[..]);
        let sum = i64::from(crc32fast::hash(&stored_big));
        assert_eq!(&*encoded(&stored_big, Some(sum)).unwrap(), &b.data[..]);
        // One flipped bit: the checksum says so (and, without one, the unpacking may not).
        let mut flipped = stored_big.to_vec();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x10;
        assert_eq!(encoded(&flipped, Some(sum)), Err(Damaged));
        let mut small = OpenBlock::new(1, 0);
        small.push(0, 0, "hi");
        assert_eq!(&*stored(&small.data), &small.data[..]);
        assert_eq!(&*encoded(&small.data, None).unwrap(), &small.data[..]);
    }
}
