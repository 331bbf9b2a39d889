//! Watch hits and event pages: the red team's 20 watchers matching every
//! line of 5,000 lines stored 100,000 events in 2.5 s. Now a job's hits
//! spend a budget (20 a second, 100 at once): the rest are counted, on the
//! job's record, on its card and in `watch_dropped` events, and every one
//! of the 100,000 is accounted for. Event answers come in pages of at most
//! 1 MiB that `berth events` pages through.

use std::time::Duration;

use serde_json::Value;

use super::{healthy, http};
use crate::common::{Daemon, eventually};

/// Wait until job `id` has ended; its record.
async fn ended(d: &Daemon, id: &str) -> Value {
    let active = ["queued", "starting", "running"];
    let done = || !active.contains(&d.json(&["status", id])["status"]["state"].as_str().unwrap_or(""));
    eventually(Duration::from_secs(30), "the job to end", done).await;
    d.json(&["status", id])
}

/// Every event of the instance, through `berth events --json` (which pages).
fn all_events(d: &Daemon) -> Vec<Value> {
    d.json(&["events"])["events"].as_array().unwrap().clone()
}

#[tokio::test]
async fn twenty_watchers_on_5000_lines_store_a_budget_and_count_the_rest() {
    let d = Daemon::start();
    let mut args = vec!["run", "-d"];
    let patterns: Vec<String> = (0..20).map(|i| format!("line|w{i}")).collect();
    for p in &patterns {
        args.extend(["--watch", p.as_str()]);
    }
    args.extend([
        "--shell",
        "--",
        "i=0; while [ $i -lt 5000 ]; do echo line $i; i=$((i+1)); done",
    ]);
    let started = std::time::Instant::now();
    let id = d.json(&args)["job"]["id"].as_str().unwrap().to_string();
    let info = ended(&d, &id).await;
    let ran_secs = started.elapsed().as_secs_f64();
    assert!(healthy(&d.socket(), Duration::from_secs(1)));

    let events: Vec<Value> = all_events(&d).into_iter().filter(|e| e["job"] == id).collect();
    let hits = events.iter().filter(|e| e["kind"] == "watch_hit").count() as u64;
    let reports: Vec<&Value> = events.iter().filter(|e| e["kind"] == "watch_dropped").collect();
    let dropped = reports.last().map_or(0, |r| r["total"].as_u64().unwrap());
    let counted: u64 = reports.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    eprintln!(
        "100,000 watch matches in {ran_secs:.1}s: {hits} stored, {dropped} counted in {} reports",
        reports.len()
    );
    // The budget: 100 at once, 20 a second after (and a second of slack).
    assert!(hits >= 100, "{hits}");
    assert!(
        hits as f64 <= 100.0 + 20.0 * (ran_secs + 1.0),
        "{hits} hits stored"
    );
    assert_eq!(hits + dropped, 100_000, "every match is stored or counted");
    assert_eq!(counted, dropped, "the reports add up to the total");
    assert!(
        reports.len() as f64 <= ran_secs + 2.0,
        "{} reports",
        reports.len()
    );
    assert_eq!(info["watch_hits_dropped"], dropped);
    let (code, card, _) = d.run(&["status", &id]);
    assert_eq!(code, 0);
    assert!(
        card.contains(&format!("Watch: {dropped} hits not stored (over 20/s")),
        "{card}"
    );
    // More than 32 patterns are refused in one line.
    let mut args = vec!["run", "-d"];
    let many: Vec<String> = (0..33).map(|i| format!("p{i}")).collect();
    for p in &many {
        args.extend(["--watch", p.as_str()]);
    }
    args.extend(["--", "true"]);
    let (code, _, err) = d.run(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at most 32 watch patterns"), "{err}");
}

/// 150 lines of 12 KB that each match: the 100 stored hits are 1.2 MB of
/// events, more than one answer holds. A page stops at 1 MiB and says
/// `more`; following `next_seq` gives every event once, as does `berth
/// events`.
#[tokio::test]
async fn event_answers_are_pages_of_a_mebibyte() {
    let d = Daemon::start();
    let v = d.json(&[
        "run",
        "-d",
        "--watch",
        "x",
        "--shell",
        "--",
        "yes \"$(head -c 12000 /dev/zero | tr '\\0' x)\" | head -n 150",
    ]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    ended(&d, &id).await;
    let socket = d.socket();
    let mut seqs = Vec::new();
    let mut since = 1;
    let mut pages = 0;
    loop {
        let (status, _, body) = http(
            &socket,
            "GET",
            &format!("/v1/events?since={since}&limit=1000"),
            "",
        );
        assert_eq!(status, 200);
        assert!(body.len() <= (1 << 20) + 13_000, "a page of {} bytes", body.len());
        let page: Value = serde_json::from_str(&body).unwrap();
        pages += 1;
        seqs.extend(
            page["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["seq"].as_u64().unwrap()),
        );
        since = page["next_seq"].as_u64().unwrap();
        if page["more"] != true {
            break;
        }
    }
    assert!(pages >= 2, "{pages} page(s)");
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "every event once, in order");
    // The burst, and what the budget earned while the lines came.
    let hits = all_events(&d).iter().filter(|e| e["kind"] == "watch_hit").count();
    assert!((100..=130).contains(&hits), "{hits}");
    assert_eq!(all_events(&d).len(), seqs.len());
}
