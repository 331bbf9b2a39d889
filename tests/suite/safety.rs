//! The safety layer end to end: a blocked command never reaches a runner and
//! is logged once (library, CLI, daemon API), the workspace guard refuses
//! `..` and symlink escapes, and containers are hardened and contained. The
//! bypass corpus shared with SECURITY.md is in `safety/corpus.rs`.

mod bounds;
mod containers;
mod corpus;
mod cost;
mod lexer_fuzz;
mod ordinary;

use std::io::{Read, Write};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::time::Duration;

use berth::{Error, JobSpec, JobStatus, RunnerChoice};
use pretty_assertions::assert_eq;

use crate::common::{Daemon, berth, manager, manager_with};

const IMAGE: &str = "berth/sandbox:latest";

fn host(spec: JobSpec) -> JobSpec {
    spec.with_runner(RunnerChoice::Host)
}

fn docker(spec: JobSpec) -> JobSpec {
    spec.with_runner(RunnerChoice::Docker).with_image(IMAGE)
}

/// The security log's lines, parsed.
fn log_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A blocked error's Display is one line of JSON.
fn blocked_json(err: &Error) -> serde_json::Value {
    let text = err.to_string();
    assert!(!text.contains('\n'), "{text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn a_blocked_command_never_reaches_a_runner_and_is_logged_once() {
    let t = manager();
    let ws = t.workspace();
    let log = t.manager.config().instance_dir().join("security.log");
    let instance = t.manager.config().instance.clone();

    let err = t
        .manager
        .start(host(JobSpec::shell("touch MARKER; sudo id")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Blocked { .. }), "{err}");
    assert_eq!((err.code(), err.exit_code()), ("blocked", 126));
    let json = blocked_json(&err);
    assert_eq!(json["blocked"], true);
    assert_eq!(json["command"], "touch MARKER; sudo id");
    assert!(
        json["reason"].as_str().unwrap().contains("privilege escalation"),
        "{json}"
    );
    assert!(json["pattern"].as_str().unwrap().contains("sudo"), "{json}");

    assert!(!ws.join("MARKER").exists(), "the command never ran");
    assert_eq!(
        t.manager.list(berth::ListFilter::All),
        vec![],
        "no job was created"
    );
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    chrono::DateTime::parse_from_rfc3339(line["timestamp"].as_str().unwrap()).unwrap();
    assert_eq!(line["reason"], json["reason"]);
    assert_eq!(line["pattern"], json["pattern"]);
    assert_eq!(line["command"], "touch MARKER; sudo id");
    assert_eq!(line["cwd"], ws.to_str().unwrap());
    assert_eq!(line["instance"], instance.as_str());
    assert_eq!(line["client"], "library");
    assert_eq!(line["matched"], "sudo id");
    let mode = std::fs::metadata(&log).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // argv mode, and through a wrapper: refused the same way, one more line.
    let err = t
        .manager
        .start(host(JobSpec::argv(["env", "sudo", "touch", "MARKER"])))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Blocked { .. }), "{err}");
    assert_eq!(log_lines(&log).len(), 2);

    // The control: the same marker without sudo is created, so the check above means something.
    let info = t
        .manager
        .start(host(JobSpec::shell("touch MARKER")))
        .await
        .unwrap()
        .wait_end()
        .await
        .unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 0 });
    assert!(ws.join("MARKER").exists());
    assert_eq!(log_lines(&log).len(), 2, "allowed jobs are not logged");
}

#[tokio::test]
async fn an_unwritable_security_log_warns_and_still_blocks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "").unwrap();
    let bad = dir.path().join("file/security.log");
    let t = manager_with(|mut c| {
        c.safety.security_log = Some(bad.clone());
        c
    });
    let err = t
        .manager
        .start(host(JobSpec::shell("sudo id")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Blocked { .. }), "{err}");
    assert!(!bad.exists());
    // And the manager keeps working.
    let info = t
        .manager
        .start(host(JobSpec::shell("true")))
        .await
        .unwrap()
        .wait_end()
        .await
        .unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 0 });
}

#[test]
fn the_cli_prints_the_json_and_exits_126() {
    let state = tempfile::tempdir().unwrap();
    let o = berth(state.path())
        .current_dir(state.path())
        .args(["run", "--", "sh", "-c", "touch MARKER; sudo id"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(126), "{stderr}");
    let line = stderr.lines().find(|l| l.starts_with("berth: {")).expect(&stderr);
    let json: serde_json::Value = serde_json::from_str(&line["berth: ".len()..]).unwrap();
    assert_eq!(json["blocked"], true);
    assert_eq!(json["command"], "sh -c 'touch MARKER; sudo id'");
    assert!(!state.path().join("MARKER").exists());
    let logs: Vec<_> = walk(state.path(), "security.log");
    assert_eq!(logs.len(), 1, "{logs:?}");
    let lines = log_lines(&logs[0]);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["client"], "cli");
}

#[test]
fn berth_toml_extends_the_blocklist() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("berth.toml");
    std::fs::write(
        &config,
        "[safety]\nblocked = [{ pattern = '^terraform\\s+destroy', reason = \"destroys infrastructure\" }]\n",
    )
    .unwrap();
    let o = berth(dir.path())
        .env("BERTH_CONFIG", &config)
        .args(["run", "--", "terraform", "destroy", "-auto-approve"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(126), "{stderr}");
    assert!(stderr.contains("destroys infrastructure"), "{stderr}");
}

/// Files named `name` under `dir`.
fn walk(dir: &Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            found.extend(walk(&p, name));
        } else if p.file_name().is_some_and(|n| n == name) {
            found.push(p);
        }
    }
    found
}

/// Raw HTTP over the daemon's socket: (status, body).
fn raw_post(socket: &Path, path: &str, body: &str) -> (u16, String) {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

#[tokio::test]
async fn the_api_answers_403_and_the_daemon_keeps_serving() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    let body = r#"{"shell":"touch MARKER; sudo id","runner":"host","background":true}"#;
    for _ in 0..3 {
        let (status, answer) = raw_post(&d.socket(), "/v1/jobs", body);
        assert_eq!(status, 403, "{answer}");
        assert!(answer.contains("\"blocked\""), "{answer}");
    }
    assert!(!ws.join("MARKER").exists());
    // Through the CLI, the daemon's refusal is the same JSON and exit code.
    let (code, _, err) = d.run(&["run", "-d", "--runner", "host", "--", "sudo", "id"]);
    assert_eq!(code, 126, "{err}");
    assert!(err.contains(r#""blocked":true"#), "{err}");
    // Still serving.
    let (status, answer) = raw_post(
        &d.socket(),
        "/v1/jobs",
        r#"{"shell":"touch OK","runner":"host","background":true}"#,
    );
    assert_eq!(status, 200, "{answer}");
    let log = d.config().instance_dir().join("security.log");
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 4, "{lines:?}");
    let clients: Vec<_> = lines.iter().map(|l| l["client"].as_str().unwrap_or("")).collect();
    // Raw requests are `api`; berth's own CLI through the daemon is `cli`.
    assert_eq!(clients, ["api", "api", "api", "cli"], "{lines:?}");
}

#[tokio::test]
async fn cwd_escapes_are_refused_and_paths_inside_accepted() {
    let t = manager();
    let ws = t.workspace();
    let outside = t.dir.path().join("outside");
    std::fs::create_dir_all(ws.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    symlink(ws.join("sub/deeper"), ws.join("in-link")).unwrap();
    symlink(&outside, ws.join("out-link")).unwrap();
    let real_ws = std::fs::canonicalize(&ws).unwrap();

    for cwd in [
        "..",
        "sub/../../outside",
        "out-link",
        outside.to_str().unwrap(),
        "/",
    ] {
        let mut spec = host(JobSpec::shell("touch ESCAPED"));
        spec.cwd = Some(cwd.into());
        let err = t.manager.start(spec).await.unwrap_err();
        let Error::OutsideWorkspace { path, root } = &err else {
            panic!("{cwd}: {err}");
        };
        assert_eq!(root, &real_ws);
        let msg = err.to_string();
        assert!(
            msg.contains(&*path.to_string_lossy()) && msg.contains(&*real_ws.to_string_lossy()),
            "{msg}"
        );
        assert_eq!((err.code(), err.exit_code()), ("outside_workspace", 2));
    }
    assert!(!outside.join("ESCAPED").exists());
    assert!(!t.dir.path().join("ESCAPED").exists());

    for (cwd, expect) in [
        ("sub", "sub"),
        ("in-link", "sub/deeper"),
        ("sub/deeper/..", "sub"),
    ] {
        let mut spec = host(JobSpec::shell("pwd -P"));
        spec.cwd = Some(cwd.into());
        let job = t.manager.start(spec).await.unwrap();
        assert_eq!(
            job.wait_end().await.unwrap().status,
            JobStatus::Exited { code: 0 }
        );
        let lines = job.logs(&Default::default()).unwrap().lines;
        assert_eq!(lines[0].text, real_ws.join(expect).to_string_lossy(), "{cwd}");
    }
    let log = t.manager.config().instance_dir().join("security.log");
    let kinds: Vec<_> = log_lines(&log).iter().map(|l| l["kind"].clone()).collect();
    assert_eq!(kinds, vec![serde_json::json!("outside_workspace"); 5]);
}
