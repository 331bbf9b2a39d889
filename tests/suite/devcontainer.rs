//! devcontainer.json's `containerEnv`, `forwardPorts`, `remoteUser` and
//! `postCreateCommand` on the real engine, played as the agent would: it
//! writes the file (the keys are said and ignored), the user trusts it
//! (they apply to the project's container jobs), one byte changed (ignored
//! again). The job's own `--env` still wins, a port goes through berth's
//! publishing, and the setup command runs once, as a build step.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{Daemon, SANDBOX, http_get, workspace_dir};

/// A project `proj` under a temp dir with `.devcontainer/devcontainer.json`
/// holding `json` (the sandbox image and the keys under test).
fn project(json: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("proj");
    workspace_dir(&ws);
    let ws = ws.canonicalize().unwrap();
    std::fs::create_dir_all(ws.join(".devcontainer")).unwrap();
    std::fs::write(ws.join(".devcontainer/devcontainer.json"), json).unwrap();
    (tmp, ws)
}

/// `berth args…` in `dir`, as the user runs it there, container jobs.
fn berth(d: &Daemon, dir: &Path, args: &[&str]) -> (i32, String, String) {
    let mut cmd: Command = d.cli();
    cmd.current_dir(dir)
        .env_remove("BERTH_WORKSPACE")
        .env("BERTH_RUNNER", "docker");
    let o = cmd.args(args).output().expect("run berth");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// One byte more in the file: no longer the file the user trusted.
fn touch_file(ws: &Path) {
    let f = ws.join(".devcontainer/devcontainer.json");
    std::fs::write(&f, std::fs::read_to_string(&f).unwrap() + " ").unwrap();
}

#[test]
fn container_env_applies_once_trusted_and_the_jobs_own_env_wins() {
    let d = Daemon::start();
    let json = format!(r#"{{"image": "{SANDBOX}", "containerEnv": {{"GREETING": "from-devcontainer"}}}}"#);
    let (_tmp, ws) = project(&json);
    let echo = ["run", "--", "sh", "-c", "echo \"[$GREETING]\""];
    let (code, out, err) = berth(&d, &ws, &echo);
    assert_eq!((code, out.trim()), (0, "[]"), "not trusted: not applied; {err}");
    assert!(
        err.contains("containerEnv") && err.contains("berth trust"),
        "said: {err}"
    );

    let (code, out, err) = berth(&d, &ws, &["trust"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("containerEnv = GREETING"), "{out}");
    let (code, out, err) = berth(&d, &ws, &echo);
    assert_eq!((code, out.trim()), (0, "[from-devcontainer]"), "{err}");
    let mine = [
        "run",
        "--env",
        "GREETING=mine",
        "--",
        "sh",
        "-c",
        "echo \"[$GREETING]\"",
    ];
    let (code, out, err) = berth(&d, &ws, &mine);
    assert_eq!((code, out.trim()), (0, "[mine]"), "{err}");

    touch_file(&ws);
    let (code, out, err) = berth(&d, &ws, &echo);
    assert_eq!((code, out.trim()), (0, "[]"), "changed: not applied; {err}");
}

#[test]
fn forward_ports_are_published_once_trusted() {
    let d = Daemon::start();
    let json = format!(r#"{{"image": "{SANDBOX}", "forwardPorts": [8080]}}"#);
    let (_tmp, ws) = project(&json);
    // A server on 8080, detached once it listens; its record's ports.
    let serve = |ready: bool| -> (String, Value) {
        let mut args = vec!["run", "-d", "-q"];
        if ready {
            args.extend(["--ready-port", "8080"]);
        }
        args.extend(["--", "httpd", "-f", "-p", "8080", "-h", "/"]);
        let (code, id, err) = berth(&d, &ws, &args);
        assert_eq!(code, 0, "{err}");
        let id = id.trim().to_string();
        let (code, status, err) = berth(&d, &ws, &["status", &id, "--json"]);
        assert_eq!(code, 0, "{err}");
        let ports = serde_json::from_str::<Value>(&status).unwrap()["ports"].clone();
        (id, ports)
    };
    let (id, ports) = serve(false);
    assert!(
        ports.as_array().is_none_or(Vec::is_empty),
        "not trusted: nothing published: {ports}"
    );
    let _ = berth(&d, &ws, &["kill", &id]);

    let (code, out, err) = berth(&d, &ws, &["trust"]);
    assert_eq!(
        (code, out.contains("forwardPorts = 8080")),
        (0, true),
        "{out}{err}"
    );
    let (id, ports) = serve(true);
    assert_eq!(ports[0]["port"], 8080, "{ports}");
    let host_port = ports[0]["host_port"]
        .as_u64()
        .unwrap_or_else(|| panic!("published: {ports}"));
    assert!(
        http_get(host_port as u16).starts_with("HTTP/1."),
        "the server answers on it"
    );
    let _ = berth(&d, &ws, &["kill", &id]);
}

#[test]
fn remote_user_root_is_a_loosening_only_a_trusted_file_gives() {
    let d = Daemon::start();
    let json = format!(r#"{{"image": "{SANDBOX}", "remoteUser": "root"}}"#);
    let (_tmp, ws) = project(&json);
    let id_u = ["run", "--", "id", "-u"];
    let (code, out, err) = berth(&d, &ws, &id_u);
    assert_eq!(code, 0, "{err}");
    assert_ne!(out.trim(), "0", "not trusted: never root");
    assert!(
        err.contains("remoteUser") && err.contains("berth trust"),
        "said: {err}"
    );

    let (code, out, err) = berth(&d, &ws, &["trust"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("remoteUser = \"root\""),
        "trusting says it allows root: {out}"
    );
    let (code, out, err) = berth(&d, &ws, &id_u);
    assert_eq!((code, out.trim()), (0, "0"), "{err}");

    touch_file(&ws);
    let (code, out, err) = berth(&d, &ws, &id_u);
    assert_eq!(code, 0, "{err}");
    assert_ne!(out.trim(), "0", "changed: never root");
}

/// The images a post-create step built for `ws`, removed on drop.
struct PostImages(PathBuf);

impl PostImages {
    fn ids(&self) -> Vec<String> {
        let filter = format!("label=berth.project.post-create={}", self.0.display());
        let o = Command::new("docker")
            .args(["images", "-q", "--filter", &filter])
            .output()
            .expect("docker images");
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for PostImages {
    fn drop(&mut self) {
        for id in self.ids() {
            let _ = Command::new("docker").args(["rmi", "-f", &id]).output();
        }
    }
}

/// `postCreateCommand` from a trusted file runs once, as a build step on
/// the project image that sees the workspace: the project's jobs run in
/// the image it made and a second job, after an edit to the workspace,
/// does not run it again (the step writes a fresh random line each time
/// it runs, and the edited file would show); an edited command that
/// fails refuses the start, naming the file and the exit status; from an
/// untrusted file it is said and not run.
#[test]
fn post_create_command_runs_once_on_the_project_image_once_trusted() {
    let d = Daemon::start();
    let setup = "cat setup.txt > /etc/berth-setup && cat /proc/sys/kernel/random/uuid >> /etc/berth-setup";
    let json = format!(r#"{{"image": "{SANDBOX}", "postCreateCommand": "{setup}"}}"#);
    let (_tmp, ws) = project(&json);
    let images = PostImages(ws.clone());
    std::fs::write(ws.join("setup.txt"), "from-the-workspace\n").unwrap();
    // The agent plants a Dockerfile under the name berth sends its own by.
    let planted = format!("FROM {SANDBOX}\nRUN echo hijacked > /etc/berth-setup\n");
    std::fs::write(ws.join(".berth.Dockerfile"), planted).unwrap();
    let show = [
        "run",
        "--",
        "sh",
        "-c",
        "cat /etc/berth-setup 2>/dev/null || echo none",
    ];
    let (code, out, err) = berth(&d, &ws, &show);
    assert_eq!((code, out.trim()), (0, "none"), "not trusted: not run; {err}");
    assert!(
        err.contains("postCreateCommand") && err.contains("berth trust"),
        "said: {err}"
    );
    assert!(images.ids().is_empty(), "nothing was built");

    let (code, out, err) = berth(&d, &ws, &["trust"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("postCreateCommand = /bin/sh -c cat setup.txt"),
        "{out}"
    );
    let (code, first, err) = berth(&d, &ws, &show);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(lines.len(), 2, "the workspace's line and the step's own: {first}");
    assert_eq!(lines[0], "from-the-workspace");
    // An edit to the workspace does not run it again (as the dev container
    // tool runs it when the container is created, not on every change).
    std::fs::write(ws.join("setup.txt"), "edited\n").unwrap();
    let (code, again, err) = berth(&d, &ws, &show);
    assert_eq!(
        (code, again.as_str()),
        (0, first.as_str()),
        "run once, not per job; {err}"
    );
    assert_eq!(images.ids().len(), 1);

    let failing = format!(r#"{{"image": "{SANDBOX}", "postCreateCommand": ["sh", "-c", "exit 3"]}}"#);
    std::fs::write(ws.join(".devcontainer/devcontainer.json"), failing).unwrap();
    let (code, _, err) = berth(&d, &ws, &["trust"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = berth(&d, &ws, &show);
    assert_ne!(code, 0, "a failed setup refuses the start: {out}");
    assert!(
        err.contains("devcontainer.json")
            && err.contains("postCreateCommand failed")
            && err.contains("non-zero code: 3"),
        "{err}"
    );
}
