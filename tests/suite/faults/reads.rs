//! Reads are paged on the daemon's side: `berth logs` of a 1 GiB job
//! pages through it, and the daemon's memory stays flat while it does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::Daemon;

/// A figure of `/proc/<pid>/status`, in KiB.
fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

/// The daemon printed 1 GiB (10.7 M lines of 100 bytes; the default
/// `max_output` keeps the newest ~233 MB of them) and `berth logs` reads
/// all that is kept: the daemon's peak memory during the read grows by less
/// than its ring (4 MiB) + 32 MiB. Before, a read without `--limit` asked
/// for every line at once (a 100 MB job took the daemon to 344 MiB).
#[test]
fn berth_logs_of_a_1_gib_job_keeps_the_daemon_flat() {
    let d = Daemon::start();
    let v = d.json(&[
        "run",
        "-d",
        "--",
        "sh",
        "-c",
        "yes \"$(head -c 99 /dev/zero | tr '\\0' x)\" | head -c 1073741824",
    ]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(300);
    while d.json(&["status", &id])["status"]["state"] != "exited" {
        assert!(Instant::now() < deadline, "the job did not end");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = d.pid();
    let before = status_kib(pid, "VmRSS:");
    // Peak from here on (the ingest's own peak is not the read's).
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let sampler = std::thread::spawn({
        let done = done.clone();
        move || {
            let mut peak = 0;
            while !done.load(Ordering::SeqCst) {
                peak = peak.max(status_kib(pid, "VmRSS:"));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        }
    });
    let o = d.cli().args(["logs", &id]).output().unwrap();
    done.store(true, Ordering::SeqCst);
    let sampled = sampler.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let hwm = status_kib(pid, "VmHWM:");
    // Every line kept, each 99 x's (the last one 24: 1 GiB is not a whole
    // number of lines), and said where it starts.
    let text = String::from_utf8(o.stdout).unwrap();
    let mut all: Vec<&str> = text.lines().collect();
    assert_eq!(all.pop(), Some("x".repeat(24).as_str()));
    assert!(all.iter().all(|l| l.len() == 99 && l.bytes().all(|b| b == b'x')));
    let lines = all.len() + 1;
    assert!(lines > 1_500_000, "{lines} lines read");
    assert!(String::from_utf8_lossy(&o.stderr).contains("dropped by the output cap"));
    let grew = hwm.max(sampled).saturating_sub(before);
    eprintln!(
        "daemon RSS {before} KiB before the read, peak {hwm} KiB (sampled {sampled}): +{grew} KiB for {lines} lines"
    );
    assert!(grew < (4 + 32) * 1024, "the read grew the daemon by {grew} KiB");
}

/// `berth logs` pages through more than a page: the text and the one JSON
/// document (written as pages come) hold every line, a limit past a page
/// is honoured across pages, and where to read on is said.
#[test]
fn berth_logs_pages_through_pages_in_text_and_json() {
    let d = Daemon::start();
    let (code, _, err) = d.run(&["run", "--", "seq", "1", "25000"]);
    assert_eq!(code, 0, "{err}");
    let all = d.json(&["logs", "job-1"]);
    let texts: Vec<&str> = all["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (1..=25000).map(|i| i.to_string()).collect();
    assert_eq!(texts.len(), expected.len());
    assert!(
        texts.iter().zip(&expected).all(|(a, b)| a == b),
        "every line once, in order"
    );
    assert_eq!(
        (
            all["next_seq"].as_u64(),
            all["has_more"].as_bool(),
            all["last_seq"].as_u64()
        ),
        (Some(25001), Some(false), Some(25000))
    );
    let some = d.json(&["logs", "job-1", "--since", "2", "--limit", "15000"]);
    let lines = some["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 15000);
    assert_eq!(
        (
            lines[0]["seq"].as_u64(),
            some["next_seq"].as_u64(),
            some["has_more"].as_bool()
        ),
        (Some(2), Some(15002), Some(true))
    );
    let (code, out, err) = d.run(&["logs", "job-1", "--since", "20001"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 5000);
    let (_, out, _) = d.run(&["logs", "job-1"]);
    assert!(
        out == expected.join("\n") + "\n",
        "the text holds every line once, in order"
    );
}
