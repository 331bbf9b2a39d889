//! berth embedded in another program (`examples/embed.rs`): the program's
//! own executable serves the host-job shim and the crash watchdog
//! (`berth::embed`), so its host jobs cannot escape, a SIGKILL of the
//! program leaves none of their processes behind, and a clean end lets the
//! watchdog stand down. Cargo builds the example as the binary
//! `berth-embed-example` for the suite.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::common::{self, eventually, processes_with, unique_sleep};

/// The embedding program (examples/embed.rs, built as a binary).
fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_berth-embed-example"))
}

/// The embedding program, started on `state` with a job that leaves a
/// `setsid` process behind, and what its first line said: (job leader, watchdog).
struct Program {
    child: Child,
    out: BufReader<ChildStdout>,
    leader: u32,
    watchdog: u32,
    token: String,
}

fn start(state: &std::path::Path) -> Program {
    let token = unique_sleep();
    let command = format!("setsid sleep {token} & echo up; exec sleep {token}");
    let mut child = Command::new(example())
        .arg(state)
        .arg(&command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the embedding program");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).expect("its first line");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert!(
        matches!(words.as_slice(), ["started", _, _, "watchdog", _]),
        "{line:?}"
    );
    let leader = words[2].parse().expect("leader pid");
    let watchdog = words[4].parse().expect("watchdog pid");
    Program {
        child,
        out,
        leader,
        watchdog,
        token,
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s.rsplit(')').next().and_then(|r| r.split_whitespace().next());
        state != Some("Z")
    })
}

#[tokio::test]
async fn a_killed_embedding_program_leaves_no_job_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = start(dir.path());
    // The job is led by berth's shim, run from the program's own executable.
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", p.leader)).unwrap();
    assert_eq!(comm.trim(), "berth-shim", "the host job's leader");
    let exe = std::fs::read_link(format!("/proc/{}/exe", p.leader)).unwrap();
    assert_eq!(
        exe,
        example(),
        "the shim is the embedding program's own executable"
    );
    eventually(
        Duration::from_secs(10),
        "the job and the process it left with setsid",
        || processes_with(&p.token).len() == 2,
    )
    .await;

    p.child.kill().unwrap();
    p.child.wait().unwrap();
    eventually(
        Duration::from_secs(20),
        "the watchdog ends the dead program's job tree",
        || processes_with(&p.token).is_empty(),
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "the watchdog exits after its sweeps",
        || !alive(p.watchdog),
    )
    .await;
    let log = std::fs::read_to_string(dir.path().join("embed/watchdog.log")).unwrap_or_default();
    assert!(log.contains("died"), "watchdog.log: {log}");
}

#[tokio::test]
async fn a_cleanly_ended_embedding_program_stops_its_jobs_and_its_watchdog_stands_down() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = start(dir.path());
    drop(p.child.stdin.take());
    let mut line = String::new();
    p.out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "clean end");
    assert!(p.child.wait().unwrap().success());
    assert!(
        processes_with(&p.token).is_empty(),
        "shutdown stopped the job's whole tree"
    );
    eventually(Duration::from_secs(10), "the watchdog stands down", || {
        !alive(p.watchdog)
    })
    .await;
    let log = std::fs::read_to_string(dir.path().join("embed/watchdog.log")).unwrap_or_default();
    assert!(!log.contains("died"), "a clean end is not a crash: {log}");
}

#[test]
fn a_guard_without_the_helpers_is_refused_with_what_to_do() {
    // This test binary never called `berth::embed::helpers()`: re-running it
    // as a watchdog would run the test suite again.
    let t = common::manager();
    let err = berth::embed::guard(&t.manager).err().expect("refused");
    assert!(err.to_string().contains("berth::embed::helpers()"), "{err}");
    assert!(!t.manager.config().instance_dir().join("daemon.pid").exists());
}
