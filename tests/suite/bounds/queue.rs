//! Queued starts and what a record holds: the red team sent 2,000 queued
//! starts with 100 KB labels (712 MiB of daemon, one `list` answer of 392
//! MB). Now a label over 256 bytes is refused before anything else is
//! read, the queue holds 64 starts and refuses the rest with one line, the
//! daemon's memory stays flat and it answers health checks throughout; and
//! lists of big records come in pages of at most 1 MiB that the CLI pages
//! through.

use std::time::Duration;

use serde_json::{Value, json};

use super::{healthy, http, vm_kib};
use crate::common::{Daemon, eventually, unique_sleep};

/// `n` POST /v1/jobs of `body`, 16 at a time, with a health check every
/// 100 requests: each answer's (status, body), and whether every health
/// check was answered within a second.
fn flood(d: &Daemon, n: usize, body: &str) -> (Vec<(u16, String)>, bool) {
    let socket = d.socket();
    let answers = std::sync::Mutex::new(Vec::new());
    let healthy_throughout = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|s| {
        for t in 0..16 {
            let (socket, answers, healthy_throughout) = (&socket, &answers, &healthy_throughout);
            s.spawn(move || {
                for i in (t..n).step_by(16) {
                    let (status, _, answer) = http(socket, "POST", "/v1/jobs", body);
                    answers.lock().unwrap().push((status, answer));
                    if i % 100 == 0 && !healthy(socket, Duration::from_secs(1)) {
                        healthy_throughout.store(false, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            });
        }
    });
    (answers.into_inner().unwrap(), healthy_throughout.into_inner())
}

#[test]
fn two_thousand_queued_starts_with_100_kb_labels_are_refused_early_and_memory_stays_flat() {
    let d = Daemon::start_with(&[("BERTH_MAX_JOBS", "1")]);
    let sleep = unique_sleep();
    // One job holds the only slot: every start after it would queue.
    d.json(&["run", "-d", "--", "sleep", &sleep]);
    let before = vm_kib(d.pid(), "VmHWM");

    let big = json!({"argv": ["sleep", sleep], "runner": "host", "background": true,
                     "queue": true, "label": "x".repeat(100_000)})
    .to_string();
    let (answers, healthy_throughout) = flood(&d, 2000, &big);
    assert!(healthy_throughout, "a health check went unanswered");
    for (status, body) in &answers {
        assert_eq!(*status, 400, "{body}");
        assert!(
            body.contains("invalid label") && body.contains("at most 256 bytes"),
            "{body}"
        );
    }

    let small = json!({"argv": ["sleep", sleep], "runner": "host", "background": true,
                       "queue": true, "label": "waits"})
    .to_string();
    let (answers, healthy_throughout) = flood(&d, 2000, &small);
    assert!(healthy_throughout, "a health check went unanswered");
    let queued = answers.iter().filter(|(s, _)| *s == 200).count();
    let full: Vec<&String> = answers
        .iter()
        .filter(|(s, _)| *s == 409)
        .map(|(_, b)| b)
        .collect();
    assert_eq!((queued, full.len()), (64, 1936), "{:?}", &answers[..3]);
    assert!(
        full.iter()
            .all(|b| b.contains("queue_full") && b.contains("64 starts already wait")),
        "{}",
        full[0]
    );
    let grown_mib = (vm_kib(d.pid(), "VmHWM").saturating_sub(before)) / 1024;
    eprintln!("daemon peak memory grew by {grown_mib} MiB over 4,000 starts");
    assert!(grown_mib < 64, "the daemon grew by {grown_mib} MiB");
    // The CLI says the same in one line, with the exit code of a refusal.
    let (code, _, err) = d.run(&["run", "-d", "--queue", "--", "sleep", &sleep]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("the queue is full"), "{err}");
    assert_eq!(d.json(&["ps"]).as_array().unwrap().len(), 50, "a page of ps");
    assert_eq!(d.json(&["ps", "--limit", "500"]).as_array().unwrap().len(), 65);
}

/// Records of 180 KB each (a 60 KB command, its display and label): the
/// list answer is cut at 1 MiB with `berth-more-before`, pages join up to
/// every job exactly once, and `berth ps` pages through them.
#[test]
fn lists_of_big_records_come_in_pages_of_a_mebibyte() {
    let d = Daemon::start();
    let socket = d.socket();
    let word = "y".repeat(60_000);
    for _ in 0..20 {
        let spec = json!({"argv": ["true", word], "runner": "host", "background": true, "queue": true});
        let (status, _, body) = http(&socket, "POST", "/v1/jobs", &spec.to_string());
        assert_eq!(status, 200, "{body}");
    }
    let ended = || {
        let (_, _, body) = http(&socket, "GET", "/v1/jobs?filter=running", "");
        body.trim() == "[]"
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(eventually(Duration::from_secs(30), "every job ended", ended));

    let mut ids = Vec::new();
    let mut path = "/v1/jobs?filter=all&limit=1000".to_string();
    let mut pages = 0;
    loop {
        let (status, head, body) = http(&socket, "GET", &path, "");
        assert_eq!(status, 200, "{head}");
        assert!(
            body.len() <= (1 << 20) + 200_000,
            "a page of {} bytes",
            body.len()
        );
        let jobs: Vec<Value> = serde_json::from_str(&body).unwrap();
        ids.extend(jobs.iter().map(|j| j["id"].as_str().unwrap().to_string()));
        pages += 1;
        let more = head
            .lines()
            .find_map(|l| l.strip_prefix("berth-more-before: "))
            .map(str::trim);
        match more {
            Some(before) => {
                assert_eq!(Some(before), ids.last().map(String::as_str));
                path = format!("/v1/jobs?filter=all&limit=1000&before={before}");
            }
            None => break,
        }
    }
    let expected: Vec<String> = (1..=20).rev().map(|n| format!("job-{n}")).collect();
    assert_eq!(ids, expected, "every job once, newest first");
    assert!(pages >= 4, "20 records of ~180 KB fit in {pages} pages");
    let listed = d.json(&["ps", "--all", "--limit", "20"]);
    assert_eq!(listed.as_array().unwrap().len(), 20);
    let (code, out, err) = d.run(&["ps", "--all", "--limit", "3"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 4, "a header and 3 rows:\n{out}");
    assert!(err.contains("berth ps --before job-18 --limit 3"), "{err}");
}
