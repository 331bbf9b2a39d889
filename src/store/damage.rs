//! The store knows when it is damaged. Before a manager writes to it, the
//! database is checked: its write-ahead log frame by frame (SQLite skips a
//! log whose header or frames fail their checksums without a word, which
//! silently rewinds history: runs gone, ended runs shown running), then
//! `PRAGMA quick_check` on the database itself (a truncated or garbled file).
//! A damaged store is moved aside under a dated name (nothing is deleted)
//! and a fresh one started; whoever opens it says so loudly, and what the
//! lost records owned is reaped by label (containers) and by tag (host
//! jobs). Only a process that holds the store alone checks it (an exclusive
//! lock on `berth.db.lock`; every writer holds it shared): a log being
//! written by another process cannot be read whole.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

/// What is wrong with a store.
#[derive(Debug, Clone, PartialEq)]
pub struct Damage(pub String);

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// The lock every writer of the store at `db` holds shared (see the module doc).
pub fn lock_file(db: &Path) -> std::io::Result<File> {
    super::private::open(
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true),
        &with_suffix(db, ".lock"),
    )
}

/// Check the store at `db` (a missing one is fine): its log, then the
/// database. Errors that are not damage (a busy database, no permission)
/// are not reported as damage.
pub fn check(db: &Path) -> Result<(), Damage> {
    if !db.exists() {
        return Ok(());
    }
    check_wal(&with_suffix(db, "-wal"))?;
    quick_check(db)
}

/// `PRAGMA quick_check` alone, through a read-only connection: safe while
/// another process writes the store (the log is read as SQLite reads it).
pub fn quick_check(db: &Path) -> Result<(), Damage> {
    let conn = match Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY) {
        Ok(c) => c,
        Err(e) => return damage_of(&e).map_or(Ok(()), Err),
    };
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
    let rows: rusqlite::Result<Vec<String>> = conn
        .prepare("PRAGMA quick_check(5)")
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect());
    match rows {
        Ok(rows) if rows == ["ok"] => Ok(()),
        Ok(rows) => Err(Damage(format!(
            "the database fails its integrity check: {}",
            rows.join("; ")
        ))),
        Err(e) => damage_of(&e).map_or(Ok(()), Err),
    }
}

/// What a look at every stored output block found.
#[derive(Debug, Default)]
pub struct BlockCheck {
    pub checked: u64,
    /// `(job, first_seq, last_seq)` of each block whose checksum or
    /// compression fails: lines that every read says are lost.
    pub damaged: Vec<(String, u64, u64)>,
}

/// Check every output block of the store at `db` against its checksum,
/// one block in memory at a time, through a read-only connection (safe
/// while a manager writes: its blocks are read as SQLite shows them).
pub fn check_blocks(db: &Path) -> Result<BlockCheck, Damage> {
    let corrupt = |e: rusqlite::Error| {
        damage_of(&e).unwrap_or_else(|| Damage(format!("its blocks cannot be read: {e}")))
    };
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(corrupt)?;
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
    // A store not yet upgraded has no checksums: its blocks are unpacked only.
    let mut stmt = conn
        .prepare("SELECT job, first_seq, last_seq, data, sum FROM blocks")
        .or_else(|_| conn.prepare("SELECT job, first_seq, last_seq, data, NULL FROM blocks"))
        .map_err(corrupt)?;
    let mut rows = stmt.query([]).map_err(corrupt)?;
    let mut found = BlockCheck::default();
    while let Some(r) = rows.next().map_err(corrupt)? {
        let data = r.get_ref(3).map_err(corrupt)?.as_blob().unwrap_or_default();
        let sum: Option<i64> = r.get(4).map_err(corrupt)?;
        found.checked += 1;
        if super::blocks::encoded(data, sum).is_err() {
            let job: String = r.get(0).map_err(corrupt)?;
            let (first, last): (i64, i64) = (r.get(1).map_err(corrupt)?, r.get(2).map_err(corrupt)?);
            found.damaged.push((job, first as u64, last as u64));
        }
    }
    Ok(found)
}

/// The damage an SQLite error stands for, if it is one.
fn damage_of(e: &rusqlite::Error) -> Option<Damage> {
    use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
    matches!(e.sqlite_error_code(), Some(DatabaseCorrupt | NotADatabase))
        .then(|| Damage(format!("the database cannot be read: {e}")))
}

/// WAL header magic (checksums little-endian; `+1`: big-endian).
const WAL_MAGIC: u32 = 0x377f_0682;
const WAL_HEADER: usize = 32;
const FRAME_HEADER: usize = 24;

/// SQLite's WAL checksum over `data` (a multiple of 8 bytes), continued from `s`.
fn wal_checksum(data: &[u8], big_endian: bool, mut s: (u32, u32)) -> (u32, u32) {
    let word = |b: &[u8]| {
        let b: [u8; 4] = b.try_into().expect("4 bytes");
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    for pair in data.chunks_exact(8) {
        s.0 = s.0.wrapping_add(word(&pair[..4])).wrapping_add(s.1);
        s.1 = s.1.wrapping_add(word(&pair[4..])).wrapping_add(s.0);
    }
    s
}

/// A log's frames: the bytes after its header, read as SQLite reads them.
struct Frames<'a> {
    bytes: &'a [u8],
    page: usize,
    big: bool,
    salts: (u32, u32),
}

impl Frames<'_> {
    fn word(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"))
    }

    /// Byte offset of frame `n` (from 1), if the whole frame is there.
    fn at(&self, n: usize) -> Option<usize> {
        let at = WAL_HEADER + (n - 1) * (FRAME_HEADER + self.page);
        (at + FRAME_HEADER + self.page <= self.bytes.len()).then_some(at)
    }

    fn ours(&self, at: usize) -> bool {
        (self.word(at + 8), self.word(at + 12)) == self.salts
    }

    /// The sums frame `at` stores, and the sums its bytes give from `running`.
    fn sums(&self, at: usize, running: (u32, u32)) -> ((u32, u32), (u32, u32)) {
        let s = wal_checksum(&self.bytes[at..at + 8], self.big, running);
        let s = wal_checksum(
            &self.bytes[at + FRAME_HEADER..at + FRAME_HEADER + self.page],
            self.big,
            s,
        );
        ((self.word(at + 16), self.word(at + 20)), s)
    }

    /// The first frame after frame `n` that ends a transaction, following
    /// the chain of sums from `running` for as long as it holds; with the
    /// sums the chain has there.
    fn commit_after(&self, mut n: usize, mut running: (u32, u32)) -> Option<(usize, (u32, u32))> {
        n += 1;
        while let Some(at) = self.at(n).filter(|&at| self.ours(at)) {
            let (stored, computed) = self.sums(at, running);
            if stored != computed {
                return None;
            }
            if self.word(at + 4) != 0 {
                return Some((n, computed));
            }
            running = computed;
            n += 1;
        }
        None
    }
}

/// Check the log at `wal`: a header that fails its checksum, a first frame
/// of no earlier generation, or a frame of
/// the current log that fails its checksum with a committed transaction
/// after it (the chain of sums going on from the bad frame, as its header
/// stored them or as its bytes give them) and another after that, is
/// damage: SQLite would drop those commits without a word. The log simply
/// ends at a bad frame with no commit after it: a write cut off by a kill,
/// or a transaction that failed (a full disk) and was rolled back, whose
/// frames later commits partly wrote over; at a bad frame of its last
/// transaction (a kill while that one was committed); and at frames of an
/// older generation (other salts), the first frame too.
fn check_wal(wal: &Path) -> Result<(), Damage> {
    let mut bytes = Vec::new();
    match File::open(wal).and_then(|mut f| f.read_to_end(&mut bytes)) {
        Ok(_) => {}
        Err(_) => return Ok(()),
    }
    if bytes.is_empty() {
        return Ok(());
    }
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let garbled = |what: String| {
        Err(Damage(format!(
            "the write-ahead log {} is garbled: {what}",
            wal.display()
        )))
    };
    if bytes.len() < WAL_HEADER {
        return garbled(format!("{} bytes, shorter than its header", bytes.len()));
    }
    let magic = be(0);
    if magic & !1 != WAL_MAGIC {
        return garbled("its header is not a log header".into());
    }
    let page = be(8) as usize;
    if !(512..=65536).contains(&page) || !page.is_power_of_two() {
        return garbled(format!("its header names a page size of {page}"));
    }
    let big = magic & 1 == 1;
    let sum = wal_checksum(&bytes[..24], big, (0, 0));
    if sum != (be(24), be(28)) {
        return garbled("its header fails its checksum".into());
    }
    let frames = Frames {
        bytes: &bytes,
        page,
        big,
        salts: (be(16), be(20)),
    };
    let mut running = sum;
    let mut n = 1;
    while let Some(at) = frames.at(n) {
        if !frames.ours(at) {
            // A first frame of the generation before (SQLite starts a new
            // one with the first salt plus one): the new header was
            // written, its first frame not yet (a kill between the two
            // writes); SQLite reads an empty log, and a log starts over
            // only once all of it is in the database. Other salts there
            // are damage.
            let older = frames.salts.0.wrapping_sub(frames.word(at + 8));
            return match n {
                1 if !(1..=8).contains(&older) => {
                    garbled("its first frame does not belong to it (salts)".into())
                }
                _ => Ok(()),
            };
        }
        let (stored, computed) = frames.sums(at, running);
        if stored != computed {
            let after = frames
                .commit_after(n, stored)
                .or_else(|| frames.commit_after(n, computed));
            return match after {
                // The bad frame is in the log's last transaction: its writer
                // died committing it. SQLite writes a transaction's commit
                // frame before it rewrites the sums of the frames it
                // overwrote in place (a page spilled to the log and changed
                // again), so a kill in between leaves this; SQLite drops the
                // transaction, which its writer never saw committed.
                Some((k, sums)) if frames.commit_after(k, sums).is_none() => Ok(()),
                Some((k, _)) => garbled(format!(
                    "frame {n} fails its checksum, and frame {k} after it ends a transaction"
                )),
                None => Ok(()),
            };
        }
        running = computed;
        n += 1;
    }
    Ok(())
}

/// Move the store at `db` (with its log and shared memory) aside under a
/// dated name; returns the new name of the database.
pub fn move_aside(db: &Path) -> std::io::Result<PathBuf> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let aside = with_suffix(db, &format!(".damaged-{stamp}"));
    std::fs::rename(db, &aside)?;
    for side in ["-wal", "-shm", "-journal"] {
        let from = with_suffix(db, side);
        if from.exists() {
            let _ = std::fs::rename(&from, with_suffix(&aside, side));
        }
    }
    Ok(aside)
}

#[cfg(test)]
mod tests;
