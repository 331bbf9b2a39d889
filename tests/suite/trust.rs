//! Who may loosen the sandbox, played as the attacker did: a container job
//! writes the project's `berth.toml` to get the next job out of the sandbox
//! (host runner, root, no blocklist); the next start is refused, naming the
//! key and `berth trust`, until the user trusts that exact file. A job
//! cannot change a file the user trusted (it is mounted read-only).

use std::path::Path;
use std::process::Command;

use crate::common::{Daemon, SANDBOX, workspace_dir};

/// `berth` in `dir` as the daemon's user would run it there (no runner forced).
fn at(d: &Daemon, dir: &Path) -> Command {
    let mut cmd = d.cli();
    cmd.current_dir(dir)
        .env_remove("BERTH_WORKSPACE")
        .env_remove("BERTH_RUNNER");
    cmd
}

fn run(mut cmd: Command, args: &[&str]) -> (i32, String, String) {
    let o = cmd.args(args).output().expect("run berth");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_job_written_berth_toml_cannot_take_the_next_job_out_of_the_sandbox_until_trusted() {
    let d = Daemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("proj");
    workspace_dir(&ws);
    let ws = ws.canonicalize().unwrap();
    // The attacker's job, in a container, writes the project's config.
    let payload = "printf 'runner = \"host\"\\nuser = \"root\"\\nworkspace = \"/usr/local/share\"\\n[safety]\\ndefault_blocklist = false\\n' > berth.toml && echo written";
    let (code, out, err) = run(
        at(&d, &ws),
        &[
            "run", "--runner", "docker", "--image", SANDBOX, "--shell", "--", payload,
        ],
    );
    assert_eq!((code, out.trim()), (0, "written"), "{err}");
    assert!(ws.join("berth.toml").is_file());

    // The next start is refused before anything runs: one line, exit 126.
    let (code, out, err) = run(at(&d, &ws), &["run", "--", "id", "-u"]);
    assert_eq!(code, 126, "{out}{err}");
    assert!(
        err.contains("runner = \"host\"") && err.contains("berth trust") && err.lines().count() == 1,
        "{err}"
    );
    let log =
        std::fs::read_to_string(d.dir.path().join("state").join(&d.instance).join("security.log")).unwrap();
    assert!(log.contains("\"kind\":\"untrusted_config\""), "{log}");
    // `berth config` says what is not applied and why.
    let (_, out, _) = run(at(&d, &ws), &["config"]);
    assert!(out.contains("NOT applied") && out.contains("runner"), "{out}");

    // The user reads the file and trusts it: now it applies (a host job as root).
    let (code, out, err) = run(at(&d, &ws), &["trust"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("trusted:") && out.contains("runner = \"host\""),
        "{out}"
    );
    let (code, out, err) = run(at(&d, &ws), &["run", "--", "id", "-u"]);
    assert_eq!((code, out.trim()), (0, "0"), "{err}");

    // One byte changed by anyone: untrusted again.
    std::fs::write(
        ws.join("berth.toml"),
        std::fs::read_to_string(ws.join("berth.toml")).unwrap() + "\n",
    )
    .unwrap();
    let (code, _, err) = run(at(&d, &ws), &["run", "--", "true"]);
    assert_eq!(code, 126, "{err}");
}

#[test]
fn a_container_job_cannot_change_the_projects_config_files() {
    let d = Daemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("proj");
    workspace_dir(&ws);
    std::fs::create_dir_all(ws.join(".devcontainer")).unwrap();
    let toml = format!("image = \"{SANDBOX}\"\n");
    std::fs::write(ws.join("berth.toml"), &toml).unwrap();
    std::fs::write(ws.join(".devcontainer/devcontainer.json"), "{}\n").unwrap();
    let script = "cat berth.toml; echo 'runner = \"host\"' >> berth.toml || echo refused-1; \
                  rm -f berth.toml || echo refused-2; mv berth.toml b.toml || echo refused-3; \
                  echo x > .devcontainer/devcontainer.json || echo refused-4; touch made-here && echo ok";
    let (code, out, err) = run(
        at(&d, &ws),
        &["run", "--runner", "docker", "--shell", "--", script],
    );
    assert_eq!(code, 0, "{err}");
    for expect in [
        "image = ",
        "refused-1",
        "refused-2",
        "refused-3",
        "refused-4",
        "ok",
    ] {
        assert!(out.contains(expect), "{expect}: {out}");
    }
    assert_eq!(std::fs::read_to_string(ws.join("berth.toml")).unwrap(), toml);
    assert_eq!(
        std::fs::read_to_string(ws.join(".devcontainer/devcontainer.json")).unwrap(),
        "{}\n"
    );
    assert!(
        ws.join("made-here").exists(),
        "the rest of the workspace stays writable"
    );
}

/// A workspace holding the user's own berth config (`workspace = $HOME`)
/// would let a container job rewrite the trust table: such jobs are refused.
#[test]
fn a_workspace_holding_the_users_config_gets_no_container_jobs() {
    let d = Daemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    workspace_dir(&home);
    let user = home.join(".config/berth/config.toml");
    let mut cmd = at(&d, &home);
    cmd.env("BERTH_USER_CONFIG", &user);
    let (code, _, err) = run(
        cmd,
        &["run", "--runner", "docker", "--image", SANDBOX, "--", "true"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("contains your berth config") && err.lines().count() == 1,
        "{err}"
    );
    assert!(!user.exists(), "nothing was written there");
}

/// Trust is keyed by where berth read a file: a `berth.toml` that links to
/// another project's trusted file (as a job could plant it) is refused, not
/// read through, and the other commands work on.
#[test]
fn a_symlinked_berth_toml_lends_no_trust_and_is_refused() {
    let d = Daemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    workspace_dir(&a);
    workspace_dir(&b);
    std::fs::write(a.join("berth.toml"), "runner = \"host\"\n").unwrap();
    let (code, _, err) = run(at(&d, &a), &["trust"]);
    assert_eq!(code, 0, "{err}");
    std::os::unix::fs::symlink(a.join("berth.toml"), b.join("berth.toml")).unwrap();
    let (code, out, err) = run(at(&d, &b), &["run", "--", "echo", "ran"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(!out.contains("ran"), "{out}");
    assert!(
        err.contains("symlink") && err.contains("project_symlinks") && err.lines().count() == 1,
        "{err}"
    );
    let (code, _, err) = run(at(&d, &b), &["ps"]);
    assert_eq!(code, 0, "{err}");
}

/// A malformed project file refuses jobs with one line, but never breaks
/// the commands that look after jobs already running.
#[test]
fn a_malformed_berth_toml_refuses_jobs_but_not_ps_logs_config_or_down() {
    let d = Daemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let (ws, other) = (tmp.path().join("p"), tmp.path().join("q"));
    workspace_dir(&ws);
    workspace_dir(&other);
    // A job of another project (one of this project's would make the file suspect).
    let (code, out, err) = run(
        at(&d, &other),
        &[
            "run",
            "-d",
            "--runner",
            "host",
            "--",
            "sh",
            "-c",
            "echo before; sleep 600",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let id = out
        .split_whitespace()
        .find(|w| w.starts_with("job-"))
        .unwrap()
        .to_string();
    std::fs::write(ws.join("berth.toml"), "runner = [oops\n").unwrap();

    let (code, _, err) = run(at(&d, &ws), &["run", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("berth.toml") && err.lines().count() == 1, "{err}");
    for args in [&["ps"][..], &["logs", &id], &["config"], &["kill", &id]] {
        let (code, out, err) = run(at(&d, &ws), args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        if args[0] == "logs" {
            assert!(out.contains("before"), "{out}");
        }
        if args[0] == "config" {
            assert!(out.contains("NOT used") && out.contains("berth.toml"), "{out}");
        }
    }
    let (code, _, err) = run(at(&d, &ws), &["down"]);
    assert_eq!(code, 0, "{err}");
}

/// A job that writes the checkout plants a `berth.toml` with a
/// `test_command` that fakes a pass: `berth test` does not run it and says
/// why, until the user trusts the file (or saves it with no job running).
#[test]
fn a_berth_toml_a_job_wrote_is_not_used_until_the_user_says_so() {
    let d = Daemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("p");
    workspace_dir(&ws);
    let payload = "printf 'test_command = \"echo faked pass\"\\n' > berth.toml && echo written";
    let (code, out, err) = run(
        at(&d, &ws),
        &[
            "run", "--runner", "docker", "--image", SANDBOX, "--write", "direct", "--shell", "--", payload,
        ],
    );
    assert_eq!((code, out.trim()), (0, "written"), "{err}");

    let (code, out, err) = run(at(&d, &ws), &["test"]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(!out.contains("faked pass"), "{out}");
    assert!(err.contains("while job-") && err.contains("berth trust"), "{err}");
    let log =
        std::fs::read_to_string(d.dir.path().join("state").join(&d.instance).join("security.log")).unwrap();
    assert!(log.contains("\"kind\":\"planted_config\""), "{log}");

    // The user read it and saves it again, no job running: it is theirs now.
    let text = std::fs::read(ws.join("berth.toml")).unwrap();
    std::fs::write(ws.join("berth.toml"), text).unwrap();
    let (code, out, err) = run(at(&d, &ws), &["test"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("faked pass"), "{out}");
}

/// Limits above the user's are loosenings: an untrusted project file's
/// `memory = "20g"` is not applied, the start is refused naming it, and
/// `berth config` lists it; a lower limit applies without trust.
#[test]
fn an_untrusted_file_cannot_raise_limits_but_may_lower_them() {
    let d = Daemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("p");
    workspace_dir(&ws);
    std::fs::write(ws.join("berth.toml"), "memory = \"20g\"\n").unwrap();
    let (code, out, err) = run(at(&d, &ws), &["run", "--", "echo", "ran"]);
    assert_eq!(code, 126, "{out}{err}");
    assert!(err.contains("memory") && err.contains("berth trust"), "{err}");
    let (_, out, _) = run(at(&d, &ws), &["config"]);
    assert!(out.contains("NOT applied") && out.contains("memory"), "{out}");

    std::fs::write(ws.join("berth.toml"), "memory = \"64m\"\n").unwrap();
    let (code, out, err) = run(
        at(&d, &ws),
        &[
            "run", "--json", "--runner", "docker", "--image", SANDBOX, "--", "true",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let id = v["job_id"].as_str().unwrap();
    let (_, out, err) = run(at(&d, &ws), &["status", id, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    assert_eq!(v["limits"]["memory"], 64 << 20, "{v}");
}
