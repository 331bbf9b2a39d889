//! Private state and loud choices: files 0600 and directories 0700 whatever
//! the umask, env values never on disk, a socket path that is not berth's
//! left alone, and a fallback to the host that is never silent.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::{Daemon, berth, eventually, instance_name};

/// Every entry under `root`: (mode, is_dir, path).
fn walk(root: &Path, out: &mut Vec<(u32, bool, String)>) {
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        out.push((
            m.permissions().mode() & 0o7777,
            m.is_dir(),
            e.path().display().to_string(),
        ));
        if m.is_dir() {
            walk(&e.path(), out);
        }
    }
}

fn contains_bytes(root: &Path, needle: &str) -> Vec<String> {
    let mut all = Vec::new();
    walk(root, &mut all);
    all.into_iter()
        .filter(|(_, dir, p)| {
            !dir && std::fs::read(p)
                .map(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
                .unwrap_or(false)
        })
        .map(|(_, _, p)| p)
        .collect()
}

#[tokio::test]
async fn state_is_private_under_umask_022_and_env_values_stay_off_disk() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state"); // created by berth
    let secret = "secret-value-3040";
    let instance = instance_name("priv");
    let sh = |script: &str| {
        Command::new("sh")
            .args(["-c", &format!("umask 022; {script}")])
            .env("BERTH_STATE_DIR", &state)
            .env("BERTH_INSTANCE", &instance)
            .env("BERTH_WORKSPACE", dir.path())
            .env("BERTH_RUNNER", "host")
            .env("BERTH_BIN", env!("CARGO_BIN_EXE_berth"))
            .env_remove("XDG_RUNTIME_DIR") // the socket then lives in the state dir
            .env_remove("BERTH_SOCKET")
            .env_remove("BERTH_CONFIG")
            .output()
            .unwrap()
    };
    let up = sh("\"$BERTH_BIN\" up");
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    let run = sh(&format!(
        "\"$BERTH_BIN\" run --env TOKEN={secret} -- sh -c 'echo \"${{#TOKEN}}\"'"
    ));
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        secret.len().to_string()
    );
    let local = sh(&format!(
        "\"$BERTH_BIN\" run --no-daemon --env TOKEN={secret} -- true"
    ));
    assert!(local.status.success());

    // While the daemon runs (the database's -wal and -shm exist), then after it stops.
    for phase in ["running", "stopped"] {
        if phase == "stopped" {
            assert!(sh("\"$BERTH_BIN\" down").status.success());
        }
        let mut all = Vec::new();
        all.push((
            std::fs::metadata(&state).unwrap().permissions().mode() & 0o7777,
            true,
            state.display().to_string(),
        ));
        walk(&state, &mut all);
        let names: Vec<&str> = all
            .iter()
            .map(|(_, _, p)| p.rsplit('/').next().unwrap())
            .collect();
        for expected in [
            "berth.db",
            "daemon.log",
            "watchdog.log",
            "stdout.log",
            "stderr.log",
            "next-id",
        ] {
            assert!(names.contains(&expected), "{phase}: no {expected} in {names:?}");
        }
        if phase == "running" {
            for expected in ["berth.db-wal", "berth.db-shm", "daemon.lock", "daemon.pid"] {
                assert!(names.contains(&expected), "{phase}: no {expected} in {names:?}");
            }
            let sock = all
                .iter()
                .find(|(_, _, p)| p.ends_with(".sock"))
                .expect("socket in state dir");
            assert!(
                std::fs::symlink_metadata(&sock.2)
                    .unwrap()
                    .file_type()
                    .is_socket()
            );
        }
        let wrong: Vec<String> = all
            .iter()
            .filter(|(mode, dir, _)| *mode != if *dir { 0o700 } else { 0o600 })
            .map(|(mode, _, p)| format!("{mode:o} {p}"))
            .collect();
        assert!(wrong.is_empty(), "{phase}: not private: {wrong:#?}");
        let leaked = contains_bytes(&state, secret);
        assert!(leaked.is_empty(), "{phase}: env value stored in {leaked:?}");
    }
}

#[tokio::test]
async fn a_socket_path_that_is_not_a_socket_is_refused_and_left_alone() {
    let d = tempfile::tempdir().unwrap();
    let shared = d.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = shared.join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    let out = berth(&d.path().join("state"))
        .env("BERTH_SOCKET", &file)
        .args(["daemon"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    assert_eq!(
        std::fs::metadata(&shared).unwrap().permissions().mode() & 0o777,
        0o755
    );

    // A free path in a directory berth did not create: served, the directory's mode untouched.
    let sock = shared.join("b.sock");
    let mut daemon = berth(&d.path().join("state"))
        .env("BERTH_SOCKET", &sock)
        .arg("daemon")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    eventually(Duration::from_secs(10), "socket bound", || sock.exists()).await;
    assert_eq!(
        std::fs::metadata(&shared).unwrap().permissions().mode() & 0o777,
        0o755
    );
    assert_eq!(
        std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let _ = Command::new("kill").arg(daemon.id().to_string()).status();
    let _ = daemon.wait();
}

#[tokio::test]
async fn auto_with_no_engine_falls_back_loudly_or_refuses() {
    let state = tempfile::tempdir().unwrap();
    let dead = "unix:///nonexistent/berth-test-docker.sock";
    let out = berth(state.path())
        .env("DOCKER_HOST", dead)
        .env("BERTH_RUNNER", "auto")
        .args(["run", "--no-daemon", "--runner", "auto", "--", "echo", "ran"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ran");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning") && err.contains("fell back to the host"),
        "{err}"
    );

    let out = berth(state.path())
        .env("DOCKER_HOST", dead)
        .env("BERTH_RUNNER", "auto")
        .args(["run", "--no-daemon", "--json", "--runner", "auto", "--", "true"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runner"], "host");
    assert!(
        v["runner_note"].as_str().unwrap().contains("without a sandbox"),
        "{v}"
    );

    let out = berth(state.path())
        .env("DOCKER_HOST", dead)
        .env("BERTH_RUNNER", "auto")
        .env("BERTH_FALLBACK", "false")
        .args(["run", "--no-daemon", "--runner", "auto", "--", "echo", "ran"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "nothing ran");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not reachable"));
}

#[tokio::test]
async fn the_daemon_records_the_fallback_on_the_card_and_as_an_event() {
    let dead = "unix:///nonexistent/berth-test-docker.sock";
    let d = Daemon::start_with(&[("DOCKER_HOST", dead), ("BERTH_RUNNER", "auto")]);
    let (code, out, err) = d.run(&["run", "-d", "--runner", "auto", "--", "sleep", "3041"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("fell back to the host"), "{err}");
    assert!(out.contains("host (no engine)"), "{out}");
    let id = out
        .split_whitespace()
        .find(|w| w.starts_with("job-"))
        .unwrap()
        .to_string();
    let events = d.json(&["events"]);
    let fallback = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "fallback" && e["job"] == id.as_str());
    assert!(fallback.is_some(), "{events}");
    let (code, _, _) = d.run(&["kill", &id]);
    assert_eq!(code, 0);
}

/// `berth doctor --check` says whether the engine answers, and which one.
#[test]
fn doctor_reports_the_engines_reachability() {
    let state = tempfile::tempdir().unwrap();
    let out = berth(state.path())
        .env("DOCKER_HOST", "unix:///nonexistent/berth-test-docker.sock")
        .args(["doctor", "--check"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("engine    NOT reachable") && text.contains("/nonexistent/berth-test-docker.sock"),
        "{text}"
    );
    let out = berth(state.path()).args(["doctor", "--check"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("engine    ") && l.ends_with(" answers")),
        "{text}"
    );
}
