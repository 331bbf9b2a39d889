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
    let middle = bytes.len() / 2;
    bytes[middle..middle + 64].copy_from_slice(&[0x5a; 64]);
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
