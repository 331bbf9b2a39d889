//! History that goes missing is said, never dropped silently: a state
//! directory deleted under a running daemon makes its store degraded (new
//! jobs refused with 503 `store_degraded`, the reason says what to do), and
//! records lost with a removed `-wal` file before a crash are named by the
//! next daemon (`/v1/health`, `berth up`, `berth doctor`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth::api::client::Client;

use super::{Started, watchdog_of};
use crate::common::Daemon;

#[tokio::test(flavor = "multi_thread")]
async fn a_state_directory_deleted_under_the_daemon_is_a_degraded_store() {
    let d = Daemon::start();
    let c = Client::new(&d.config());
    let sleeper = d.json(&["run", "-d", "--", "sleep", "600"])["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let instance_dir = d.config().instance_dir();
    std::fs::remove_dir_all(&instance_dir).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let trouble = loop {
        let h = c.health().await.expect("the daemon still answers");
        if let Some(t) = h.store {
            assert_eq!(h.status, "degraded");
            break t;
        }
        assert!(Instant::now() < deadline, "health never said degraded: {h:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        trouble.reason.contains("was removed") && trouble.reason.contains("berth down"),
        "{}",
        trouble.reason
    );
    // A new job: refused as a degraded store (503), not an I/O error (500).
    let body = r#"{"argv":["true"],"background":true}"#;
    let (status, _, answer) = crate::suite::bounds::http(&d.socket(), "POST", "/v1/jobs", body);
    assert_eq!(status, 503, "{answer}");
    assert!(answer.contains("store_degraded"), "{answer}");
    let (code, _, err) = d.run(&["run", "-d", "--", "true"]);
    assert_eq!(code, 1);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("was removed"), "{err}");
    // The job under way is still there to read and stop.
    assert_eq!(d.json(&["status", &sleeper])["status"]["state"], "running");
    assert_eq!(d.run(&["down"]).0, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn records_lost_with_a_removed_wal_are_named_by_the_next_daemon() {
    let mut d = Daemon::start();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (code, _, err) = d.run(&["run", "--", "true"]);
        assert_eq!(code, 0, "{err}");
    }
    for job in d.json(&["ps", "--all"]).as_array().unwrap() {
        ids.push(job["id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 3, "{ids:?}");
    let db = d.config().instance_dir().join("berth.db");
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::remove_file(&wal).unwrap();
    // Daemon and watchdog die together: nothing folds the log back in.
    let watchdog = watchdog_of(d.pid()).expect("the daemon's watchdog runs");
    let o = Command::new("kill")
        .args(["-KILL", &d.pid().to_string(), &watchdog.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    d.wait_exit(Duration::from_secs(10)).expect("the daemon died");
    // A job directory younger than two seconds may be a start under way
    // elsewhere: the next daemon names only older ones.
    let jobs = d.config().instance_dir().join("jobs");
    for id in &ids {
        let made = std::fs::metadata(jobs.join(id)).unwrap().modified().unwrap();
        while made.elapsed().unwrap() < Duration::from_millis(2100) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let _next = Started(d.cli().args(["daemon"]).stderr(Stdio::null()).spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !d.answers() {
        assert!(Instant::now() < deadline, "the next daemon did not come up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let health = Client::new(&d.config()).health().await.unwrap();
    let notice = health.notice.expect("health names the lost records");
    for id in &ids {
        assert!(notice.contains(id.as_str()), "{id}: {notice}");
    }
    let (_, out, _) = d.run(&["doctor"]);
    assert!(out.contains("has no record of"), "{out}");
    assert_eq!(d.run(&["down"]).0, 0);
}
