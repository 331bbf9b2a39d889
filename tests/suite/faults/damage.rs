//! The store knows when it is damaged: a garbled write-ahead log after a
//! crash, or a truncated database, is moved aside under a dated name, a
//! fresh store starts and says so, and what the lost records owned is
//! reaped; `berth doctor` reports and repairs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Started, watchdog_of};
use crate::common::{Daemon, eventually, processes_with, unique_sleep};

fn damaged_copies(d: &Daemon) -> Vec<String> {
    std::fs::read_dir(d.config().instance_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("berth.db.damaged-") && !n.ends_with("-wal") && !n.ends_with("-shm"))
        .collect()
}

fn wait_answers(d: &Daemon) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !d.answers() {
        assert!(Instant::now() < deadline, "the daemon did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_garbled_log_after_a_crash_is_moved_aside_said_and_its_jobs_reaped() {
    let mut d = Daemon::start();
    let token = unique_sleep();
    let (code, _, err) = d.run(&["run", "--", "seq", "1", "3000"]);
    assert_eq!(code, 0, "{err}");
    d.json(&["run", "-d", "--", "sleep", &token]);
    eventually(Duration::from_secs(10), "the sleep runs", || {
        processes_with(&token).len() == 1
    })
    .await;
    let watchdog = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(w) = watchdog_of(d.pid()) {
                break w;
            }
            assert!(Instant::now() < deadline, "no watchdog");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // Daemon and watchdog at once: the runs' last writes are in the log only.
    let o = Command::new("kill")
        .args(["-KILL", &d.pid().to_string(), &watchdog.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    d.child.wait().unwrap();
    let wal = d.config().instance_dir().join("berth.db-wal");
    let mut bytes = std::fs::read(&wal).unwrap();
    assert!(
        bytes.len() > 20_000,
        "the log holds the runs ({} bytes)",
        bytes.len()
    );
    // Inside the first frame's page (after the log's 32-byte header and the
    // frame's 24): a frame with the later transactions after it, not one of
    // the last transaction, which a kill while it commits can leave bad.
    let first_page = 32 + 24 + 100;
    bytes[first_page..first_page + 64].copy_from_slice(&[0x5a; 64]);
    std::fs::write(&wal, &bytes).unwrap();

    let mut again = Started(d.cli().arg("daemon").stderr(Stdio::null()).spawn().unwrap());
    wait_answers(&d);
    // Said, and kept aside (nothing deleted).
    let c = berth::api::client::Client::new(&d.config());
    let notice = c
        .health()
        .await
        .unwrap()
        .notice
        .expect("the daemon says the store was damaged");
    assert!(
        notice.contains("damaged") && notice.contains("write-ahead log") && notice.contains("moved aside"),
        "{notice}"
    );
    assert_eq!(damaged_copies(&d).len(), 1);
    // The lost records' host job is reaped by its tag; ids go on.
    eventually(
        Duration::from_secs(10),
        "the dead daemon's host job is reaped",
        || processes_with(&token).is_empty(),
    )
    .await;
    let v = d.json(&["run", "-d", "--", "true"]);
    assert_eq!(v["job"]["id"], "job-3", "ids are never reused");
    let (code, out, err) = d.run(&["doctor"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("sound") && out.contains("at its start: the store"),
        "{out}"
    );

    // A clean stop folds the log in: the next start has nothing to doubt.
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    again.0.wait().unwrap();
    assert_eq!(
        std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0),
        0,
        "the log is empty after down"
    );
}

#[test]
fn a_truncated_database_is_reported_and_repaired_by_doctor() {
    let d = Daemon::start();
    let (code, _, err) = d.run(&["run", "--", "sh", "-c", "head -c 3000000 /dev/urandom | base64"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    let db = d.config().instance_dir().join("berth.db");
    let len = std::fs::metadata(&db).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .unwrap()
        .set_len(len / 3)
        .unwrap();

    // Without a daemon, reads say what is wrong and what to do.
    let (code, _, err) = d.run(&["logs", "job-1"]);
    assert_ne!(code, 0);
    assert!(err.contains("berth doctor"), "{err}");
    let (code, out, _) = d.run(&["doctor", "--check"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("DAMAGED"), "{out}");
    assert!(damaged_copies(&d).is_empty(), "--check moves nothing");
    let (code, out, err) = d.run(&["doctor"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("moved aside"), "{out}");
    assert_eq!(damaged_copies(&d).len(), 1);
    let (code, out, err) = d.run(&["run", "--", "echo", "fresh"]);
    assert_eq!((code, out.as_str()), (0, "fresh\n"), "{err}");
}

/// Unique lines of printable noise: LZ4 finds nothing to pack, so a line
/// is readable in the database file.
const NOISE: &str = r#"
import random
r = random.Random(7)
for i in range(1, 3001):
    print("".join(chr(33 + r.randrange(94)) for _ in range(64)))
"#;

/// Bytes flipped inside a stored output block (SQLite's own checks pass):
/// `logs` gives every other line and says the block's lines were lost,
/// `doctor --check` finds and names the block without a read.
#[test]
fn flipped_bytes_in_an_output_block_are_a_lost_range_doctor_finds() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    std::fs::write(ws.join("noise.py"), NOISE).unwrap();
    let run = d
        .cli()
        .current_dir(&ws)
        .args(["run", "--", "python3", "noise.py"])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let printed: Vec<String> = String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(printed.len(), 3000);
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = d.run(&["doctor", "--check"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("all sound"), "{out}");
    let db = d.config().instance_dir().join("berth.db");
    let mut file = std::fs::read(&db).unwrap();
    // Lines 1500–1509, every copy of each (a block rewritten as it grew
    // leaves older copies in free pages; a line may straddle a page's
    // header, so ten of them).
    let markers = &printed[1_499..1_509];
    let mut flipped = 0;
    for marker in markers {
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
    assert!(flipped > 0, "lines 1500–1509 are in the database file as printed");
    std::fs::write(&db, &file).unwrap();

    let (code, out, _) = d.run(&["doctor", "--check"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("DAMAGED") && out.contains("job-1: lines"), "{out}");
    let (code, out, err) = d.run(&["logs", "job-1"]);
    assert_eq!(code, 0, "{err}");
    let shown: Vec<&str> = out.lines().collect();
    assert!(shown.len() < 3000, "{} lines", shown.len());
    assert!(markers.iter().any(|m| !shown.contains(&m.as_str())));
    assert!(shown.iter().all(|l| printed.iter().any(|p| p == l)));
    assert!(err.contains("were lost"), "{err}");
    // Every line is shown or inside a range said lost.
    let said: usize = err
        .lines()
        .filter_map(|l| {
            l.split(" line(s))")
                .next()?
                .rsplit('(')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum();
    assert_eq!(shown.len() + said, 3000, "{err}");
}
