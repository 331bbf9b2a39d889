//! Store tests: schema upgrades, replays, paging, and output after a job's end.

use super::*;
use crate::model::{JobSpec, JobStatus, LogPaths, StartMode, Stream};
use chrono::Utc;

fn info(n: u64) -> JobInfo {
    JobInfo {
        id: JobId::from_number(n),
        label: "x".into(),
        command: "x".into(),
        spec: JobSpec::argv(["x"]),
        runner: None,
        runner_note: None,
        workspace: None,
        project_note: None,
        recovered: false,
        watch_hits_dropped: 0,
        children: Vec::new(),
        writes: None,
        status: JobStatus::Exited { code: 0 },
        start_mode: StartMode::Background,
        created_at: Utc::now(),
        started_at: None,
        ended_at: None,
        exit_code: Some(0),
        ended_by: None,
        reason: None,
        promotion_reason: None,
        pid: Some(42),
        container_id: None,
        node: None,
        ports: vec![],
        limits: Default::default(),
        usage: None,
        logs: LogPaths {
            stdout: "/o".into(),
            stderr: "/e".into(),
        },
        last_seq: 0,
        queue_position: None,
        image: None,
        pulling: None,
        building: None,
        setid_cleared: None,
        store_note: None,
    }
}

#[test]
fn an_older_schema_is_upgraded_in_place_keeping_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("berth.db");
    {
        // A database as version 1 of berth left it.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        let body = serde_json::to_string(&info(7)).unwrap();
        conn.execute(
            "INSERT INTO runs (id, number, status, info, updated_at) VALUES ('job-7', 7, 'success', ?1, 'then')",
            [body],
        )
        .unwrap();
        conn.execute("INSERT INTO lines VALUES ('job-7', 1, 0, 0, 'kept')", [])
            .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let version: u32 = store
        .reader
        .lock()
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, current_version());
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].info.id.as_str(), "job-7");
    assert_eq!(runs[0].pgid, None, "new columns start empty");
    let lines = store.lines(&JobId::from_number(7), 1, 10, 10, None).unwrap();
    assert_eq!(lines[0].text, "kept");
    // Writing the new columns works on the upgraded database.
    store.put_run(RunRow {
        info: info(8),
        instance: "i".into(),
        owner: "1:2".into(),
        pgid: Some(42),
        pid_start_time: Some(99),
    });
    store.flush();
    let row = find_run(&store, &JobId::from_number(8)).unwrap().unwrap();
    assert_eq!(
        (row.pgid, row.pid_start_time, row.owner.as_str()),
        (Some(42), Some(99), "1:2")
    );
}

#[test]
fn replays_never_duplicate_and_pages_come_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("berth.db")).unwrap();
    let job = JobId::from_number(1);
    let line = |seq: u64| Line {
        seq,
        stream: if seq.is_multiple_of(2) {
            Stream::Stderr
        } else {
            Stream::Stdout
        },
        ts: Utc::now(),
        text: format!("l{seq}"),
    };
    store.put_lines(&job, (1..=10).map(line).collect());
    store.put_lines(&job, (5..=12).map(line).collect()); // a replay overlapping
    store.flush();
    let all = store.lines(&job, 1, u64::MAX, 100, None).unwrap();
    assert_eq!(
        all.iter().map(|l| l.seq).collect::<Vec<_>>(),
        (1..=12).collect::<Vec<_>>()
    );
    assert_eq!(store.last_seq(&job).unwrap(), 12);
    assert_eq!(store.line_counts(&job).unwrap(), (6, 6));
    let tail = store.tail(&job, 3, 13, Some(Stream::Stdout)).unwrap();
    assert_eq!(tail.iter().map(|l| l.seq).collect::<Vec<_>>(), vec![7, 9, 11]);
}

/// The writer forgets a job once its end is recorded (a finished job
/// costs it no memory); a line that still comes continues its output
/// from the table, without a gap or a duplicate.
#[test]
fn lines_after_a_jobs_recorded_end_continue_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("berth.db")).unwrap();
    let job = JobId::from_number(3);
    let line = |seq: u64| Line {
        seq,
        stream: Stream::Stdout,
        ts: Utc::now(),
        text: format!("l{seq}"),
    };
    store.put_lines(&job, (1..=5).map(line).collect());
    let row = |info| RunRow {
        info,
        instance: "i".into(),
        owner: "1:2".into(),
        pgid: None,
        pid_start_time: None,
    };
    store.put_run(row(info(3)));
    // Its own batch: the writer has forgotten the job by then.
    store.flush();
    store.put_lines(&job, (4..=8).map(line).collect());
    store.flush();
    let all = store.lines(&job, 1, u64::MAX, 100, None).unwrap();
    assert_eq!(
        all.iter().map(|l| l.seq).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    assert_eq!(store.last_seq(&job).unwrap(), 8);
}

// The writer: the cap, two writers on one database.

fn numbered(seq: u64) -> Line {
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
    // 7/8 of 8 MiB for lines: about 72k of these 100-byte lines (and newlines).
    let store = Store::open_capped(&dir.path().join("berth.db"), 8 << 20).unwrap();
    let job = JobId::from_number(1);
    let n = 200_000u64;
    for chunk in (1..=n).collect::<Vec<_>>().chunks(500) {
        store.put_lines(&job, chunk.iter().map(|&s| numbered(s)).collect());
    }
    store.flush();
    let page = store
        .page(&job, (1, u64::MAX), (usize::MAX, usize::MAX), None)
        .unwrap();
    let (lines, start) = (page.lines, page.start);
    assert!(page.lost.is_empty(), "{:?}", page.lost);
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
    store.put_lines(&job, ((n - 10)..=n).map(numbered).collect());
    store.flush();
    assert_eq!(store.last_seq(&job).unwrap(), n);
    let again = store.lines(&job, n - 20, u64::MAX, 100, None).unwrap();
    assert_eq!(again.len(), 21);
}

/// The cap counts what a job printed: a line is its text and its newline,
/// so 1 M one-byte lines (2 MB printed) are all kept under 8 MiB, however
/// little text each line has.
#[test]
fn the_cap_counts_short_lines_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_capped(&dir.path().join("berth.db"), 8 << 20).unwrap();
    let job = JobId::from_number(1);
    let n = 1_000_000u64;
    let ts = chrono::Utc::now();
    for first in (1..=n).step_by(50_000) {
        let lines = (first..first + 50_000).map(|seq| Line {
            seq,
            stream: Stream::Stdout,
            ts,
            text: "y".into(),
        });
        store.put_lines(&job, lines.collect());
    }
    store.flush();
    assert_eq!(store.dropped_before(&job).unwrap(), 1, "output starts at seq 1");
    assert_eq!(store.line_counts(&job).unwrap(), (n, 0));
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
                        store.put_lines(&job, vec![numbered(seq)]);
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

/// A writer that takes nothing (a hung disk) is not waited for for good:
/// after the limit the store says it is stuck and writes stop waiting;
/// once the writer takes writes again it is healthy.
#[test]
fn a_stuck_writer_is_reported_and_no_longer_waited_for() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("berth.db")).unwrap();
    let job = JobId::from_number(1);
    store.stall_writes(true, Duration::from_millis(300));
    // The queue fills (16 writes); the next one waits the limit, then goes.
    let started = Instant::now();
    for seq in 1..=40 {
        store.put_lines(&job, vec![numbered(seq)]);
    }
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(
        waited < Duration::from_secs(5),
        "later writes did not wait again: {waited:?}"
    );
    assert!(
        store
            .unavailable()
            .is_some_and(|why| why.contains("took no write"))
    );
    assert!(store.health().is_degraded());
    // A flush does not hang on it either.
    let started = Instant::now();
    store.flush();
    assert!(started.elapsed() < Duration::from_secs(11));
    store.stall_writes(false, STUCK_LIMIT);
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.health().is_degraded() {
        assert!(Instant::now() < deadline, "never healthy again");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(store.unavailable().is_none());
    store.put_lines(&job, vec![numbered(41)]);
    store.flush();
    assert_eq!(store.last_seq(&job).unwrap(), 41);
}

/// Parallel processes opening a new store at once (parallel `berth run`s
/// with no daemon) all get it: the schema is made once, not twice.
#[test]
fn a_new_store_opened_at_once_from_many_connections_is_made_once() {
    // Twenty new stores, sixteen openers each: a lost race shows in a round.
    for _ in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("berth.db");
        std::fs::File::create(&path).unwrap();
        // All start together, then connect and migrate at once.
        let together = std::sync::Arc::new(std::sync::Barrier::new(16));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let (path, together) = (path.clone(), together.clone());
                std::thread::spawn(move || {
                    together.wait();
                    let mut conn = connect(&path).map_err(|e| e.to_string())?;
                    schema::migrate(&mut conn).map(|_| ()).map_err(|e| e.to_string())
                })
            })
            .collect();
        for t in threads {
            t.join()
                .unwrap()
                .expect("every opener connects, and migrates or finds it migrated");
        }
    }
}

/// Lines of pseudo-random printable characters (LZ4 finds nothing to pack:
/// the text stays readable in the file), each unique.
fn noisy(job: u64, seq: u64) -> Line {
    let mut x = job.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seq.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let text: String = (0..64)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'!' + (x % 94) as u8)
        })
        .collect();
    Line {
        seq,
        stream: Stream::Stdout,
        ts: Utc::now(),
        text,
    }
}

/// Bytes flipped inside a stored block (SQLite's own checks pass: it is a
/// blob's content) make that block's seqs a lost range in pages and tails:
/// lines and lost ranges together still cover every seq, and the other
/// jobs read whole.
#[test]
fn a_block_with_flipped_bytes_is_a_lost_range_not_a_silent_hole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("berth.db");
    let n = 3_000u64;
    {
        let store = Store::open(&path).unwrap();
        for job in 1..=3 {
            let id = JobId::from_number(job);
            for chunk in (1..=n).collect::<Vec<_>>().chunks(300) {
                store.put_lines(&id, chunk.iter().map(|&s| noisy(job, s)).collect());
            }
        }
        store.flush();
    }
    // The WAL folded into the file, as a quiet store's is.
    Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let mut file = std::fs::read(&path).unwrap();
    // Lines 1500–1509 of job 2, every copy (older copies of a block that
    // grew stay in free pages; a line may straddle a page's header).
    let mut flipped = 0;
    for seq in 1_500..1_510 {
        let marker = noisy(2, seq).text;
        let copies: Vec<usize> = file
            .windows(marker.len())
            .enumerate()
            .filter(|(_, w)| *w == marker.as_bytes())
            .map(|(at, _)| at)
            .collect();
        flipped += copies.len();
        for at in copies {
            file[at + 10] ^= 0x01;
        }
    }
    assert!(flipped > 0, "the marker lines are stored as they are");
    std::fs::write(&path, &file).unwrap();
    let store = Store::open(&path).unwrap();
    for job in 1..=3 {
        let id = JobId::from_number(job);
        let page = store
            .page(&id, (1, u64::MAX), (usize::MAX, usize::MAX), None)
            .unwrap();
        let mut covered: Vec<u64> = page.lines.iter().map(|l| l.seq).collect();
        for g in &page.lost {
            covered.extend(g.from..=g.to);
        }
        covered.sort_unstable();
        assert_eq!(covered, (1..=n).collect::<Vec<_>>(), "job {job}: {:?}", page.lost);
        assert!(page.lines.iter().all(|l| l.text == noisy(job, l.seq).text));
        match job {
            2 => {
                assert!(
                    page.lost.iter().any(|g| (g.from..=g.to).contains(&1_500)),
                    "{:?}",
                    page.lost
                );
                assert!(page.lines.len() < n as usize);
            }
            _ => assert!(page.lost.is_empty(), "job {job}: {:?}", page.lost),
        }
    }
    // A tail through the damaged block says it too.
    let id = JobId::from_number(2);
    let (lines, lost) = store
        .tail_page(&id, (n as usize, u64::MAX), usize::MAX, None)
        .unwrap();
    assert!(
        lost.iter()
            .any(|g| (1_500..1_510).any(|s| (g.from..=g.to).contains(&s))),
        "{lost:?}"
    );
    assert!(lines.iter().all(|l| l.text == noisy(2, l.seq).text));
}
