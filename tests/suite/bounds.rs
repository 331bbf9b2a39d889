//! The daemon's bounds, played with the red team's numbers: request bodies
//! over 1 MiB are refused, connections that wait for a request are closed
//! after 60 s, and streams being answered (SSE follows) are not (here);
//! queued starts and records (`queue.rs`), connections (`connections.rs`),
//! MCP sessions (`sessions.rs`), watch hits and pages of lists and events
//! (`watchers.rs`), and devcontainer.json (`devcontainer.rs`). Each checks
//! that the daemon answers health checks throughout.

mod connections;
mod devcontainer;
mod queue;
mod sessions;
mod watchers;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::Daemon;

/// One HTTP/1.1 request on its own connection (closed after the answer):
/// the status (0 when there was no answer), the head and the body.
pub(crate) fn http(socket: &Path, method: &str, path: &str, body: &str) -> (u16, String, String) {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return (0, String::new(), String::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let sent = write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: berth\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if sent.is_err() {
        return (0, String::new(), String::new());
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// The daemon answers `GET /v1/health` within `within`.
fn healthy(socket: &Path, within: Duration) -> bool {
    let started = Instant::now();
    let (status, _, body) = http(socket, "GET", "/v1/health", "");
    status == 200 && body.contains("\"ok\":true") && started.elapsed() < within
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn vm_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// How many descriptors `pid` has open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[tokio::test]
async fn a_request_body_over_one_mib_is_refused() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(d.socket()).unwrap();
    let len = 2 * 1024 * 1024;
    write!(
        s,
        "POST /v1/jobs HTTP/1.1\r\nHost: berth\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    )
    .unwrap();
    // The server may answer and close before taking it all: a failed write is fine.
    let chunk = vec![b' '; 64 * 1024];
    for _ in 0..len / chunk.len() {
        if s.write_all(&chunk).is_err() {
            break;
        }
    }
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut status = String::new();
    BufReader::new(&s).read_line(&mut status).unwrap();
    assert!(status.contains(" 413 "), "{status}");
    // Nothing was started, and the daemon still serves.
    assert_eq!(d.json(&["ps", "--all"]).as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn idle_connections_are_closed_after_60s_but_a_stream_is_not() {
    let d = Daemon::start();
    let v = d.json(&[
        "run",
        "-d",
        "--shell",
        "--",
        "while :; do echo tick; sleep 2; done",
    ]);
    let id = v["job"]["id"].as_str().unwrap().to_string();

    let socket = d.socket();
    let idle = std::thread::spawn({
        let socket = socket.clone();
        move || {
            let mut s = UnixStream::connect(&socket).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
            let started = Instant::now();
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap_or(0);
            (n, started.elapsed())
        }
    });
    let job = id.clone();
    let stream = std::thread::spawn(move || {
        let id = job;
        let mut s = UnixStream::connect(&socket).unwrap();
        write!(
            s,
            "GET /v1/jobs/{id}/logs/follow?since=1 HTTP/1.1\r\nHost: berth\r\n\r\n"
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let started = Instant::now();
        let mut reader = BufReader::new(s);
        let mut last_tick = Duration::ZERO;
        let mut line = String::new();
        // Read for 70 s: past the idle limit, ticks must keep coming.
        while started.elapsed() < Duration::from_secs(70) {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if line.contains("tick") => last_tick = started.elapsed(),
                Ok(_) => {}
            }
        }
        last_tick
    });
    let (n, closed_after) = idle.join().unwrap();
    assert_eq!(n, 0, "the idle connection got data instead of being closed");
    assert!(
        closed_after >= Duration::from_secs(55) && closed_after < Duration::from_secs(65),
        "idle connection closed after {closed_after:?}"
    );
    let last_tick = stream.join().unwrap();
    assert!(
        last_tick > Duration::from_secs(65),
        "the SSE stream stopped delivering at {last_tick:?}"
    );
    let (code, _, _) = d.run(&["kill", &id]);
    assert_eq!(code, 0);
}
