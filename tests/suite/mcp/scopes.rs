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
    // B's first job ends before A's first call, an `events` of its own.
    let mut theirs = Vec::new();
    let r = b.call("run", json!({"command": "echo B-WAS-HERE"})).await;
    theirs.push(job_id(&r.text));
    let own = a.call("events", json!({})).await.text;
    assert!(
        !own.contains("B-WAS-HERE") && own.contains("No new events"),
        "{own}"
    );
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
        assert!(
            Instant::now() < deadline,
            "A was never told its watch hit: {told}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        told += &a.call("events", json!({})).await.text;
    }
    // B's jobs end while A reads its own events: in the tail of another
    // answer (`list`), then with `events`; neither tells A of B's jobs.
    for read in ["list", "events"] {
        let r = b.call("run", json!({"command": "echo B-WAS-HERE"})).await;
        assert!(!r.is_error && r.text.contains("B-WAS-HERE"), "{}", r.text);
        theirs.push(job_id(&r.text));
        let own = a.call(read, json!({})).await.text;
        assert!(
            !theirs.iter().any(|t| own.contains(&format!("{t} ("))),
            "{read}: {own}"
        );
    }
    let own = a.call("events", json!({})).await.text;
    assert!(own.contains("No new events"), "{own}");

    let all = a.call("events", json!({"all": true})).await.text;
    for t in &theirs {
        let lines: Vec<&str> = all.lines().filter(|l| l.contains(&format!("{t} ("))).collect();
        assert!(
            lines.iter().any(|l| l.contains(" started")) && lines.iter().any(|l| l.contains(" ended")),
            "{t}'s events, stepped over by A's own scope, are told when A asks for all: {all}"
        );
    }
    assert!(
        !all.contains("A-HIT"),
        "A's own watch hit is not told twice: {all}"
    );
    let again = a.call("events", json!({})).await.text;
    assert!(
        !again.contains("B-WAS-HERE") && again.contains("No new events"),
        "told once: {again}"
    );
    let _ = a.call("kill", json!({"id": mine})).await;
    a.close().await;
    b.close().await;
}
