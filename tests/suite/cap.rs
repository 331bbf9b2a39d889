//! The cap of `max_jobs` running jobs per instance holds whoever starts the
//! job and however: foreground runs count, a promotion never pushes the count
//! over, and `--queue` runs the waiting jobs later, in the order they asked.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Daemon, eventually, unique_sleep};

/// Jobs holding a slot (starting or running) right now, per `berth ps`.
fn running(d: &Daemon) -> usize {
    d.json(&["ps"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| matches!(j["status"]["state"].as_str(), Some("starting" | "running")))
        .count()
}

/// Sample `running` every 50 ms on a thread until stopped; returns the maximum seen.
fn sampler(d: Arc<Daemon>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let max = AtomicUsize::new(0);
        while !stop.load(Ordering::SeqCst) {
            max.fetch_max(running(&d), Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(50));
        }
        max.load(Ordering::SeqCst)
    })
}

#[tokio::test]
async fn foreground_runs_never_push_the_running_count_over_the_cap() {
    let d = Arc::new(Daemon::start());
    let token = unique_sleep();
    let mut background = Vec::new();
    for _ in 0..3 {
        let v = d.json(&["run", "-d", "--runner", "host", "--", "sleep", &token]);
        background.push(v["job"]["id"].as_str().unwrap().to_string());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let sampling = sampler(d.clone(), stop.clone());
    let started = Instant::now();

    // Five foreground runs with a 1 s budget, from five clients at once: each
    // is refused with the running jobs named (no slot, nothing to promote).
    let runs: Vec<_> = (0..5)
        .map(|_| {
            d.cli()
                .args([
                    "run",
                    "--no-queue",
                    "--runner",
                    "host",
                    "--timeout",
                    "1",
                    "--",
                    "sleep",
                    "5",
                ])
                .output()
                .unwrap()
        })
        .collect();
    for out in &runs {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("limit reached"), "{err}");
        for id in &background {
            assert!(err.contains(id.as_str()), "names the running jobs: {err}");
        }
    }

    // With --queue they wait, queued in the order they asked, then run in
    // that order as slots free, each promoted at its budget without ever
    // holding more than the cap.
    let mut queued = Vec::new();
    for i in 0..5 {
        let child = d
            .cli()
            .args([
                "run",
                "--queue",
                "--runner",
                "host",
                "--timeout",
                "1",
                "--",
                "sleep",
                "2",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        queued.push(child);
        eventually(Duration::from_secs(10), "the run is queued", || {
            d.json(&["ps"])
                .as_array()
                .unwrap()
                .iter()
                .any(|j| j["queue_position"] == i + 1)
        })
        .await;
    }
    let waiting = d.json(&["ps"]);
    // `ps` lists newest first: the line is the reverse.
    let mut line: Vec<String> = waiting
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["status"]["state"] == "queued")
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect();
    line.reverse();
    assert_eq!(line.len(), 5, "{waiting}");
    for id in &background {
        d.run(&["kill", id]);
    }
    eventually(Duration::from_secs(30), "every queued run ended", || {
        d.json(&["ps"]).as_array().unwrap().is_empty()
    })
    .await;
    while started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let max = sampling.join().unwrap();
    assert!(max <= 3, "{max} jobs ran at once with a cap of 3");
    for mut child in queued {
        let status = child.wait().unwrap();
        // Promoted at its 1 s budget (exit 75) or, if its slot came late in
        // the budget, ended within it (exit 0): never refused, never lost.
        assert!(matches!(status.code(), Some(0) | Some(75)), "{status}");
    }
    // Started in the order they asked.
    let events = d.json(&["events"]);
    let started_order: Vec<String> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "started" && line.contains(&e["job"].as_str().unwrap().to_string()))
        .map(|e| e["job"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(started_order, line);
}
