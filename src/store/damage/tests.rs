//! The store's damage checks against logs and databases SQLite itself
//! wrote, then garbled, cut or left as a kill leaves them.

use super::*;
use crate::model::{JobId, Line, Stream};
use crate::store::Store;

/// A store left as a crash leaves it: its last writes only in the log.
fn crashed_store(dir: &Path) -> PathBuf {
    let db = dir.join("berth.db");
    let store = Store::open(&db).unwrap();
    let line = |seq| Line {
        seq,
        stream: Stream::Stdout,
        ts: chrono::Utc::now(),
        text: format!("line {seq}"),
    };
    store.put_lines(&JobId::from_number(1), (1..=100).map(line).collect());
    store.flush();
    // Copied while open: the log holds the lines, as after a SIGKILL.
    copied(dir)
}

/// `dir`'s `berth.db` and its log copied while open (as a kill leaves
/// them) into `dir/copy`; the copy's database.
fn copied(dir: &Path) -> PathBuf {
    let copy = dir.join("copy");
    std::fs::create_dir(&copy).unwrap();
    for f in ["berth.db", "berth.db-wal"] {
        std::fs::copy(dir.join(f), copy.join(f)).unwrap();
    }
    copy.join("berth.db")
}

/// The rows of `table` in `db`, as SQLite reads it (with its log).
fn rows(db: &Path, table: &str) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// What the check says is damaged in `db` (it must say something).
fn damage(db: &Path, case: &str) -> String {
    match check(db) {
        Err(Damage(what)) => what,
        Ok(()) => panic!("{case}: not seen as damage"),
    }
}

#[test]
fn a_sound_log_and_database_pass() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path());
    assert!(std::fs::metadata(with_suffix(&db, "-wal")).unwrap().len() > 0);
    assert_eq!(check(&db), Ok(()));
}

#[test]
fn a_garbled_log_frame_or_header_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path());
    let wal = with_suffix(&db, "-wal");
    let sound = std::fs::read(&wal).unwrap();
    for at in [3, 40, sound.len() / 2] {
        let mut bytes = sound.clone();
        bytes[at] ^= 0x5a;
        std::fs::write(&wal, &bytes).unwrap();
        let what = damage(&db, &format!("a byte flipped at {at}"));
        assert!(what.contains("write-ahead log"), "{what}");
    }
}

/// A manager killed between a frame's header and its page leaves the
/// last frame failing its checksum: the end of the log, not damage.
#[test]
fn a_last_frame_cut_off_is_the_end_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path());
    let wal = with_suffix(&db, "-wal");
    let mut bytes = std::fs::read(&wal).unwrap();
    let last = bytes.len() - 100;
    bytes[last] ^= 0x5a;
    std::fs::write(&wal, &bytes).unwrap();
    assert_eq!(check(&db), Ok(()));
}

/// A transaction that spilled to the log and was rolled back (as one
/// that failed on a full disk is) leaves its frames past the log's end;
/// the next commit writes over the first of them, and the rest fail
/// their checksums with no commit after them: the end of the log.
#[test]
fn a_rolled_back_transactions_frames_after_a_commit_are_the_end_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("berth.db");
    let conn = crate::store::connect(&db).unwrap();
    conn.execute_batch("CREATE TABLE t(x BLOB)").unwrap();
    // More pages than the page cache holds: they spill to the log.
    conn.execute_batch("BEGIN").unwrap();
    for _ in 0..100 {
        conn.execute("INSERT INTO t VALUES (randomblob(16000))", [])
            .unwrap();
    }
    conn.execute_batch("ROLLBACK").unwrap();
    conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
    let db = copied(dir.path());
    let wal = std::fs::metadata(with_suffix(&db, "-wal")).unwrap().len();
    assert!(
        wal > 50 * 16384,
        "the rollback left its frames in the log ({wal} bytes)"
    );
    assert_eq!(check(&db), Ok(()));
    assert_eq!(rows(&db, "t"), 1, "the commit after the rollback is read");
}

/// A manager killed after SQLite wrote a new generation's log header (a
/// log starts over after a checkpoint took all of it) and before its first
/// frame: that frame is the generation before's, and SQLite reads an empty
/// log. The end of the log, not damage; a first frame of no earlier
/// generation is.
#[test]
fn a_new_log_header_without_its_first_frame_is_an_empty_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path());
    let wal = with_suffix(&db, "-wal");
    let sound = std::fs::read(&wal).unwrap();
    let header = |salt1: u32| {
        let mut bytes = sound.clone();
        bytes[16..20].copy_from_slice(&salt1.to_be_bytes());
        let big = u32::from_be_bytes(bytes[..4].try_into().unwrap()) & 1 == 1;
        let (a, b) = wal_checksum(&bytes[..24], big, (0, 0));
        bytes[24..28].copy_from_slice(&a.to_be_bytes());
        bytes[28..32].copy_from_slice(&b.to_be_bytes());
        bytes
    };
    let salt1 = u32::from_be_bytes(sound[16..20].try_into().unwrap());
    std::fs::write(&wal, header(salt1.wrapping_add(1))).unwrap();
    assert_eq!(check(&db), Ok(()));
    assert_eq!(rows(&db, "sqlite_master"), 0, "SQLite reads the log as empty");
    std::fs::write(&wal, header(salt1.wrapping_add(1000))).unwrap();
    let what = damage(&db, "a first frame of no earlier generation");
    assert!(what.contains("does not belong"), "{what}");
}

/// A writer killed while it committed a transaction that had spilled a
/// page to the log and changed it again: SQLite wrote the page over its
/// frame and the commit frame, but not yet the frames' new sums. The bad
/// frame is in the log's last transaction, which SQLite drops (its writer
/// never saw it committed): the end of the log. The same bytes changed in
/// a frame of an earlier transaction are damage.
#[test]
fn a_kill_while_a_rewritten_transaction_commits_is_the_end_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("berth.db");
    let conn = crate::store::connect(&db).unwrap();
    conn.execute_batch("CREATE TABLE t(x BLOB); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)")
        .unwrap();
    // More pages than the page cache holds, so they spill before the commit.
    conn.execute_batch("BEGIN").unwrap();
    for _ in 0..100 {
        conn.execute("INSERT INTO t VALUES (randomblob(16000))", [])
            .unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();
    let db = copied(dir.path());
    let wal = with_suffix(&db, "-wal");
    let sound = std::fs::read(&wal).unwrap();
    // The log read as the check reads it: where each frame is, which end
    // a transaction.
    let be = |at: usize| u32::from_be_bytes(sound[at..at + 4].try_into().unwrap());
    let frames = Frames {
        bytes: &sound,
        page: be(8) as usize,
        big: be(0) & 1 == 1,
        salts: (be(16), be(20)),
    };
    let at = |n| frames.at(n).unwrap();
    let commits: Vec<usize> = (1..)
        .map_while(|n| frames.at(n).map(|at| (n, at)))
        .filter_map(|(n, at)| (frames.word(at + 4) != 0).then_some(n))
        .collect();
    assert!(commits.len() >= 3, "{commits:?}");
    let [.., before, last] = commits[..] else {
        unreachable!()
    };
    assert!(last - before > 50, "the last transaction spilled: {commits:?}");
    // A page of the last transaction written over, its sums not yet.
    let mut bytes = sound.clone();
    bytes[at(before + 2) + FRAME_HEADER + 100] ^= 0x5a;
    std::fs::write(&wal, &bytes).unwrap();
    assert_eq!(check(&db), Ok(()));
    assert_eq!(rows(&db, "t"), 2, "SQLite drops the transaction being committed");
    // The same in a frame of the transaction before: two commits after it.
    let mut bytes = sound.clone();
    bytes[at(commits[0]) + FRAME_HEADER + 100] ^= 0x5a;
    std::fs::write(&wal, &bytes).unwrap();
    let what = damage(&db, "a frame of an earlier transaction garbled");
    assert!(what.contains("ends a transaction"), "{what}");
}

#[test]
fn a_truncated_database_is_damage_and_moves_aside() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path());
    // Everything into the database file, then most of it cut off.
    Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let len = std::fs::metadata(&db).unwrap().len();
    assert!(len > 3 * 16384, "{len}");
    let f = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
    f.set_len(len / 3).unwrap();
    assert!(check(&db).is_err(), "a truncated database passed");
    let aside = move_aside(&db).unwrap();
    assert!(!db.exists() && aside.exists());
    assert!(aside.to_string_lossy().contains("berth.db.damaged-"));
}
