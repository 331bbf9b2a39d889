//! Logging can never take the manager down: a daemon whose stderr cannot be
//! written (a full disk) keeps serving, with its log at its busiest.

use std::process::Stdio;

use crate::common::Daemon;

/// `BERTH_LOG=debug berth daemon 2>/dev/full` used to exit 101 on its first
/// log line (a failed write panicked in the log writer); now it serves jobs,
/// answers, and stops cleanly.
#[test]
fn a_daemon_with_stderr_on_dev_full_keeps_serving() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let mut d = Daemon::start_in(
        tempfile::tempdir().unwrap(),
        &[("BERTH_LOG", "debug")],
        Stdio::from(full),
    );
    for i in 0..5 {
        let (code, out, err) = d.run(&[
            "run",
            "--",
            "sh",
            "-c",
            &format!("echo line {i}; echo err {i} >&2"),
        ]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, format!("line {i}\n"));
    }
    let v = d.json(&["run", "-d", "--", "sh", "-c", "seq 1 20000"]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while d.json(&["status", &id])["status"]["state"] != "exited" {
        assert!(std::time::Instant::now() < deadline, "the job did not end");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let logs = d.json(&["logs", &id, "--since", "1"]);
    assert_eq!(logs["lines"].as_array().unwrap().len(), 20000);
    assert!(d.answers());
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    let status = d
        .wait_exit(std::time::Duration::from_secs(10))
        .expect("the daemon exits after down");
    assert!(status.success(), "{status:?}");
}
