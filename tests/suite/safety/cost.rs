//! The filter's cost seen from outside: the red team's nested-brace
//! command (295 bytes, `{a..p}$(` nested 8 deep, which made each scratch
//! walker restart its own count and kept a thread busy for 50 s after the
//! refusal) sent 40 times at once to a daemon. Every copy is refused, the
//! daemon answers `/v1/health` throughout, and its CPU is idle within a
//! second of the last refusal: the work stops when the answer is given.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::json;

use super::raw_post;
use crate::common::Daemon;

/// `{a..p}$(` nested 8 deep around a word of 36 more brace sequences:
/// 295 bytes whose naive expansion is 16^8 walks.
fn nested_braces() -> String {
    let inner = format!("echo {}xx", "{a..p}".repeat(36));
    format!("{}{inner}{}", "{a..p}$(".repeat(8), ")".repeat(8))
}

/// CPU time (user + system) the process has used so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|v| v.parse().unwrap())
        .collect();
    // Clock ticks of USER_HZ (100 on Linux).
    Duration::from_millis((f[0] + f[1]) * 10)
}

/// `GET path` over the daemon's socket: (status, time taken).
fn raw_get(socket: &Path, path: &str) -> (u16, Duration) {
    let start = Instant::now();
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, start.elapsed())
}

#[test]
fn forty_nested_brace_commands_at_once_are_refused_and_leave_the_daemon_idle() {
    let d = Daemon::start();
    let pid = d.pid();
    let command = nested_braces();
    assert_eq!(command.len(), 295);
    let body = json!({"shell": command, "runner": "host", "background": true}).to_string();

    // Health answers throughout, polled every 100 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let health = {
        let (stop, socket) = (stop.clone(), d.socket());
        std::thread::spawn(move || {
            let mut slowest = Duration::ZERO;
            let mut polls = 0;
            while !stop.load(Ordering::Relaxed) {
                let (status, took) = raw_get(&socket, "/v1/health");
                assert_eq!(status, 200, "health answered {status}");
                slowest = slowest.max(took);
                polls += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            (polls, slowest)
        })
    };

    let before = cpu(pid);
    let started = Instant::now();
    let gate = Arc::new(Barrier::new(40));
    let senders: Vec<_> = (0..40)
        .map(|_| {
            let (gate, socket, body) = (gate.clone(), d.socket(), body.clone());
            std::thread::spawn(move || {
                gate.wait();
                raw_post(&socket, "/v1/jobs", &body)
            })
        })
        .collect();
    let answers: Vec<(u16, String)> = senders.into_iter().map(|s| s.join().unwrap()).collect();
    let refused = Instant::now();
    let burst = cpu(pid).saturating_sub(before);
    eprintln!(
        "40 refusals in {:?}, daemon CPU {:?} for the burst",
        refused - started,
        burst
    );
    let (mut blocked, mut busy) = (0, 0);
    for (status, answer) in &answers {
        match status {
            403 if answer.contains("\"blocked\"") => blocked += 1,
            503 if answer.contains("filter_busy") => busy += 1,
            _ => panic!("not a refusal: {status} {answer}"),
        }
    }
    eprintln!("{blocked} blocked, {busy} refused as busy");

    // Idle within 1 s of the last refusal: the CPU used in the second after that.
    let settle = (refused + Duration::from_secs(1)).saturating_duration_since(Instant::now());
    std::thread::sleep(settle);
    let c1 = cpu(pid);
    std::thread::sleep(Duration::from_secs(1));
    let idle = cpu(pid).saturating_sub(c1);
    eprintln!("daemon CPU in the second after that: {idle:?}");
    // A tenth of a core at most (the health checks themselves cost a little);
    // a check still running would take a whole one.
    assert!(
        idle <= Duration::from_millis(100),
        "the daemon kept working: {idle:?}"
    );

    stop.store(true, Ordering::Relaxed);
    let (polls, slowest) = health.join().unwrap();
    eprintln!("{polls} health checks, slowest {slowest:?}");
    assert!(polls >= 5, "{polls}");
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
    // Still serving jobs.
    let (status, answer) = raw_post(
        &d.socket(),
        "/v1/jobs",
        r#"{"shell":"true","runner":"host","background":true}"#,
    );
    assert_eq!(status, 200, "{answer}");
}
