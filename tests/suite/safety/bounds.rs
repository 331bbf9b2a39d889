//! The filter's bounds seen from outside: a 300 KB pathological command sent
//! to a running daemon is refused at once (`too long to check`) without the
//! daemon growing, and a host job whose environment would change what runs
//! (`LD_PRELOAD`) is refused like a blocked command by the library, the CLI,
//! the daemon API and MCP, while a container job may set it.

use std::time::{Duration, Instant};

use berth::{Error, JobSpec, JobStatus, RunnerChoice};
use serde_json::json;

use super::{log_lines, raw_post};
use crate::common::{Daemon, berth, manager};

/// Resident set size of `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kb * 1024
}

#[test]
fn a_300_kb_pathological_command_is_refused_unread_without_the_daemon_growing() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    let command = format!("touch MARKER; {}", "f(){ ".repeat(300_000 / 5));
    let body = json!({"shell": command, "runner": "host", "background": true}).to_string();
    // One refusal first: the daemon's one-time costs (thread pools, buffers)
    // are not growth per command.
    let (status, _) = raw_post(&d.socket(), "/v1/jobs", &body);
    assert_eq!(status, 403);
    let before = rss(d.pid());
    for _ in 0..5 {
        let (status, answer) = raw_post(&d.socket(), "/v1/jobs", &body);
        assert_eq!(status, 403, "{answer}");
        let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
        let text = v.to_string();
        // Refused for its size, which names it; one the filter read would
        // be refused for its spent budget instead.
        assert!(
            text.contains("\"blocked\"")
                && text.contains(&format!(
                    "too long to check: the command is {} bytes,",
                    command.len()
                )),
            "{text}"
        );
        assert!(
            answer.len() < 16 << 10,
            "the refusal does not echo 300 KB: {}",
            answer.len()
        );
    }
    let growth = rss(d.pid()).saturating_sub(before);
    eprintln!(
        "daemon RSS {} KiB before, grew by {} KiB",
        before >> 10,
        growth >> 10
    );
    assert!(growth < 20 << 20, "RSS grew by {} KiB", growth >> 10);
    assert!(!ws.join("MARKER").exists());
    // Still serving, and the log holds a bounded line per refusal.
    let (status, answer) = raw_post(
        &d.socket(),
        "/v1/jobs",
        r#"{"shell":"true","runner":"host","background":true}"#,
    );
    assert_eq!(status, 200, "{answer}");
    let lines = log_lines(&d.config().instance_dir().join("security.log"));
    assert_eq!(lines.len(), 6);
    assert!(
        lines.iter().all(|l| l["pattern"] == "too long to check"),
        "{lines:?}"
    );
}

/// The bound is the feature: the filter's CPU deadline (100 ms) bounds the
/// analysis of a command just under the cap, so it is decided (refused as
/// dynamic, or as too long when the deadline ends it first: which depends
/// on the machine's speed) well before the daemon's 5 s wait for an answer
/// would end it; 2 s leaves room for a loaded machine's scheduling.
#[test]
fn a_pathological_command_under_the_cap_is_decided_within_the_deadline() {
    let d = Daemon::start();
    // Just under 64 KiB: read, not refused for its size.
    let command = "$(".repeat(32_000);
    let body = json!({"shell": command, "runner": "host", "background": true}).to_string();
    let started = Instant::now();
    let (status, answer) = raw_post(&d.socket(), "/v1/jobs", &body);
    let took = started.elapsed();
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("\"blocked\""), "{answer}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[tokio::test]
async fn ld_preload_is_refused_for_a_host_job_by_the_library() {
    let t = manager();
    let ws = t.workspace();
    let mut spec = JobSpec::shell("touch MARKER").with_runner(RunnerChoice::Host);
    spec.env.insert("LD_PRELOAD".into(), "/tmp/evil.so".into());
    let err = t.manager.start(spec).await.unwrap_err();
    assert!(matches!(err, Error::Blocked { .. }), "{err}");
    assert_eq!((err.code(), err.exit_code()), ("blocked", 126));
    let json: serde_json::Value = serde_json::from_str(&err.to_string()).unwrap();
    assert_eq!(json["blocked"], true);
    assert_eq!(json["pattern"], "env:LD_PRELOAD");
    assert!(!ws.join("MARKER").exists());
    let log = t.manager.config().instance_dir().join("security.log");
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 1);
    assert!(!lines[0].to_string().contains("evil.so"), "values are not logged");
    // A PATH that puts the workspace first is refused too.
    let mut spec = JobSpec::shell("ls").with_runner(RunnerChoice::Host);
    spec.env
        .insert("PATH".into(), format!("{}:/usr/bin:/bin", ws.display()));
    let err = t.manager.start(spec).await.unwrap_err();
    assert!(err.to_string().contains("env:PATH"), "{err}");
    // An ordinary environment runs.
    let mut spec = JobSpec::shell("test \"$GREETING\" = hi").with_runner(RunnerChoice::Host);
    spec.env.insert("GREETING".into(), "hi".into());
    let job = t.manager.start(spec).await.unwrap();
    let info = job.wait_end().await.unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 0 });
}

#[tokio::test]
async fn a_container_job_may_set_ld_preload() {
    let t = manager();
    let mut spec = JobSpec::shell("test \"$LD_LIBRARY_PATH\" = /opt/lib")
        .with_runner(RunnerChoice::Docker)
        .with_image("berth/sandbox:latest");
    spec.env.insert("LD_LIBRARY_PATH".into(), "/opt/lib".into());
    let job = t
        .manager
        .start(spec)
        .await
        .expect("a container job is not restricted");
    let info = tokio::time::timeout(Duration::from_secs(60), job.wait_end())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 0 });
}

#[test]
fn the_cli_and_the_daemon_refuse_ld_preload_with_126_and_blocked() {
    let state = tempfile::tempdir().unwrap();
    let o = berth(state.path())
        .current_dir(state.path())
        .args([
            "run",
            "--runner",
            "host",
            "-e",
            "LD_PRELOAD=/tmp/evil.so",
            "--",
            "touch",
            "MARKER",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(126), "{stderr}");
    assert!(
        stderr.contains(r#""blocked":true"#) && stderr.contains("LD_PRELOAD"),
        "{stderr}"
    );
    assert!(!state.path().join("MARKER").exists());

    let d = Daemon::start();
    let (code, _, err) = d.run(&["run", "-e", "LD_PRELOAD=/tmp/evil.so", "--", "true"]);
    assert_eq!(code, 126, "{err}");
    assert!(err.contains(r#""blocked":true"#), "{err}");
    let (status, answer) = raw_post(
        &d.socket(),
        "/v1/jobs",
        r#"{"shell":"true","runner":"host","env":{"BASH_ENV":"/tmp/x"}}"#,
    );
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("env:BASH_ENV"), "{answer}");
}
