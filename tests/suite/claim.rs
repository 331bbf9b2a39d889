//! One manager per instance, whoever runs it: a `--no-daemon` run beside a
//! daemon goes through the daemon (one cap, one event log), and a second
//! in-process run while another holds the instance is refused before it
//! starts anything. Before, both opened the same store: the cap was
//! bypassed and the second manager's events were silently dropped (their
//! seq numbers collided).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use crate::common::{Daemon, berth, eventually, processes_with, unique_sleep};

#[test]
fn a_no_daemon_run_beside_a_daemon_goes_through_it() {
    let d = Daemon::start();
    let (code, out, err) = d.run(&["run", "--no-daemon", "--", "echo", "through-the-daemon"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("through-the-daemon"), "{out}");
    assert!(err.contains("goes through it"), "says why: {err}");
    // The daemon recorded it, and its event log has the run's end.
    let jobs = d.json(&["ps", "--all"]);
    let listed = jobs.as_array().expect("a list");
    assert!(
        listed.iter().any(|j| j["command"]
            .as_str()
            .is_some_and(|c| c.contains("through-the-daemon"))),
        "{jobs}"
    );
    let (code, events, err) = d.run(&["events"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        events.contains("job-1 ended") && events.contains("status=success"),
        "{events}"
    );
}

/// A `berth run` stopped as Ctrl+C would (SIGTERM: it stops its job), also
/// when the test fails half-way.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_second_in_process_run_on_a_held_instance_is_refused_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let token = unique_sleep();
    // The first run holds the instance (no daemon: it runs in-process).
    let mut first = berth(dir.path());
    let instance = first
        .get_envs()
        .find(|(k, _)| *k == "BERTH_INSTANCE")
        .and_then(|(_, v)| v)
        .unwrap()
        .to_owned();
    let mut first = Stopped(
        first
            .args([
                "run",
                "--no-daemon",
                "--",
                "sh",
                "-c",
                &format!("echo holding; exec sleep {token}"),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(first.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "holding");

    let marker = dir.path().join("second-ran");
    let second = berth(dir.path())
        .env("BERTH_INSTANCE", &instance)
        .args(["run", "--no-daemon", "--", "touch", marker.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_ne!(second.status.code(), Some(0), "{err}");
    assert!(err.contains("is in use by another berth process"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(!marker.exists(), "the refused run started nothing");

    drop(first);
    eventually(
        Duration::from_secs(10),
        "the first run's job ends with it",
        || processes_with(&token).is_empty(),
    )
    .await;
    // Once it ended, the instance is free again.
    let third = berth(dir.path())
        .env("BERTH_INSTANCE", &instance)
        .args(["run", "--no-daemon", "--", "touch", marker.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        third.status.success(),
        "{}",
        String::from_utf8_lossy(&third.stderr)
    );
    assert!(marker.exists());
}

/// A daemon that holds the instance but does not answer (starting,
/// stopping, stuck): a `--no-daemon` run says so, one thing, and what to do
/// (not that another in-process run holds it).
#[test]
fn a_no_daemon_run_beside_a_daemon_that_does_not_answer_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = berth(dir.path());
    let instance = cmd
        .get_envs()
        .find(|(k, _)| *k == "BERTH_INSTANCE")
        .and_then(|(_, v)| v)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // The claim as a serving daemon holds it: the lock, with its pid, and
    // the pid file; no socket answers.
    let instance_dir = berth::Config::isolated(dir.path().to_path_buf(), &instance).instance_dir();
    std::fs::create_dir_all(&instance_dir).unwrap();
    let lock = std::fs::File::create(instance_dir.join("daemon.lock")).unwrap();
    lock.lock().unwrap();
    std::fs::write(instance_dir.join("daemon.lock"), std::process::id().to_string()).unwrap();
    std::fs::write(instance_dir.join("daemon.pid"), std::process::id().to_string()).unwrap();
    let o = cmd
        .args(["run", "--no-daemon", "--", "echo", "never"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("never"));
    assert!(
        err.contains("does not answer") && err.contains("berth down"),
        "{err}"
    );
    assert!(!err.contains("without a daemon"), "{err}");
}
