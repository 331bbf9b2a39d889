//! The daemon as a user meets it: `berth up`-style background jobs through
//! the socket, the cap across clients, promotion, ended_by, teardown, and a
//! daemon that survives whatever clients send it.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::common::{Daemon, SANDBOX, containers_of, eventually, http_get, processes_with, unique_sleep};

#[tokio::test]
async fn the_main_journey_on_the_host_runner() {
    let mut d = Daemon::start();
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "host",
        "-p",
        "8080",
        "--shell",
        "--",
        "exec python3 -m http.server $PORT --bind 127.0.0.1",
    ]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let port = v["job"]["ports"][0]["host_port"].as_u64().unwrap() as u16;
    let (code, out, err) = d.run(&["wait", &id, "--http", "/", "--timeout", "30"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(http_get(port).starts_with("HTTP/1.0 200"));
    let (code, _, err) = d.run(&["logs", &id, "--tail", "20"]);
    assert_eq!(code, 0);
    assert!(err.contains("\"GET / HTTP/1.0\" 200"), "server log: {err}");
    let k = d.json(&["kill", &id]);
    assert_eq!(k["result"], "killed");
    assert_eq!(k["ended_by"], "agent");
    let (code, out, _) = d.run(&["down"]);
    assert_eq!(code, 0, "{out}");
    assert!(d.wait_exit(Duration::from_secs(5)).is_some());
    assert!(!d.socket().exists(), "socket removed");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[tokio::test]
async fn the_main_journey_in_a_container() {
    let mut d = Daemon::start();
    let (code, out, err) = d.run(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        "berth/sandbox:latest",
        "-p",
        "8080",
        "--",
        "httpd",
        "-f",
        "-v",
        "-p",
        "8080",
        "-h",
        "/www",
    ]);
    assert_eq!(code, 0, "{err}");
    let id = out.lines().next().unwrap().to_string();
    assert!(id.starts_with("job-"), "{out}");
    assert!(out.contains("8080/tcp → http://127.0.0.1:"), "{out}");
    let jobs = d.json(&["ps"]);
    let port = jobs[0]["ports"][0]["host_port"].as_u64().unwrap() as u16;
    // Usage only on request: `ps` answers from the records, `ps --usage` samples.
    assert!(jobs[0].get("usage").is_none(), "{jobs}");
    let (code, table, err) = d.run(&["ps", "--usage"]);
    assert_eq!(code, 0, "{err}");
    // Memory in the one size format (`768 KiB`, `1.5 MiB`).
    assert!(
        table.contains("CPU MEM")
            && regex::Regex::new(r"%\s+\d+(\.\d)? (B|KiB|MiB|GiB)\b")
                .unwrap()
                .is_match(&table),
        "{table}"
    );
    let sampled = d.json(&["ps", "--usage"]);
    assert!(
        sampled[0]["usage"]["memory_bytes"].as_u64().unwrap() > 0,
        "{sampled}"
    );
    let (code, out, err) = d.run(&["wait", &id, "--http", "/", "--timeout", "30"]);
    assert_eq!(code, 0, "{out}{err}");
    let page = http_get(port);
    assert!(
        page.starts_with("HTTP/1.1 200") && page.contains("hello from berth"),
        "{page}"
    );
    // httpd logs the request after it answered: the line comes soon after.
    eventually(Duration::from_secs(10), "the request in the job's log", || {
        d.json(&["logs", &id, "--tail", "20"])["lines"]
            .to_string()
            .contains("response:200")
    })
    .await;
    let k = d.json(&["kill", &id]);
    assert_eq!(
        (k["result"].as_str(), k["ended_by"].as_str()),
        (Some("killed"), Some("agent"))
    );
    let ended = d.json(&["events"])["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "ended" && e["job"] == id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(ended["ended_by"], "agent");
    assert_eq!(ended["start_mode"]["mode"], "background");
    assert_eq!(d.run(&["down"]).0, 0);
    assert!(d.wait_exit(Duration::from_secs(5)).is_some());
    assert_eq!(containers_of(&d.instance), 0);
}

#[tokio::test]
async fn the_cap_holds_across_clients_and_queue_waits() {
    let d = Daemon::start();
    let token = unique_sleep();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let v = d.json(&["run", "-d", "--runner", "host", "--", "sleep", &token]);
        ids.push(v["job"]["id"].as_str().unwrap().to_string());
    }
    let (code, _, err) = d.run(&["run", "-d", "--runner", "host", "--", "sleep", &token]);
    assert_ne!(code, 0);
    assert!(err.contains("limit reached"), "{err}");
    for id in &ids {
        assert!(err.contains(id.as_str()), "{err}");
    }
    let q = d.json(&["run", "-d", "--queue", "--runner", "host", "--", "sleep", &token]);
    let queued = q["job"]["id"].as_str().unwrap().to_string();
    assert_eq!(q["job"]["status"]["state"], "queued");
    d.run(&["kill", &ids[1]]);
    eventually(Duration::from_secs(5), "queued job running", || {
        d.json(&["status", &queued])["status"]["state"] == "running"
    })
    .await;
}

#[tokio::test]
async fn a_foreground_run_is_promoted_when_its_budget_runs_out() {
    let d = Daemon::start();
    let started = Instant::now();
    let (code, out, err) = d.run(&[
        "run",
        "--runner",
        "host",
        "--timeout",
        "2",
        "--",
        "sh",
        "-c",
        "echo hi; sleep 30",
    ]);
    let took = started.elapsed();
    // Still running is not success: a CI step must not take it for one.
    assert_eq!(code, 75, "{err}");
    assert!(err.contains("berth wait job-"), "says how to wait for it: {err}");
    // Not before its budget; that it returned at the budget and not at the
    // job's end is the job still running, below.
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(out.starts_with("hi\n"), "{out}");
    assert!(err.contains("auto background (2s budget exceeded)"), "{err}");
    let jobs = d.json(&["ps"]);
    assert_eq!(jobs[0]["status"]["state"], "running");
    assert_eq!(
        jobs[0]["start_mode"],
        serde_json::json!({"mode": "promoted", "by": "system"})
    );
}

/// A run that names no budget gets its caller's (`BERTH_TIMEOUT` here, the
/// daemon's own being 60 s): the manager fills it in and the record shows
/// it; bad input comes back as the same one line and exit code as without
/// a daemon.
#[tokio::test]
async fn a_run_without_timeout_gets_its_callers_budget_from_the_manager() {
    let d = Daemon::start();
    let o = d
        .cli()
        .env("BERTH_TIMEOUT", "2")
        .args(["run", "--", "sh", "-c", "echo hi; sleep 30"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(75), "{err}");
    assert!(err.contains("auto background (2s budget exceeded)"), "{err}");
    let jobs = d.json(&["ps"]);
    assert_eq!(jobs[0]["spec"]["timeout"], serde_json::json!(2.0));
    assert_eq!(jobs[0]["spec"]["runner"], "host");

    let (code, _, err) = d.run(&["run", "--timeout=0", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("berth: ") && err.contains("timeout"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `berth run` through the daemon (one request that creates and streams):
/// every line of both streams arrives, in order, bytes as printed (a last
/// line without newline gets one), and the job's own exit code comes back.
#[tokio::test]
async fn a_foreground_run_streams_every_line_and_the_exit_code() {
    let d = Daemon::start();
    let n = 60_000;
    let script = format!("seq 1 {n}; echo warned >&2; printf tail; exit 3");
    let (code, out, err) = d.run(&["run", "--runner", "host", "--", "sh", "-c", &script]);
    assert_eq!(code, 3, "{err}");
    let mut expected: String = (1..=n).map(|i| format!("{i}\n")).collect();
    expected.push_str("tail\n");
    assert!(
        out == expected,
        "stdout differs: {} bytes, {} expected",
        out.len(),
        expected.len()
    );
    assert!(err.contains("warned\n"), "{err}");
    // `-d` with a ready condition answers once it is met, in one request.
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        "host",
        "--ready-log",
        "up",
        "--",
        "sh",
        "-c",
        "echo up; sleep 30",
    ]);
    assert_eq!(v["ready"]["outcome"], "ready", "{v}");
    assert_eq!(v["job"]["status"]["state"], "running", "{v}");
}

#[tokio::test]
async fn bg_releases_a_blocked_run_while_its_job_runs_on() {
    let d = Daemon::start();
    let mut blocked = d
        .cli()
        .args(["run", "--runner", "host", "--", "sleep", "30"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    eventually(Duration::from_secs(10), "foreground job listed", || {
        d.json(&["ps"]).as_array().is_some_and(|a| a.len() == 1)
    })
    .await;
    let id = d.json(&["ps"])[0]["id"].as_str().unwrap().to_string();
    let (code, _, err) = d.run(&["bg", &id]);
    assert_eq!(code, 0, "{err}");
    // Released: `berth run` ends (75) while its 30 s job still runs.
    let status = blocked.wait().unwrap();
    assert_eq!(status.code(), Some(75), "released, still running");
    assert_eq!(d.json(&["status", &id])["status"]["state"], "running");
    let mut err = String::new();
    blocked.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("moved to background by user"), "{err}");
    let events = d.json(&["events"]);
    let promoted = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "promoted" && e["by"] == "user" && e["job"] == id.as_str());
    assert!(promoted, "{events}");
}

#[tokio::test]
async fn sigterm_tears_everything_down_within_grace_plus_one_second() {
    let mut d = Daemon::start();
    let token = unique_sleep();
    for (runner, cmd) in [
        ("docker", format!("sleep {token}")),
        ("host", format!("trap '' TERM; sleep {token}")),
        ("host", format!("sleep {token} & sleep {token}")),
    ] {
        d.json(&["run", "-d", "--runner", runner, "--shell", "--", &cmd]);
    }
    // Container processes are host processes too.
    eventually(Duration::from_secs(10), "4 sleeps", || {
        processes_with(&token).len() == 4
    })
    .await;
    assert_eq!(containers_of(&d.instance), 1);
    let started = Instant::now();
    std::process::Command::new("kill")
        .args(["-TERM", &d.pid().to_string()])
        .status()
        .unwrap();
    let status = d.wait_exit(Duration::from_secs(10)).expect("daemon exits");
    let took = started.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(3), "grace 2 s + 1 s, took {took:?}");
    assert_eq!(processes_with(&token), Vec::<u32>::new());
    assert_eq!(containers_of(&d.instance), 0);
    assert!(!d.socket().exists());
}

#[tokio::test]
async fn a_second_daemon_is_refused_and_a_stale_socket_replaced() {
    let d = Daemon::start();
    let o = d.cli().arg("daemon").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0));
    assert!(err.contains(&format!("pid {}", d.pid())), "{err}");
    // Socket private to its user.
    let socket = d.socket();
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    drop(d);

    // A daemon killed outright leaves its socket; the next one replaces it.
    let mut d = Daemon::start();
    let socket = d.socket();
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    assert!(socket.exists());
    let mut again = d
        .cli()
        .arg("daemon")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    eventually(
        Duration::from_secs(10),
        "new daemon answers on the replaced socket",
        || d.answers(),
    )
    .await;
    again.kill().unwrap();
    again.wait().unwrap();
}

/// Raw HTTP over the socket, returning the status code.
fn raw(socket: &std::path::Path, request: &[u8]) -> u16 {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The server may answer (413) and close before reading a huge body.
    let _ = s.write_all(request);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test]
async fn malformed_requests_get_4xx_and_change_nothing() {
    let d = Daemon::start();
    let socket = d.socket();
    let bad: Vec<(Vec<u8>, u16)> = vec![
        (post("/v1/jobs", "{not json"), 400),
        (post("/v1/jobs", r#"{"argv": ["true"], "colour": "red"}"#), 400),
        (post("/v1/jobs", r#"{"argv": "true"}"#), 400),
        (post("/v1/jobs", r#"{"argv": []}"#), 400),
        (post("/v1/jobs", r#"{"argv": ["true"], "watch": ["("]}"#), 400),
        (
            post("/v1/jobs", r#"{"argv": ["true"], "ports": [{"port": 0}]}"#),
            400,
        ),
        (post("/v1/jobs/job-999/kill", "{}"), 404),
        (
            post("/v1/jobs/job-1/wait", r#"{"conditions": [{"log": "("}]}"#),
            404,
        ),
        (post("/v1/jobs/x/background", r#"{"by": "robot"}"#), 400),
        (
            b"GET /v1/jobs?filter=sideways HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
            400,
        ),
        (
            b"GET /v1/jobs/job-1/logs?tail=-3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
            400,
        ),
        (
            b"GET /v1/jobs/job-999/logs/text HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
            404,
        ),
        (
            b"GET /v1/jobs/job-1/logs/text?tail=3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
            400,
        ),
        (
            b"GET /v1/jobs/job-1/logs/text?stream=both HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                .to_vec(),
            400,
        ),
        (
            b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
            404,
        ),
        (
            post(
                "/v1/jobs",
                &format!(r#"{{"shell": "{}"}}"#, "x".repeat(2 * 1024 * 1024)),
            ),
            413,
        ),
    ];
    for round in 0..20 {
        for (req, want) in &bad {
            let got = raw(&socket, req);
            assert_eq!(
                got,
                *want,
                "round {round}: {}",
                String::from_utf8_lossy(&req[..req.len().min(120)])
            );
        }
    }
    // Garbage that is not even HTTP.
    for _ in 0..50 {
        let _ = raw(&socket, b"\x00\x01\x02 hello\r\n\r\n");
    }
    assert_eq!(
        d.json(&["ps", "--all"]),
        serde_json::json!([]),
        "nothing was started"
    );
    let v = d.json(&["run", "-d", "--runner", "host", "--", "true"]);
    assert!(v["job"]["id"].as_str().unwrap().starts_with("job-"));
    let body = r#"{"argv":["true"],"runner":"host","background":true}"#;
    assert_eq!(raw(&socket, &post("/v1/jobs", body)), 200);
}

/// `berth logs` prints from the daemon's text frames what the JSON pages
/// hold: every line of each stream on its own stream, over many pages,
/// from `--since`, up to `--limit`, of one `--stream`.
#[test]
fn logs_as_text_are_the_lines_the_pages_hold() {
    let d = Daemon::start();
    let script =
        "seq 1 25000 | awk '{print \"out \" $1; if ($1 % 7 == 0) print \"err \" $1 > \"/dev/stderr\"}'";
    let v = d.json(&["run", "-d", "--runner", "host", "--shell", "--", script]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    assert_eq!(d.run(&["wait", &id]).0, 0);
    for args in [
        &[][..],
        &["--since", "9000"],
        &["--since", "3", "--limit", "12000"],
        &["--stream", "stderr"],
    ] {
        let mut json = vec!["logs", &id];
        json.extend_from_slice(args);
        let doc = d.json(&json);
        let of = |stream: &str| -> Vec<String> {
            let lines = doc["lines"].as_array().unwrap().iter();
            lines
                .filter(|l| l["stream"] == stream)
                .map(|l| l["text"].as_str().unwrap().to_string())
                .collect()
        };
        let mut text = vec!["logs", &id];
        text.extend_from_slice(args);
        let (code, out, err) = d.run(&text);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(out.lines().collect::<Vec<_>>(), of("stdout"), "{args:?}");
        // The job's stderr, and berth's own word on where to read on.
        let job_err: Vec<&str> = err
            .lines()
            .filter(|l| !l.starts_with("berth: more lines follow"))
            .collect();
        assert_eq!(job_err, of("stderr"), "{args:?}");
        assert!(
            of("stdout").len() + of("stderr").len() > 3000,
            "{args:?}: many lines"
        );
    }
}

/// A `berth logs` whose daemon stops mid-answer fails, and its message
/// names the seq to read on from: reading on from there (from the store,
/// with no daemon) gives every line the first read did not.
#[test]
fn a_logs_read_the_daemon_drops_says_where_to_read_on_and_misses_nothing() {
    const LINES: u32 = 400_000;
    let mut d = Daemon::start();
    let script = format!("seq 1 {LINES}");
    let v = d.json(&["run", "-d", "--runner", "host", "--shell", "--", &script]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    assert_eq!(d.run(&["wait", &id]).0, 0);
    let mut read = d
        .cli()
        .args(["logs", &id])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = read.stdout.take().unwrap();
    // The answer has begun; the rest (megabytes) waits on this pipe.
    let mut first = vec![0u8; 4096];
    out.read_exact(&mut first).unwrap();
    // Stopped as a restart stops it: the store keeps all the job wrote.
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &d.pid().to_string()])
        .status();
    assert!(stopped.unwrap().success());
    assert!(d.wait_exit(Duration::from_secs(20)).is_some(), "the daemon stops");
    out.read_to_end(&mut first).unwrap();
    let mut err = String::new();
    read.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(!read.wait().unwrap().success(), "the read broke off: {err}");
    let since = err
        .split("--since ")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("no seq to read on from: {err}"));
    let got: Vec<u32> = String::from_utf8(first)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert!(got.len() < LINES as usize, "the read did break off early");
    assert!(got.iter().zip(1..).all(|(g, n)| *g == n), "in order from 1");
    let printed = got.len() as u32;
    assert!(
        since <= printed + 1,
        "resuming at {since} skips lines after {printed}"
    );
    // At most the page that broke off is read twice, not all before it.
    let page = berth::output::PAGE_LINES as u32;
    assert!(
        since + page > printed + 1,
        "resuming at {since} repeats more than a page of {printed}"
    );
    let (code, rest, err) = d.run(&["logs", &id, "--since", &since.to_string()]);
    assert_eq!(code, 0, "{err}");
    let rest: Vec<u32> = rest.lines().map(|l| l.parse().unwrap()).collect();
    let whole = rest.first() == Some(&since) && rest.windows(2).all(|w| w[1] == w[0] + 1);
    assert!(
        whole && rest.last() == Some(&LINES),
        "read on from {since}: {} lines, {:?}..{:?}: {err}",
        rest.len(),
        rest.first(),
        rest.last()
    );
}

/// `berth logs --follow` (SSE, in batches; per line with `--json`): every
/// line once and in order, lines printed after it started included, and it
/// returns when the job ends.
#[tokio::test]
async fn logs_follow_prints_every_line_once_live_and_returns_when_the_job_ends() {
    use std::io::BufRead;
    let d = Daemon::start();
    let go = d.dir.path().join("go");
    let print = |from: u32, to: u32| {
        format!(
            "seq {from} {to} | awk '{{print \"out \" $1; if ($1 % 3 == 0) print \"err \" $1 > \"/dev/stderr\"}}'"
        )
    };
    // The second half is printed once the test saw the first one followed.
    let script = format!(
        "{}; n=0; while [ ! -e {} ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; {}",
        print(1, 2000),
        go.display(),
        print(2001, 4000)
    );
    let v = d.json(&["run", "-d", "--runner", "host", "--shell", "--", &script]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let mut follow = d
        .cli()
        .args(["logs", &id, "--follow"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(follow.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in out.by_ref() {
        let line = line.unwrap();
        let first_half_done = line == "out 2000";
        seen.push(line);
        if first_half_done {
            break;
        }
    }
    assert!(
        follow.try_wait().unwrap().is_none(),
        "still following a running job"
    );
    std::fs::write(&go, "").unwrap();
    seen.extend(out.map(|l| l.unwrap()));
    let status = follow.wait().unwrap();
    let mut err = String::new();
    follow.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{err}");
    let want: Vec<String> = (1..=4000).map(|i| format!("out {i}")).collect();
    assert_eq!(seen, want);
    let want_err: Vec<String> = (3..=4000).step_by(3).map(|i| format!("err {i}")).collect();
    assert_eq!(err.lines().collect::<Vec<_>>(), want_err);

    // After the end, one stream, a record per line: the stored lines, and done.
    let (code, out, err) = d.run(&[
        "logs", &id, "--follow", "--json", "--stream", "stderr", "--limit", "5",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let texts: Vec<&str> = lines.iter().map(|l| l["text"].as_str().unwrap()).collect();
    assert_eq!(texts, want_err);
    assert!(lines.iter().all(|l| l["stream"] == "stderr"));
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in seq order");
}

/// `berth wait ID` with no condition waits for the end and exits with the
/// job's code, as `docker wait` and `pueue wait` do (it used to say "ended
/// before it was ready" and exit 1 for a job that succeeded).
#[test]
fn wait_without_a_condition_waits_for_the_end_and_gives_its_code() {
    let d = Daemon::start();
    for (cmd, want) in [("sleep 1; exit 0", 0), ("sleep 1; exit 3", 3)] {
        let v = d.json(&["run", "-d", "--shell", "--", cmd]);
        let id = v["job"]["id"].as_str().unwrap().to_string();
        let (code, out, err) = d.run(&["wait", &id]);
        assert_eq!(code, want, "{cmd}: {out}{err}");
        assert!(out.contains(&format!("{id} ended")), "{out}{err}");
        assert_eq!(d.json(&["status", &id])["status"]["state"], "exited", "{cmd}");
    }
    // Bounded on request: the job runs on and the line says so.
    let v = d.json(&["run", "-d", "--", "sleep", &unique_sleep()]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let (code, _, err) = d.run(&["wait", &id, "--timeout", "0.5"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("still running") && err.contains("runs on"), "{err}");
    assert_eq!(d.json(&["kill", &id])["result"], "killed");
}

/// A `berth kill` typed at a terminal is recorded as the user's; one run by
/// an agent or a script (no terminal) as the agent's; `--as` wins.
#[test]
fn a_kill_typed_at_a_terminal_is_the_users() {
    let d = Daemon::start();
    let start = || {
        let v = d.json(&["run", "-d", "--", "sleep", &unique_sleep()]);
        v["job"]["id"].as_str().unwrap().to_string()
    };
    let (typed, piped, said) = (start(), start(), start());
    // `script` gives the command a pseudo-terminal, as a shell would.
    let exe = env!("CARGO_BIN_EXE_berth");
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qec", &format!("{exe} kill {typed}"), "/dev/null"]);
    for (k, v) in d.cli().get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let o = cmd.output().expect("script (util-linux) runs");
    assert!(o.status.success(), "{o:?}");
    let (code, _, err) = d.run(&["kill", &piped]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = d.run(&["kill", &said, "--as", "user"]);
    assert_eq!(code, 0, "{err}");
    for (id, want) in [(&typed, "user"), (&piped, "agent"), (&said, "user")] {
        let v = d.json(&["status", id]);
        assert_eq!(v["status"]["ended_by"], want, "{id}: {v}");
    }
}

/// `run -d --ready-…` that is not ready in time: one line naming what was
/// awaited and the last output, saying the job runs on (and it does), or
/// that it was stopped with `--ready-kill`; `--ready-timeout` bounds it.
#[test]
fn a_start_that_is_not_ready_in_time_says_so_in_one_line() {
    let d = Daemon::start();
    let job = format!("echo warming up; sleep {}", unique_sleep());
    for kill in [false, true] {
        let mut args = vec!["run", "-d", "--ready-log", "^never$", "--ready-timeout", "1"];
        if kill {
            args.push("--ready-kill");
        }
        args.extend(["--shell", "--", &job]);
        let (code, out, err) = d.run(&args);
        assert_eq!(code, 1, "{out}{err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("berth: ")).collect();
        assert_eq!(lines.len(), 1, "{err}");
        let line = lines[0];
        assert!(
            line.contains("not ready after") && line.contains("log /^never$/"),
            "{line}"
        );
        // `--ready-timeout 1` held: the wait berth reports is its 1 s, not
        // the 60 s default.
        let waited: f64 = line
            .split("not ready after ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|secs| secs.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(
            (1.0..berth::config::DEFAULT_WAIT_SECS).contains(&waited),
            "{line}"
        );
        // The id on stdout and that line: no card (README: one line).
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(line.contains("last output: warming up"), "{line}");
        let id = out.lines().next().unwrap().trim().to_string();
        let state = d.json(&["status", &id])["status"]["state"].clone();
        if kill {
            assert!(line.contains("stopped (--ready-kill)"), "{line}");
            assert_eq!(state, "killed", "{line}");
        } else {
            assert!(
                line.contains("still running") && line.contains(&format!("berth kill {id}")),
                "{line}"
            );
            assert_eq!(state, "running", "{line}");
        }
    }
}

/// `berth up` right after the daemon was told to stop (SIGTERM) waits for
/// it to be gone and starts a new one, 20 times in a row, each time with a
/// container job running at the stop: the next job runs (it used to find
/// the stopping daemon "already running" and be refused as shutting down).
#[test]
fn berth_up_right_after_a_sigterm_replaces_the_stopping_daemon() {
    let d = Daemon::start();
    let pid_file = d.config().instance_dir().join("daemon.pid");
    for round in 0..20 {
        let v = d.json(&[
            "run",
            "-d",
            "--runner",
            "docker",
            "--image",
            SANDBOX,
            "--",
            "sleep",
            &unique_sleep(),
        ]);
        assert!(v["job"]["id"].is_string(), "round {round}: {v}");
        let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
        assert!(
            std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let (code, out, err) = d.run(&["up"]);
        assert_eq!(code, 0, "round {round}: {out}{err}");
        let (code, out, err) = d.run(&[
            "run", "--runner", "docker", "--image", SANDBOX, "--", "echo", "ok",
        ]);
        assert_eq!((code, out.trim()), (0, "ok"), "round {round}: {err}");
    }
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
}
