//! One daemon, many projects: every job runs in its caller's workspace,
//! under its caller's `berth.toml` (rules, runner, image, limits), whichever
//! directory the daemon itself was started from.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::Daemon;

/// A `berth` command from `dir`, aimed at `d`, whose workspace comes from
/// the `berth.toml` found from `dir` (not from the test's `BERTH_WORKSPACE`).
fn from(d: &Daemon, dir: &Path) -> Command {
    let mut cmd = d.cli();
    cmd.current_dir(dir).env_remove("BERTH_WORKSPACE");
    cmd
}

fn output(mut cmd: Command, args: &[&str]) -> (i32, String, String) {
    let o = cmd.args(args).output().expect("run berth");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

struct Projects {
    _dir: tempfile::TempDir,
    ws1: PathBuf,
    ws2: PathBuf,
}

/// ws1 allows everything; ws2 blocks `echo forbidden` and sets an
/// instance-wide key (`max_jobs`) the running daemon cannot apply.
fn projects() -> Projects {
    let dir = tempfile::tempdir().unwrap();
    let ws1 = dir.path().join("ws1");
    let ws2 = dir.path().join("ws2");
    std::fs::create_dir_all(ws1.join("sub")).unwrap();
    std::fs::create_dir_all(&ws2).unwrap();
    std::fs::write(ws1.join("berth.toml"), "timeout = 30\n").unwrap();
    std::fs::write(
        ws2.join("berth.toml"),
        "max_jobs = 7\n[[safety.blocked]]\npattern = \"echo forbidden\"\nreason = \"not in ws2\"\n",
    )
    .unwrap();
    Projects {
        ws1: ws1.canonicalize().unwrap(),
        ws2: ws2.canonicalize().unwrap(),
        _dir: dir,
    }
}

#[tokio::test]
async fn each_caller_runs_in_its_own_workspace_under_its_own_rules() {
    let d = Daemon::start();
    let p = projects();

    // `pwd` through the daemon is the caller's directory, as without one.
    let sub = p.ws1.join("sub");
    let (code, out, err) = output(from(&d, &sub), &["run", "--", "pwd"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), sub.display().to_string(), "{err}");
    let (code, local, err) = output(from(&d, &sub), &["run", "--no-daemon", "--", "pwd"]);
    assert_eq!((code, local.trim()), (0, out.trim()), "{err}");
    let (code, out, err) = output(from(&d, &p.ws2), &["run", "--", "pwd"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), p.ws2.display().to_string());
    // ws2's max_jobs is the instance's to decide: said, not silently ignored.
    assert!(err.contains("max_jobs") && err.contains("berth up"), "{err}");

    // ws2's rule holds for ws2's callers only.
    let (code, out, err) = output(from(&d, &p.ws2), &["run", "--", "echo", "forbidden"]);
    assert_eq!(code, 126, "blocked in ws2: {out}{err}");
    assert!(err.contains("blocked") && err.contains("not in ws2"), "{err}");
    let (code, out, err) = output(from(&d, &p.ws1), &["run", "--", "echo", "forbidden"]);
    assert_eq!((code, out.trim()), (0, "forbidden"), "allowed in ws1: {err}");

    // Every job records its workspace; `ps` shows it.
    let (code, out, err) = output(from(&d, &p.ws1), &["ps", "--all", "--json"]);
    assert_eq!(code, 0, "{err}");
    let jobs: serde_json::Value = serde_json::from_str(&out).unwrap();
    let spaces: Vec<&str> = jobs
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["workspace"].as_str().unwrap())
        .collect();
    let (ws1, ws2) = (p.ws1.display().to_string(), p.ws2.display().to_string());
    // (The blocked start left no record; `--no-daemon` beside the daemon
    // went through it, so the daemon recorded it too.)
    assert_eq!(spaces.iter().filter(|w| **w == ws1).count(), 3, "{spaces:?}");
    assert_eq!(spaces.iter().filter(|w| **w == ws2).count(), 1, "{spaces:?}");
    let (_, table, _) = output(from(&d, &p.ws1), &["ps", "--all"]);
    assert!(table.contains("WORKSPACE") && table.contains("ws2"), "{table}");
}

#[tokio::test]
async fn a_container_job_gets_its_callers_workspace_image_and_limits() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("app");
    crate::common::workspace_dir(&ws);
    std::fs::write(
        ws.join("berth.toml"),
        "runner = \"docker\"\nimage = \"berth/sandbox:latest\"\nmemory = \"96m\"\npids = 77\n",
    )
    .unwrap();
    let ws = ws.canonicalize().unwrap();
    // The runner too comes from the project's file, not the test's variables.
    let mut cmd = from(&d, &ws);
    cmd.env_remove("BERTH_RUNNER");
    let (code, out, err) = output(
        cmd,
        &[
            "run",
            "--shell",
            "--",
            "echo made-in-container > made-here && echo ok",
        ],
    );
    assert_eq!((code, out.trim()), (0, "ok"), "{err}");
    let (code, out, err) = output(from(&d, &ws), &["ps", "--all", "--json"]);
    assert_eq!(code, 0, "{err}");
    let jobs: serde_json::Value = serde_json::from_str(&out).unwrap();
    let info = &jobs[0];
    assert_eq!(info["runner"], "docker", "{info}");
    assert_eq!(
        info["spec"]["image"].as_str().unwrap_or("berth/sandbox:latest"),
        "berth/sandbox:latest"
    );
    assert_eq!(info["workspace"], ws.display().to_string());
    assert_eq!(info["limits"]["memory"], 96 * 1024 * 1024, "{info}");
    assert_eq!(info["limits"]["pids"], 77, "{info}");
    // The bind mount is the caller's workspace, not the daemon's.
    let made = std::fs::read_to_string(ws.join("made-here")).unwrap();
    assert_eq!(made.trim(), "made-in-container");
    assert!(!d.dir.path().join("ws").join("made-here").exists());
}
