//! `berth exec JOB -- CMD`: a command inside a running container job, through
//! the daemon, on the real engine. Its output and exit code come back, it
//! runs with the job's directory, user and hardening, it is no job of its
//! own, a blocked command is refused and logged, `--timeout` kills it, and
//! a job it cannot run in (ended, on the host, unknown) is refused in one
//! line that says what to do.

use std::time::{Duration, Instant};

use crate::common::{Daemon, SANDBOX, processes_with, unique_sleep};

/// Start a background container job sleeping `token` seconds; its id once it runs.
fn running_container_job(d: &Daemon, token: &str) -> String {
    let v = d.json(&[
        "run", "-d", "--runner", "docker", "--image", SANDBOX, "--", "sleep", token,
    ]);
    let id = v["job"]["id"].as_str().expect("job id").to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = d.json(&["status", &id]);
        if s["job"]["status"]["state"] == "running" || s["status"]["state"] == "running" {
            return id;
        }
        assert!(Instant::now() < deadline, "{id} never ran: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How many jobs the instance knows, running or not.
fn job_count(d: &Daemon) -> usize {
    d.json(&["ps", "--all"]).as_array().map_or(0, Vec::len)
}

#[test]
fn exec_runs_with_the_jobs_settings_and_exit_code_and_its_timeout_ends_it_within_20_seconds() {
    let d = Daemon::start();
    let token = unique_sleep();
    let id = running_container_job(&d, &token);
    let ws = std::fs::canonicalize(d.dir.path().join("ws")).unwrap();
    let jobs = job_count(&d);

    // Output on both streams, the job's directory and HOME, no capabilities,
    // and the command's exit code as berth's.
    let script = "echo out; echo err >&2; pwd; echo $HOME; grep CapEff /proc/self/status; exit 7";
    let (code, out, err) = d.run(&["exec", &id, "--", "sh", "-c", script]);
    assert_eq!(code, 7, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..3], ["out", ws.to_str().unwrap(), "/home/berth"], "{out}");
    assert!(lines[3].ends_with("0000000000000000"), "{out}");
    assert_eq!(err.trim(), "err");
    // Its user is the job's, as the record says (never root unless asked).
    let status = d.json(&["status", &id]);
    let user = status["info"]["limits"]["user"]
        .as_str()
        .or(status["limits"]["user"].as_str());
    let uid = user
        .and_then(|u| u.split(':').next())
        .unwrap_or_else(|| panic!("{status}"));
    let (code, out, _) = d.run(&["exec", &id, "--", "id", "-u"]);
    assert_eq!((code, out.trim()), (0, uid));
    // A file it writes in the workspace is the host's.
    let (code, _, err) = d.run(&["exec", &id, "--", "touch", "from-exec"]);
    assert_eq!(code, 0, "{err}");
    assert!(ws.join("from-exec").exists());

    // A blocked command is refused in one line, logged, and never runs.
    let blocked = ["exec", &id, "--", "sh", "-c", "touch MARKER; sudo id"];
    let (code, out, err) = d.run(&blocked);
    assert_eq!(code, 126, "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("\"blocked\":true"), "{err}");
    assert!(!ws.join("MARKER").exists());
    let log = std::fs::read_to_string(d.config().instance_dir().join("security.log")).unwrap();
    assert!(log.contains("sudo id"), "{log}");

    // --timeout kills the command and what it started. The bound is the
    // feature: the 1 s timeout, not the sleep's ~15 minutes (with room for a
    // loaded machine).
    let inner = unique_sleep();
    let started = Instant::now();
    let (code, _, err) = d.run(&[
        "exec",
        "--timeout",
        "1",
        &id,
        "--",
        "sh",
        "-c",
        &format!("sleep {inner}; echo never"),
    ]);
    assert_eq!(code, 124, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_with(&inner).is_empty() {
        assert!(Instant::now() < deadline, "the timed-out exec's sleep still runs");
        std::thread::sleep(Duration::from_millis(50));
    }

    // None of this made a job, and the job still runs.
    assert_eq!(job_count(&d), jobs);
    assert!(!processes_with(&token).is_empty(), "the job itself was killed");
    let (code, _, err) = d.run(&["kill", &id]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn exec_is_refused_for_ended_host_and_unknown_jobs_in_one_line() {
    let d = Daemon::start();
    // An ended container job: its container is gone.
    let (code, _, err) = d.run(&["run", "--runner", "docker", "--image", SANDBOX, "--", "true"]);
    assert_eq!(code, 0, "{err}");
    let ended = d.json(&["ps", "--all"])[0]["id"].as_str().unwrap().to_string();
    let (code, out, err) = d.run(&["exec", &ended, "--", "true"]);
    assert_ne!(code, 0, "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("has ended") && err.contains("berth resume"), "{err}");

    // A host job (the tests' default runner): nothing to exec into.
    let v = d.json(&["run", "-d", "--", "sleep", &unique_sleep()]);
    let host = v["job"]["id"].as_str().unwrap().to_string();
    let (code, out, err) = d.run(&["exec", &host, "--", "true"]);
    assert_ne!(code, 0, "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("runs on the host") && err.contains("run the command yourself"),
        "{err}"
    );

    // An unknown id.
    let (code, _, err) = d.run(&["exec", "job-999", "--", "true"]);
    assert_ne!(code, 0);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown job"), "{err}");
    // None of these refusals made a job.
    assert_eq!(d.json(&["ps", "--all"]).as_array().unwrap().len(), 2);
    let _ = d.run(&["kill", &host]);

    // Without a daemon, the store says the job ended.
    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = d.run(&["exec", &ended, "--", "true"]);
    assert_ne!(code, 0);
    assert!(err.contains("has ended"), "{err}");
}
