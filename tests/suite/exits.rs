//! What the CLI's exit code and stdout promise to scripts and CI: a job still
//! running is never reported as a success, `--on-timeout kill` bounds a
//! foreground run through the daemon, and a closed stdout ends berth quietly.

use std::time::{Duration, Instant};

use crate::common::{Daemon, eventually, processes_with, unique_sleep};

#[tokio::test]
async fn on_timeout_kill_through_the_daemon_kills_the_group_and_exits_124_within_ten_seconds() {
    let d = Daemon::start();
    let token = unique_sleep();
    let started = Instant::now();
    let (code, _, err) = d.run(&[
        "run",
        "--runner",
        "host",
        "--timeout",
        "1",
        "--on-timeout",
        "kill",
        "--",
        "sh",
        "-c",
        &format!("sleep {token} & sleep {token}"),
    ]);
    assert_eq!(code, 124, "{err}");
    // The feature's bound: the 1 s timeout, not the sleep's ~15 minutes (with
    // room for a loaded machine, as in the in-process twin in cli.rs).
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        d.json(&["ps"]).as_array().unwrap().is_empty(),
        "nothing left running"
    );
    eventually(Duration::from_secs(5), "the group is gone", || {
        processes_with(&format!("sleep {token}")).is_empty()
    })
    .await;
    // The environment variable does the same, for CI steps that set it once.
    let out = d
        .cli()
        .env("BERTH_ON_TIMEOUT", "kill")
        .args(["run", "--runner", "host", "--timeout", "1", "--", "sleep", "30"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(124));
}

#[tokio::test]
async fn a_closed_stdout_ends_the_cli_quietly() {
    let d = Daemon::start();
    let (code, id, err) = d.run(&["run", "-d", "-q", "--runner", "host", "--", "seq", "1", "50000"]);
    assert_eq!(code, 0, "{err}");
    let id = id.trim().to_string();
    assert!(
        id.starts_with("job-") && !id.contains('\n'),
        "-q prints only the id: {id:?}"
    );
    eventually(Duration::from_secs(10), "job ended", || {
        d.json(&["status", &id])["status"]["state"] == "exited"
    })
    .await;
    for args in [
        vec!["logs", id.as_str()],
        vec!["ps", "--all"],
        vec!["run", "--runner", "host", "--", "seq", "1", "10000000"],
    ] {
        // `berth … | head -1`: read one line, then close the pipe.
        let mut child = d
            .cli()
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
        assert!(!first.is_empty(), "{args:?}: no first line");
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        assert!(
            matches!(code, Some(0) | Some(141)),
            "{args:?}: exit {code:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // The foreground job whose reader went away was stopped, not left running.
    eventually(Duration::from_secs(20), "the piped run's job stopped", || {
        d.json(&["ps"]).as_array().is_some_and(|a| a.is_empty())
    })
    .await;
}
