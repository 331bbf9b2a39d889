//! MCP sessions on the socket: the red team opened 3,000 and every one was
//! accepted and kept forever. Now 64 are served at once and the rest are
//! refused with one clear answer (the daemon answering health checks all
//! along); a session that sends nothing for `mcp_idle` while none of its
//! jobs runs gets a notice line and is closed, and one whose job runs is
//! kept until the job ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::healthy;
use crate::common::{Daemon, unique_sleep};

/// An MCP session opened by hand on the daemon's socket.
struct Raw {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

/// Ask for a session: the upgraded stream, or the refusal's status line and body.
fn attach(d: &Daemon) -> Result<Raw, (String, String)> {
    let ws = d.dir.path().join("ws");
    let mut s = UnixStream::connect(d.socket()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        // The session's user lets its agent ask for host jobs (BERTH_ALLOW_HOST=1).
        "POST /v1/mcp?cwd={}&env=%7B%22BERTH_ALLOW_HOST%22%3A%221%22%7D HTTP/1.1\r\nHost: berth\r\nConnection: Upgrade\r\nUpgrade: berth-mcp\r\nContent-Length: 0\r\n\r\n",
        ws.display()
    )
    .unwrap();
    let writer = s.try_clone().unwrap();
    let mut reader = BufReader::new(s);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    if status.contains(" 101 ") {
        return Ok(Raw { reader, writer });
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Err((status, String::from_utf8_lossy(&body).into_owned()))
}

impl Raw {
    fn send(&mut self, message: Value) {
        writeln!(self.writer, "{message}").unwrap();
    }

    /// The next line from the manager; `None` at the end of the session.
    fn next(&mut self, timeout: Duration) -> Option<String> {
        self.reader.get_ref().set_read_timeout(Some(timeout)).unwrap();
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(line),
            Err(e) => panic!("no line within {timeout:?}: {e}"),
        }
    }

    /// `initialize`, then a background `sleep` through the `run` tool.
    fn start_a_job(&mut self, sleep: &str) {
        self.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bounds", "version": "0"}}}),
        );
        let init = self.next(Duration::from_secs(10)).expect("initialize answer");
        assert!(init.contains("\"result\""), "{init}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        self.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run", "arguments": {"command": format!("sleep {sleep}"), "background": true, "runner": "host"}}}));
        let run = self.next(Duration::from_secs(20)).expect("run answer");
        assert!(
            run.contains("\"id\":2") && !run.contains("\"isError\":true"),
            "{run}"
        );
    }
}

#[test]
fn three_thousand_sessions_are_refused_beyond_64_with_one_clear_answer() {
    let d = Daemon::start_with(&[("BERTH_MCP_IDLE", "0")]);
    let socket = d.socket();
    let mut open = Vec::new();
    let mut refused = 0;
    for i in 0..3000 {
        match attach(&d) {
            Ok(s) => open.push(s),
            Err((status, body)) => {
                assert!(status.contains(" 503 "), "{status}");
                assert!(
                    body.contains("too_many_sessions") && body.contains("64 MCP sessions are attached"),
                    "{body}"
                );
                refused += 1;
            }
        }
        if i % 500 == 0 {
            assert!(
                healthy(&socket, Duration::from_secs(1)),
                "no health answer at {i}"
            );
        }
    }
    assert_eq!((open.len(), refused), (64, 2936));
    // One leaves: the next is served.
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = loop {
        if let Ok(s) = attach(&d) {
            break s;
        }
        assert!(Instant::now() < deadline, "no room after a session left");
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(again);
    assert!(d.answers());
}

#[test]
fn idle_sessions_are_closed_with_a_notice_but_not_while_their_job_runs() {
    let d = Daemon::start_with(&[("BERTH_MCP_IDLE", "2")]);
    let sleep = unique_sleep();
    let mut busy = attach(&d).expect("a session");
    busy.start_a_job(&sleep);
    let mut idle: Vec<Raw> = (0..4).map(|_| attach(&d).expect("a session")).collect();
    let started = Instant::now();
    for s in &mut idle {
        let notice = s.next(Duration::from_secs(10)).expect("a notice before the end");
        assert!(
            notice.contains("notifications/message") && notice.contains("sent nothing for 2 s"),
            "{notice}"
        );
        assert_eq!(
            s.next(Duration::from_secs(5)),
            None,
            "the session ends after its notice"
        );
    }
    let closed_after = started.elapsed();
    assert!(
        closed_after < Duration::from_secs(6),
        "idle sessions closed after {closed_after:?}"
    );
    // The session whose job runs stays: nothing comes within three idle periods.
    busy.reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(6)))
        .unwrap();
    let mut line = String::new();
    let waited = busy.reader.read_line(&mut line);
    assert!(waited.is_err(), "the busy session got {waited:?}: {line}");
    let jobs = d.json(&["ps"]);
    assert_eq!(jobs.as_array().unwrap().len(), 1, "its job still runs: {jobs}");
    // Once its job is stopped, it is closed like the others.
    let id = jobs[0]["id"].as_str().unwrap().to_string();
    assert_eq!(d.run(&["kill", &id]).0, 0);
    let notice = busy.next(Duration::from_secs(10)).expect("a notice");
    assert!(notice.contains("runs no job"), "{notice}");
    assert_eq!(busy.next(Duration::from_secs(5)), None);
    assert!(d.answers());
}
