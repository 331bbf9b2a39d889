//! Host jobs cannot escape: processes that leave the job's process group
//! (`setsid`, double forks) die when the job ends, is killed, times out or
//! loses its manager; `--timeout` is a bound whatever they do with the pipes;
//! and no descriptor outlives a job.

use std::time::{Duration, Instant};

use berth::{JobSpec, RunnerChoice};

use crate::common::{Daemon, berth, eventually, manager, processes_with};

/// A sleep duration no other test uses, to find this test's processes.
fn token(n: u32) -> String {
    format!("{n}.{}", std::process::id())
}

/// Kill whatever a failed assertion left behind, so one failure does not leak.
struct Sweep(String);
impl Drop for Sweep {
    fn drop(&mut self) {
        for pid in processes_with(&self.0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

#[tokio::test]
async fn an_escapee_dies_when_its_job_ends() {
    let t = token(3011);
    let _sweep = Sweep(t.clone());
    let state = tempfile::tempdir().unwrap();
    let out = berth(state.path())
        .args(["run", "--no-daemon", "--shell", "--"])
        .arg(format!("setsid -f sleep {t}; echo escaped"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "escaped");
    // The shim reaps the whole tree before the job counts as ended.
    assert_eq!(
        processes_with(&t),
        Vec::<u32>::new(),
        "the setsid escapee outlived its job"
    );
}

#[tokio::test]
async fn an_escapee_dies_of_the_sigterm_when_its_job_is_killed() {
    let t = token(3012);
    let _sweep = Sweep(t.clone());
    let d = Daemon::start();
    // The escapee leaves a mark when SIGTERM reaches it: a SIGKILL at the
    // end of the grace would run no trap.
    let termed = d.dir.path().join("escapee-termed");
    let v = d.json(&[
        "run",
        "-d",
        "--shell",
        "--",
        &format!(
            "setsid -f sh -c 'trap \"touch {}; exit 0\" TERM; sleep {t} & wait'; exec sleep {t}",
            termed.display()
        ),
    ]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(10), "both sleeps", || {
        processes_with(&t).len() == 2
    })
    .await;
    let (code, _, err) = d.run(&["kill", &id]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        processes_with(&t),
        Vec::<u32>::new(),
        "the setsid escapee outlived the kill"
    );
    // SIGTERM reached the escapee and the job: neither waited for the
    // grace's SIGKILL.
    assert!(termed.exists(), "the escapee was not sent SIGTERM");
    let status = d.json(&["status", &id]);
    assert_eq!(status["exit_code"], 143, "{status}");
}

#[tokio::test]
async fn an_escapee_that_ignores_sigterm_dies_when_the_job_is_killed() {
    let t = token(3013);
    let _sweep = Sweep(t.clone());
    let d = Daemon::start_with(&[("BERTH_GRACE", "1")]);
    let v = d.json(&[
        "run",
        "-d",
        "--shell",
        "--",
        &format!("setsid -f sh -c 'trap \"\" TERM; sleep {t}'; trap '' TERM; sleep {t}"),
    ]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(10), "both sleeps", || {
        processes_with(&t).len() == 2
    })
    .await;
    let (code, _, err) = d.run(&["kill", &id]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        processes_with(&t),
        Vec::<u32>::new(),
        "a TERM-proof escapee outlived the kill"
    );
}

#[tokio::test]
async fn an_escapee_dies_when_the_manager_is_sigkilled() {
    let t = token(3014);
    let _sweep = Sweep(t.clone());
    let mut d = Daemon::start();
    d.json(&[
        "run",
        "-d",
        "--shell",
        "--",
        &format!("setsid -f sleep {t}; sh -c 'sleep {t} & sleep {t}' & exec sleep {t}"),
    ]);
    eventually(Duration::from_secs(10), "all four sleeps", || {
        processes_with(&t).len() == 4
    })
    .await;
    d.child.kill().unwrap(); // SIGKILL: no teardown runs in the daemon
    d.child.wait().unwrap();
    eventually(
        Duration::from_secs(5),
        "the watchdog kills the whole tree",
        || processes_with(&t).is_empty(),
    )
    .await;
}

#[tokio::test]
async fn timeout_is_a_bound_even_when_an_escapee_holds_stdout() {
    let grace = 2.0;
    let bound = Duration::from_secs_f64(1.0 + grace + 1.0);
    let state = tempfile::tempdir().unwrap();
    for round in 0..10 {
        let t = token(3015 + round);
        let _sweep = Sweep(t.clone());
        let started = Instant::now();
        let out = berth(state.path())
            .env("BERTH_GRACE", grace.to_string())
            .args(["run", "--no-daemon", "--timeout", "1", "--", "sh", "-c"])
            .arg(format!("setsid sleep {t} & wait"))
            .output()
            .unwrap();
        let took = started.elapsed();
        assert!(took < bound, "round {round}: took {took:?}, bound {bound:?}");
        assert_eq!(
            out.status.code(),
            Some(124),
            "round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            processes_with(&t),
            Vec::<u32>::new(),
            "round {round}: escapee left"
        );
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[tokio::test]
async fn no_descriptor_outlives_a_job_whose_escapee_holds_the_pipes() {
    let t = token(3030);
    let _sweep = Sweep(t.clone());
    let m = manager();
    // Warm up once so lazily opened files (store, logs) are not counted.
    let warm = m
        .manager
        .start(JobSpec::shell("true").with_runner(RunnerChoice::Host))
        .await
        .unwrap();
    warm.wait_end().await.unwrap();
    let before = open_fds();
    for _ in 0..3 {
        let job = m
            .manager
            .start(JobSpec::shell(format!("setsid -f sleep {t}; echo x")).with_runner(RunnerChoice::Host))
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), job.wait_end())
            .await
            .expect("the job ends although the escapee held its pipes")
            .unwrap();
    }
    eventually(Duration::from_secs(2), "descriptors closed", || {
        open_fds() <= before
    })
    .await;
    assert!(processes_with(&t).is_empty());
}

#[tokio::test]
async fn a_command_that_cannot_start_says_why_like_a_shell() {
    let state = tempfile::tempdir().unwrap();
    let out = berth(state.path())
        .args(["run", "--no-daemon", "--", "no-such-command-3031"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("command not found"));
    let script = state.path().join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap(); // mode 0644: not executable
    let out = berth(state.path())
        .args(["run", "--no-daemon", "--"])
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not an executable file"), "{err}");
}

#[tokio::test]
async fn a_queued_job_runs_in_the_directory_checked_not_a_swapped_symlink() {
    let t = crate::common::manager_with(|c| c.with_max_jobs(1));
    let ws = t.workspace();
    std::fs::create_dir_all(ws.join("inside")).unwrap();
    let outside = t.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(ws.join("inside"), ws.join("link")).unwrap();
    let host = |s: JobSpec| s.with_runner(RunnerChoice::Host).background();
    let blocker = t
        .manager
        .start(host(JobSpec::argv(["sleep", "3032"])))
        .await
        .unwrap();
    let mut spec = host(JobSpec::shell("pwd")).with_queue();
    spec.cwd = Some("link".into());
    let queued = t.manager.start(spec).await.unwrap();
    // Checked while queued; now point the link outside the workspace.
    std::fs::remove_file(ws.join("link")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
    blocker.kill().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), queued.wait_end())
        .await
        .unwrap()
        .unwrap();
    let real_inside = std::fs::canonicalize(ws.join("inside")).unwrap();
    assert_eq!(
        queued.output_lines().unwrap(),
        vec![real_inside.display().to_string()]
    );
}

#[tokio::test]
async fn a_host_job_starts_with_no_signal_blocked() {
    let state = tempfile::tempdir().unwrap();
    let out = berth(state.path())
        .args(["run", "--no-daemon", "--", "grep", "^SigBlk", "/proc/self/status"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "SigBlk:\t0000000000000000"
    );
}

/// An embedder's binary that is not `berth` (and has no `berth` beside it)
/// runs host jobs as a plain process group, without the shim: they must still
/// run, report their output and exit code, and end. (The end of such a job
/// once panicked its supervisor, leaving the job `running` forever.)
#[test]
fn without_a_shim_binary_host_jobs_still_end_with_their_output() {
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = dir.path().join("a").join("b");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let embedder = bin_dir.join("embedder");
    std::fs::copy(env!("CARGO_BIN_EXE_berth"), &embedder).unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let mut cmd = std::process::Command::new(&embedder);
    cmd.envs(berth(&state).get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env_remove("BERTH_SHIM_EXE")
        .args([
            "run",
            "--no-daemon",
            "--timeout",
            "20",
            "--",
            "sh",
            "-c",
            "echo from-plain-group; exit 3",
        ]);
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its own output is a few bytes: the pipes cannot fill while we wait.
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the run did not end within 30 s; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("from-plain-group"),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(out.status.code(), Some(3), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}
