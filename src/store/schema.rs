//! The SQLite schema and its migrations. The version lives in `PRAGMA
//! user_version`; each migration moves the database one version up inside a
//! transaction, so a database made by an older berth is upgraded in place,
//! never rejected, and a half-applied upgrade cannot happen.

use rusqlite::Connection;

/// Migrations in order; index + 1 is the version each one produces.
pub const MIGRATIONS: &[&str] = &[
    // 1: runs, events, output lines.
    "CREATE TABLE runs (
        id          TEXT PRIMARY KEY,
        number      INTEGER NOT NULL,
        status      TEXT NOT NULL,
        info        TEXT NOT NULL,
        updated_at  TEXT NOT NULL
    );
    CREATE TABLE events (
        seq   INTEGER PRIMARY KEY,
        job   TEXT NOT NULL,
        ts    TEXT NOT NULL,
        body  TEXT NOT NULL
    );
    CREATE TABLE lines (
        job     TEXT NOT NULL,
        seq     INTEGER NOT NULL,
        stream  INTEGER NOT NULL,
        ts      INTEGER NOT NULL,
        text    TEXT NOT NULL,
        PRIMARY KEY (job, seq)
    ) WITHOUT ROWID;",
    // 2: what the crash watchdog and recovery need to find a job's processes
    // safely (a pid is only trusted together with its start time).
    "ALTER TABLE runs ADD COLUMN instance TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN container_id TEXT;
    ALTER TABLE runs ADD COLUMN pid INTEGER;
    ALTER TABLE runs ADD COLUMN pgid INTEGER;
    ALTER TABLE runs ADD COLUMN pid_start_time INTEGER;
    CREATE INDEX runs_by_status ON runs (status);",
    // 3: retention: where a job's stored output starts once its oldest lines
    // were dropped for the per-job cap.
    "CREATE TABLE output_meta (
        job             TEXT PRIMARY KEY,
        dropped_before  INTEGER NOT NULL
    );",
    // 4: output in blocks of lines (see `blocks.rs`); the rows of `lines`
    // are moved into blocks by [`after`] and the table dropped.
    "CREATE TABLE blocks (
        job        TEXT NOT NULL,
        first_seq  INTEGER NOT NULL,
        last_seq   INTEGER NOT NULL,
        ts0        INTEGER NOT NULL,
        n_stdout   INTEGER NOT NULL,
        n_stderr   INTEGER NOT NULL,
        data       BLOB NOT NULL,
        UNIQUE (job, first_seq)
    );
    CREATE INDEX blocks_by_last ON blocks (job, last_seq);",
    // 5: a CRC-32 of each block's stored `data` (NULL for older blocks):
    // flipped bytes that SQLite's own checks let through are found, and the
    // block's seqs said lost (`blocks.rs`).
    "ALTER TABLE blocks ADD COLUMN sum INTEGER;",
];

/// What a migration needs beyond SQL, run in its transaction after it.
fn after(version: u32, tx: &Connection) -> rusqlite::Result<()> {
    if version == 4 {
        super::blocks::convert_lines(tx)?;
        tx.execute_batch("DROP TABLE lines;")?;
    }
    Ok(())
}

/// The version this build writes.
pub fn current_version() -> u32 {
    MIGRATIONS.len() as u32
}

/// Bring `conn` up to [`current_version`]; returns the version it had.
/// The version is read inside one write-locked transaction: two processes
/// opening a new store at once (parallel `berth run`s) would otherwise both
/// see version 0 and the second would apply the migrations again.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<u32> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let found: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)?;
        after(i as u32 + 1, &tx)?;
        tx.pragma_update(None, "user_version", i as u32 + 1)?;
    }
    tx.commit()?;
    Ok(found)
}
