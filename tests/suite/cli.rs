//! `berth run` in the foreground without a daemon, driven as a user would.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{berth, my_zombies, processes_with, unique_sleep};

fn out(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn shows_both_streams_and_exits_with_the_job_code() {
    let dir = tempfile::tempdir().unwrap();
    let o = berth(dir.path())
        .args(["run", "--", "sh", "-c", "echo out; echo err >&2; exit 3"])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(stdout, "out\n");
    assert_eq!(stderr, "err\n");
}

#[test]
fn a_one_second_timeout_kills_the_whole_group_and_exits_124_within_ten_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let token = unique_sleep();
    let started = Instant::now();
    let o = berth(dir.path())
        // In-process: a budget kills (a daemon's would promote).
        .args(["run", "--no-daemon", "--timeout", "1", "--", "sh", "-c"])
        .arg(format!("echo start; sleep {token} & sleep {token}"))
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(124), "stderr: {stderr}");
    // The feature's bound: the 1 s timeout, not the sleep's ~15 minutes
    // (with room for a loaded machine: it failed at 2 s beside the suite).
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    assert_eq!(stdout, "start\n");
    assert!(stderr.contains("timed out"), "{stderr}");
    assert_eq!(
        processes_with(&token),
        Vec::<u32>::new(),
        "sleep {token} left behind"
    );
    assert_eq!(my_zombies(), Vec::<u32>::new());
}

/// The bound is the feature: input is held open for the 1 s period, then
/// closed, so `cat` ends (within 3 s: room for a loaded machine).
#[test]
fn keep_alive_feeds_input_and_returns_between_one_and_three_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let o = berth(dir.path())
        .args(["run", "--keep-alive", "1", "--input", "hi", "--", "cat"])
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(out(&o).0, "hi\n");
    assert!(
        elapsed >= Duration::from_millis(950) && elapsed < Duration::from_secs(3),
        "took {elapsed:?}"
    );
}

#[test]
fn last_line_without_newline_is_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let o = berth(dir.path())
        .args(["run", "--", "printf", r"a\nb\nc"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(out(&o).0, "a\nb\nc\n");
}

#[test]
fn a_timed_out_json_answer_has_no_exit_code_and_says_timed_out() {
    let dir = tempfile::tempdir().unwrap();
    let o = berth(dir.path())
        .args([
            "run",
            "--no-daemon",
            "--json",
            "--timeout",
            "1",
            "--",
            "sh",
            "-c",
            "echo partial; sleep 30",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(124));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["exit_code"], serde_json::Value::Null, "{v}");
    assert_eq!(v["timed_out"], true);
    assert_eq!(v["stdout"], "partial", "partial output is kept");
}

#[test]
fn json_answer_caps_output_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let o = berth(dir.path())
        .args([
            "run",
            "--json",
            "--",
            "sh",
            "-c",
            "seq 1 20000; echo oops >&2; exit 4",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["exit_code"], 4);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["truncated"], true);
    assert_eq!(v["stderr"], "oops");
    let stdout = v["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("1\n2\n"), "{}", &stdout[..20]);
    assert!(stdout.ends_with("19999\n20000"));
    assert!(stdout.len() < 17 * 1024);
    assert!(v["job_id"].as_str().unwrap().starts_with("job-"));
}

#[test]
fn bad_input_gets_one_clear_line_and_the_right_code() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], i32, &str)] = &[
        (&["run", "--watch", "(oops", "--", "true"], 2, "(oops"),
        (&["run", "--", "no-such-binary-xyz"], 127, "no-such-binary-xyz"),
        (&["run", "-p", "http", "--", "true"], 2, "invalid port `http`"),
        (&["run", "-p", "70000", "--", "true"], 2, "70000"),
        (
            &["run", "--memory", "lots", "--", "true"],
            2,
            "invalid size `lots`",
        ),
        (
            &["run", "--cwd", "/definitely/not/here", "--", "true"],
            2,
            "/definitely/not/here",
        ),
        (&["run", "--runner", "vm", "--", "true"], 2, "invalid runner `vm`"),
        (&["run", "--image", "", "--", "true"], 2, "is empty"),
        // Checked by the manager that would run it; with -d and no daemon
        // (no manager at all) still named as bad input, not a missing daemon.
        (&["run", "--timeout=0", "--", "true"], 2, "timeout"),
        (&["run", "-d", "--timeout=0", "--", "true"], 2, "timeout"),
        (&["run", "-d", "--watch", "(oops", "--", "true"], 2, "(oops"),
        // An HTTP check with no port to aim at: refused at the door, as MCP
        // refuses it (one check at admission for every face).
        (
            &["run", "--ready-http", "/", "--", "true"],
            2,
            "HTTP readiness check needs a port",
        ),
        (
            &["run", "-d", "--ready-http", "/", "--", "sleep", "5"],
            2,
            "HTTP readiness check needs a port",
        ),
    ];
    for (args, code, needle) in cases {
        let o = berth(dir.path()).args(*args).output().unwrap();
        let (_, stderr) = out(&o);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(stderr.starts_with("berth: "), "{args:?}: {stderr}");
    }
}

#[test]
fn config_says_where_values_come_from() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("berth.toml"), "max_jobs = 7\n").unwrap();
    let o = berth(dir.path())
        .current_dir(dir.path())
        .env("BERTH_GRACE", "1.5")
        .args(["config"])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    let line = |k: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line("max_jobs").contains("7"), "{stdout}");
    assert!(line("max_jobs").contains("berth.toml"), "{stdout}");
    assert!(line("grace").contains("env BERTH_GRACE"), "{stdout}");
    assert!(line("ring_size").contains("(default)"), "{stdout}");
}

/// `berth config --json` names the socket the daemon listens on, wherever
/// XDG_RUNTIME_DIR puts it (API.md's curl recipe reads it from there).
#[test]
fn config_json_names_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let socket = |xdg: Option<&Path>| {
        let mut cmd = berth(dir.path());
        cmd.env_remove("BERTH_SOCKET").env("BERTH_INSTANCE", "sockcheck");
        match xdg {
            Some(x) => cmd.env("XDG_RUNTIME_DIR", x),
            None => cmd.env_remove("XDG_RUNTIME_DIR"),
        };
        let o = cmd.args(["config", "--json"]).output().unwrap();
        assert!(o.status.success(), "{}", out(&o).1);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["socket"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(
        socket(Some(runtime.path())),
        runtime.path().join("berth/sockcheck.sock").display().to_string()
    );
    assert_eq!(
        socket(None),
        dir.path().join("run/sockcheck.sock").display().to_string()
    );
}

/// `--network` picks a container job's network (here none: only the
/// loopback device exists inside), is kept on the record, and a word that
/// is not a network is one clear line and exit 2, with nothing started.
#[test]
fn run_network_flag_picks_the_containers_network() {
    let dir = tempfile::tempdir().unwrap();
    let o = berth(dir.path())
        .env("BERTH_RUNNER", "docker")
        .args([
            "run",
            "--json",
            "--image",
            "berth/sandbox:latest",
            "--network",
            "none",
            "--",
            "cat",
            "/proc/net/dev",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let devices = v["stdout"].as_str().unwrap();
    assert!(devices.contains("lo:"), "{devices}");
    assert!(
        !devices.contains("eth0"),
        "a job on network none has no eth0: {devices}"
    );

    let o = berth(dir.path())
        .env("BERTH_RUNNER", "docker")
        .args(["run", "--network", "host", "--", "true"])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("network") && stderr.contains("isolated"),
        "{stderr}"
    );
}

/// A misspelled flag is a usage error naming the flag (with clap's
/// suggestion), for every verb, and starts nothing: before, `berth run
/// --detatch -- echo hi` ran a job whose command was `--detatch`.
#[test]
fn a_misspelled_flag_is_refused_by_every_verb() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let touch = ["--", "touch", marker.to_str().unwrap()];
    let verbs: &[&[&str]] = &[
        &["run"],
        &["run", "-d"],
        &["daemon"],
        &["watchdog"],
        &["up"],
        &["down"],
        &["ps"],
        &["status"],
        &["logs"],
        &["cp"],
        &["exec"],
        &["layers"],
        &["diff"],
        &["apply"],
        &["discard"],
        &["wait"],
        &["kill"],
        &["resume"],
        &["bg"],
        &["events"],
        &["prune"],
        &["mcp"],
        &["tui"],
        &["test"],
        &["build"],
        &["images", "build"],
        &["completions", "bash"],
        &["doctor"],
        &["config"],
        &["trust"],
        &["man"],
    ];
    // Every verb `--help` lists is walked (a new one must be added above).
    let help = berth(dir.path()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let listed: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .and_then(|s| s.split("Options:").next())
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|v| *v != "help")
        .collect();
    assert!(listed.len() > 20, "{help}");
    for v in &listed {
        assert!(verbs.iter().any(|w| w[0] == *v), "verb `{v}` is not walked");
    }
    for verb in verbs {
        for typo in ["--detatch", "-x"] {
            let o = berth(dir.path())
                .args(*verb)
                .arg(typo)
                .args(touch)
                .output()
                .unwrap();
            let (_, stderr) = out(&o);
            assert_eq!(o.status.code(), Some(2), "{verb:?} {typo}: {stderr}");
            assert!(
                stderr.contains(&format!("unexpected argument '{typo}'")),
                "{verb:?} {typo}: {stderr}"
            );
        }
    }
    let o = berth(dir.path())
        .args(["run", "--detatch", "--", "true"])
        .output()
        .unwrap();
    assert!(
        out(&o).1.contains("a similar argument exists: '--detach'"),
        "{o:?}"
    );
    assert!(!marker.exists(), "a misspelled flag ran the command");
    // A command's own flags after its first word still reach it.
    let o = berth(dir.path())
        .args(["run", "sh", "-c", "exit 7"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7), "{o:?}");
}

/// `berth test` takes `--timeout`, `--image` and `--json` as `berth run` does.
#[test]
fn test_and_build_take_the_run_flags_users_reach_for() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("berth.toml"),
        "test_command = \"echo tests-ran\"\n",
    )
    .unwrap();
    let o = berth(dir.path())
        .current_dir(dir.path())
        .args(["test", "--json", "--timeout", "20"])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(v["status"], "success", "{v}");
    assert!(
        v["output"].to_string().contains("tests-ran") || stdout.contains("tests-ran"),
        "{v}"
    );
    let o = berth(dir.path())
        .current_dir(dir.path())
        .args(["test", "--timeout", "0"])
        .output()
        .unwrap();
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("timeout"), "{stderr}");
}

/// The manual (docs/src/cli.md) and the CLI agree: a `ps` filter that matches nothing says so (not
/// "use --all" to someone who gave it), and a foreground `--json` answer
/// carries `image` and `project_note` as the manual says JSON answers do.
#[test]
fn an_empty_filtered_ps_says_what_matched_nothing_and_run_json_names_its_image() {
    let d = crate::common::Daemon::start();
    let (code, out, err) = d.run(&["ps", "--all", "--label", "web", "--workspace"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        "no jobs match (none of any state, labelled `web`, in this project's workspace)"
    );
    let (code, out, _) = d.run(&["ps"]);
    assert_eq!(
        (code, out.trim()),
        (0, "no jobs (use --all to include ended ones)")
    );
    let v = d.json(&["run", "--", "true"]);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert!(keys.contains(&"image") && keys.contains(&"project_note"), "{v}");
}
