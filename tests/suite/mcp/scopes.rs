//! One event cursor per scope and session: reading its own jobs' events
//! steps over other sessions' events without telling them, so they must
//! still be there when the session later asks for every job's (`events`
//! with `all: true`), each once.

use std::time::{Duration, Instant};

use serde_json::json;

use super::sessions::{Session, job_id};
use crate::common::{Daemon, unique_sleep};

/// Session A reads its own events while session B's job starts and ends;
/// A's later `events {all: true}` shows B's job, which A was never told,
/// and not again the watch hit of its own job it was told already.
#[tokio::test]
async fn asking_for_all_events_shows_what_the_own_scope_stepped_over() {
    let d = Daemon::start();
    let (dir, inst) = (d.dir.path(), d.instance.as_str());
    let mut a = Session::open(dir, inst, "a").await;
    let mut b = Session::open(dir, inst, "b").await;
    let token = unique_sleep();
    let started = a
        .call(
            "run",
            json!({"command": format!("echo A-HIT; exec sleep {token}"), "background": true,
                   "watch": ["A-HIT"]}),
        )
        .await;
    assert!(!started.is_error, "{}", started.text);
    let mine = job_id(&started.text);
    // A is told of its own watch hit, in its own scope.
    let mut told = started.text.clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !told.contains("watch /A-HIT/ matched") {
        assert!(Instant::now() < deadline, "A was never told its watch hit: {told}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        told += &a.call("events", json!({})).await.text;
    }
    let theirs = b.call("run", json!({"command": "echo B-WAS-HERE"})).await;
    assert!(!theirs.is_error && theirs.text.contains("B-WAS-HERE"), "{}", theirs.text);
    let theirs = job_id(&theirs.text);
    // A's own scope reads on past B's events without telling them.
    let own = a.call("events", json!({})).await.text;
    assert!(!own.contains(&theirs) && own.contains("No new events"), "{own}");

    let all = a.call("events", json!({"all": true})).await.text;
    let of_theirs: Vec<&str> = all.lines().filter(|l| l.contains(&format!("{theirs} ("))).collect();
    assert!(
        of_theirs.iter().any(|l| l.contains(" started")) && of_theirs.iter().any(|l| l.contains(" ended")),
        "B's events, stepped over by A's own scope, are told when A asks for all: {all}"
    );
    assert!(!all.contains("A-HIT"), "A's own watch hit is not told twice: {all}");
    let again = a.call("events", json!({})).await.text;
    assert!(!again.contains(&format!("{theirs} (")), "told once: {again}");
    let _ = a.call("kill", json!({"id": mine})).await;
    a.close().await;
    b.close().await;
}
