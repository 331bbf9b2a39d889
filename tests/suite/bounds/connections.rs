//! Connections: the red team held 19,990 idle connections, the daemon ran
//! out of descriptors and health checks timed out. Here the daemon's
//! descriptor limit is set to 1,024 (a common default; it serves 256
//! connections then) and 20,000 idle connections are opened, 2,000 held at
//! a time: the longest-idle ones are closed to make room, the daemon never
//! nears its limit, and every health check is answered. When every
//! connection is busy answering (SSE follows), a new one gets one clear 503,
//! even a client that sends its request after the 503 arrived; a flood of
//! refused connections holds at most 16 more descriptors.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{healthy, http, open_fds};
use crate::common::Daemon;

/// Lower the daemon's descriptor limit to `n` (soft and hard).
fn limit_fds(d: &Daemon, n: u32) {
    let status = Command::new("prlimit")
        .args(["--pid", &d.pid().to_string(), &format!("--nofile={n}:{n}")])
        .status()
        .expect("prlimit (util-linux)");
    assert!(status.success());
}

#[test]
fn twenty_thousand_idle_connections_do_not_starve_health_checks() {
    let d = Daemon::start();
    limit_fds(&d, 1024);
    let socket = d.socket();
    let mut held = VecDeque::new();
    let mut most_fds = 0;
    let started = Instant::now();
    for i in 1..=20_000 {
        // Connecting can wait a moment while the daemon catches up.
        let conn = UnixStream::connect(&socket).unwrap_or_else(|e| panic!("connection {i}: {e}"));
        held.push_back(conn);
        if held.len() > 2000 {
            held.pop_front();
        }
        if i % 1000 == 0 {
            assert!(
                healthy(&socket, Duration::from_secs(2)),
                "health check after {i} idle connections went unanswered"
            );
            most_fds = most_fds.max(open_fds(d.pid()));
        }
    }
    eprintln!(
        "20,000 idle connections in {:?}; the daemon held at most {most_fds} descriptors",
        started.elapsed()
    );
    assert!(
        most_fds < 256 + 64,
        "the daemon held {most_fds} descriptors of its 1024"
    );
    drop(held);
    // It still serves everything.
    assert!(d.answers());
}

#[test]
fn when_every_connection_is_busy_a_new_one_gets_one_clear_503() {
    let d = Daemon::start();
    // A quarter of 64 is below the floor: 16 connections.
    limit_fds(&d, 64);
    let socket = d.socket();
    let follows: Vec<BufReader<UnixStream>> = (0..16)
        .map(|_| {
            let mut s = UnixStream::connect(&socket).unwrap();
            write!(s, "GET /v1/events/follow HTTP/1.1\r\nHost: berth\r\n\r\n").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut r = BufReader::new(s);
            let mut status = String::new();
            r.read_line(&mut status).unwrap();
            assert!(status.contains(" 200 "), "{status}");
            r
        })
        .collect();
    let (status, head, body) = http(&socket, "GET", "/v1/health", "");
    assert_eq!(status, 503, "{head}");
    assert!(
        body.contains("too_many_connections") && body.contains("busy"),
        "{body}"
    );
    assert_eq!(body.lines().count(), 1, "{body}");
    // A client slower than the daemon (its request sent after the 503
    // arrived) can still send it and read the answer: the refusal is not
    // closed under it (EPIPE) or with its request unread (ECONNRESET).
    let (written, answer) = slow_client(&socket);
    assert!(written.is_ok(), "the request could not be sent: {written:?}");
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer:?}");
    assert!(answer.contains("too_many_connections"), "{answer}");
    // Refusals that linger are bounded: a flood of connections that send
    // nothing holds at most 16 more descriptors in the daemon. One more
    // connection that only listens reads its 503 once the daemon has
    // accepted (and refused) the whole flood.
    let before = open_fds(d.pid());
    let pid = d.pid();
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        std::thread::spawn(move || {
            let mut most = 0;
            while sampling.load(std::sync::atomic::Ordering::SeqCst) {
                most = most.max(open_fds(pid));
            }
            most
        })
    };
    let flood: Vec<UnixStream> = (0..100).map(|_| UnixStream::connect(&socket).unwrap()).collect();
    let mut last = UnixStream::connect(&socket).unwrap();
    last.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = String::new();
    let _ = last.read_to_string(&mut answer);
    sampling.store(false, std::sync::atomic::Ordering::SeqCst);
    let most = sampler.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer:?}");
    assert!(
        most <= before + 16 + 2,
        "{most} descriptors while refusing a flood, {before} before"
    );
    drop(flood);
    // Once a follow ends, health is answered again.
    drop(follows);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !healthy(&socket, Duration::from_secs(1)) {
        assert!(
            Instant::now() < deadline,
            "no health answer after the follows ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Connect, wait until the daemon's answer is readable, then send a
/// request and read everything: whether the request was sent, and the
/// answer read.
fn slow_client(socket: &std::path::Path) -> (std::io::Result<()>, String) {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut first = [0u8; 1];
    let peeked = nix::sys::socket::recv(
        std::os::fd::AsRawFd::as_raw_fd(&s),
        &mut first,
        nix::sys::socket::MsgFlags::MSG_PEEK,
    )
    .expect("an answer before any request");
    assert_eq!(peeked, 1, "the connection was closed without an answer");
    let written = write!(
        s,
        "GET /v1/health HTTP/1.1\r\nHost: berth\r\nConnection: close\r\n\r\n"
    );
    let mut answer = Vec::new();
    let read = s.read_to_end(&mut answer);
    assert!(read.is_ok(), "reading the answer failed: {read:?}");
    (written, String::from_utf8_lossy(&answer).into_owned())
}
