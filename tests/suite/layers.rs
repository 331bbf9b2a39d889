//! Layers on the real engine and on the host: a job in `layer` mode writes
//! a layer of its own, never the checkout; `berth diff` shows it, `berth
//! apply` brings it (conflicts skipped and named), `berth discard` throws
//! it away; a planted or symlinked `berth.toml` in a layer is never read
//! as the project's config; nothing of a layer's mount outlives the daemon.

use std::path::Path;

use std::time::{Duration, Instant};

use crate::common::{Daemon, SANDBOX, TEST_OWNER};

/// Every path under `root` with its kind, mode and bytes: equal digests
/// mean a byte-identical tree.
fn tree(root: &Path) -> Vec<(String, String)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let what = if m.is_dir() {
                stack.push(p.clone());
                format!("dir {:o}", m.permissions().mode())
            } else if m.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else {
                format!(
                    "file {:o} {:?}",
                    m.permissions().mode(),
                    std::fs::read(&p).unwrap()
                )
            };
            out.push((rel, what));
        }
    }
    out.sort();
    out
}

/// A checkout with a few files, owned as a test workspace is.
fn checkout(ws: &Path) {
    for (path, text) in [
        ("a.txt", "one\n"),
        ("src/app.py", "print('hi')\n"),
        ("keep/data.csv", "1,2\n"),
    ] {
        let p = ws.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
    }
    if nix::unistd::getuid().is_root() {
        let owner = Some(TEST_OWNER);
        for p in ["", "a.txt", "src", "src/app.py", "keep", "keep/data.csv"] {
            std::os::unix::fs::chown(ws.join(p), owner, owner).unwrap();
        }
    }
}

fn in_layer<'a>(runner: &'a str, script: &'a str) -> Vec<&'a str> {
    let mut args = vec!["run", "--write", "layer", "--runner", runner];
    if runner == "docker" {
        args.extend(["--image", SANDBOX]);
    }
    args.extend(["--", "sh", "-c", script]);
    args
}

/// Names of this daemon's layer volumes on the engine.
fn layer_volumes(d: &Daemon) -> Vec<String> {
    let o = std::process::Command::new("docker")
        .args(["volume", "ls", "-q", "--filter", "label=berth.layer"])
        .args(["--filter", &format!("label=berth.instance={}", d.instance)])
        .output()
        .expect("docker volume ls");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Overlay mounts over `ws` in this machine's mount table.
fn overlays_over(ws: &Path) -> usize {
    let real = std::fs::canonicalize(ws).unwrap();
    let lower = format!("lowerdir={}", real.display());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(" - overlay ") && l.contains(&lower))
        .count()
}

#[test]
fn a_layer_job_leaves_the_checkout_byte_identical_and_diff_apply_discard_work() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    checkout(&ws);
    let before = tree(&ws);
    let (code, _, err) = d.run(&in_layer(
        "docker",
        "rm -rf ./* && printf 'test_command = \"true\"\\n' > berth.toml && ls -A",
    ));
    assert_eq!(code, 0, "{err}");
    assert_eq!(tree(&ws), before, "the job changed the checkout");
    // The run's last line says where its changes are.
    assert!(
        err.contains("4 files changed in layer job-1 (1 added, 3 deleted)")
            && err.contains("berth apply job-1"),
        "{err}"
    );

    let (code, diff, err) = d.run(&["diff", "job-1"]);
    assert_eq!(code, 0, "{err}");
    for line in ["D  a.txt", "D  keep/", "D  src/", "A  berth.toml"] {
        assert!(
            diff.lines().any(|l| l.starts_with(line)),
            "{line} missing:\n{diff}"
        );
    }
    let (code, patch, _) = d.run(&["diff", "job-1", "--patch", "berth.toml"]);
    assert_eq!(code, 0);
    assert!(
        patch.contains("+++ b/berth.toml") && patch.contains("+test_command = \"true\""),
        "{patch}"
    );

    // The deletions only: the planted file stays in the layer.
    let (code, out, err) = d.run(&["apply", "job-1", "a.txt", "src", "keep"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("applied 3 paths"), "{out}");
    assert!(!ws.join("a.txt").exists() && !ws.join("src").exists() && !ws.join("keep").exists());
    assert!(!ws.join("berth.toml").exists());
    let (_, diff, _) = d.run(&["diff", "job-1"]);
    assert!(
        diff.starts_with("A  berth.toml") && diff.contains("1 path changed"),
        "{diff}"
    );

    let (code, out, err) = d.run(&["discard", "job-1"]);
    assert_eq!(code, 0, "{out}{err}");
    let layers = d.json(&["layers"]);
    assert_eq!(layers, serde_json::json!([]), "{layers}");
    assert!(
        !d.dir
            .path()
            .join("state")
            .join(&d.instance)
            .join("layers/job-1")
            .exists()
    );
    assert!(!ws.join("berth.toml").exists());
    assert!(tree(&ws).is_empty(), "{:?}", tree(&ws));
}

#[test]
fn a_berth_toml_planted_or_symlinked_in_a_layer_is_never_the_projects_config() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    checkout(&ws);
    // Another project's file, as a job would point at a trusted one.
    let other = d.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("berth.toml"), "memory = \"96m\"\n").unwrap();
    let plant = format!(
        "printf 'memory = \"64m\"\\n' > berth.toml && mkdir -p sub && ln -s {} sub/berth.toml",
        other.join("berth.toml").display()
    );
    let (code, _, err) = d.run(&[
        "run", "--layer", "shared", "--runner", "docker", "--image", SANDBOX, "--", "sh", "-c", &plant,
    ]);
    assert_eq!(code, 0, "{err}");
    // The next job of the layer sees the files (they are its workspace) …
    let next = |cwd: &str, script: &str| {
        let o = d
            .cli()
            .current_dir(ws.join(cwd))
            .args([
                "run", "--layer", "shared", "--runner", "docker", "--image", SANDBOX, "--", "sh", "-c",
                script,
            ])
            .output()
            .unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (code, out) = next("", "cat berth.toml");
    assert_eq!((code, out.as_str()), (Some(0), "memory = \"64m\"\n"));
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    let (code, out) = next("sub", "readlink berth.toml");
    assert_eq!(code, Some(0));
    assert!(out.contains("other/berth.toml"), "{out}");
    // … but neither is read as the project's: the default limit applies.
    for job in ["job-2", "job-3"] {
        let info = d.json(&["status", job]);
        let memory = info["limits"]["memory"].as_u64().unwrap_or_default();
        assert_eq!(memory, berth::config::DEFAULT_MEMORY, "{job}: {info}");
    }
    let config = d
        .cli()
        .current_dir(ws.join("sub"))
        .args(["config", "--json"])
        .output()
        .unwrap();
    let config = String::from_utf8_lossy(&config.stdout);
    assert!(!config.contains("96m") && !config.contains("64m"), "{config}");
}

#[test]
fn a_file_the_checkout_changed_after_the_copy_up_is_a_conflict_apply_skips() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    checkout(&ws);
    let script = "echo job > a.txt && echo job > src/app.py";
    let (code, _, err) = d.run(&in_layer("docker", script));
    assert_eq!(code, 0, "{err}");
    // The user edits a.txt after the job copied it up.
    std::fs::write(ws.join("a.txt"), "mine\n").unwrap();
    let (_, diff, _) = d.run(&["diff", "job-1"]);
    assert!(
        diff.lines()
            .any(|l| l.starts_with("M! a.txt") && l.contains("conflict")),
        "{diff}"
    );
    let (code, out, _) = d.run(&["apply", "job-1"]);
    assert_eq!(code, 1, "an apply that left a conflict says so: {out}");
    assert!(
        out.contains("1 conflict skipped") && out.contains("conflict: a.txt"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "mine\n");
    assert_eq!(std::fs::read_to_string(ws.join("src/app.py")).unwrap(), "job\n");
    // What conflicted stays in the layer for the user to decide.
    let (_, diff, _) = d.run(&["diff", "job-1"]);
    assert!(diff.starts_with("M! a.txt"), "{diff}");
}

#[test]
fn a_host_job_writes_a_layer_and_a_read_only_one_writes_nothing() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    checkout(&ws);
    let before = tree(&ws);
    let (code, _, err) = d.run(&in_layer("host", "rm a.txt && echo new > new.txt"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(tree(&ws), before);
    let (_, diff, _) = d.run(&["diff", "job-1"]);
    assert!(diff.contains("D  a.txt") && diff.contains("A  new.txt"), "{diff}");
    let (code, _, err) = d.run(&[
        "run",
        "--write",
        "read-only",
        "--runner",
        "host",
        "--",
        "sh",
        "-c",
        "echo x > b.txt",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("Read-only file system"), "{err}");
    assert_eq!(tree(&ws), before);
    let info = d.json(&["status", "job-2"]);
    assert_eq!(info["writes"]["mode"], "read-only", "{info}");
}

#[test]
fn no_layer_mount_or_volume_outlives_the_daemon_clean_or_killed() {
    for kill in [false, true] {
        let mut d = Daemon::start();
        let ws = d.dir.path().join("ws");
        checkout(&ws);
        let (code, _, err) = d.run(&[
            "run", "-d", "--write", "layer", "--runner", "docker", "--image", SANDBOX, "--", "sleep", "300",
        ]);
        assert_eq!(code, 0, "{err}");
        until("the layer's volume", || layer_volumes(&d).len() == 1);
        if kill {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(d.pid() as i32),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
        } else {
            let (code, _, err) = d.run(&["down"]);
            assert_eq!(code, 0, "{err}");
        }
        let _ = d.wait_exit(Duration::from_secs(30));
        // The watchdog cleans up after a killed daemon.
        until("no layer volume left", || layer_volumes(&d).is_empty());
        assert_eq!(
            overlays_over(&ws),
            0,
            "an overlay is still mounted over the workspace (kill: {kill})"
        );
        // The layer's files stay until discarded.
        let (_, layers, _) = d.run(&["layers"]);
        assert!(layers.contains("job-1"), "{layers}");
    }
}

/// Poll `check` until it holds (30 s at most, then fail naming `what`).
fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn doctor_reports_a_half_applied_or_damaged_layer_and_apply_finishes_one() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    checkout(&ws);
    for _ in 0..2 {
        let (code, _, err) = d.run(&in_layer("host", "echo job > a.txt"));
        assert_eq!(code, 0, "{err}");
    }
    let layers = d.dir.path().join("state").join(&d.instance).join("layers");
    // What an apply stopped by a crash leaves; and a record torn by a full disk.
    std::fs::write(layers.join("job-1/applying"), "a.txt\n").unwrap();
    std::fs::write(layers.join("job-2/layer.json"), "{\"name\": \"job-2\", \"worksp").unwrap();
    let (code, out, _) = d.run(&["doctor", "--check"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("job-1 is HALF-APPLIED") && out.contains("berth apply job-1"),
        "{out}"
    );
    assert!(
        out.contains("job-2 is DAMAGED") && out.contains("berth discard job-2"),
        "{out}"
    );
    let (code, _, err) = d.run(&["apply", "job-1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "job\n");
    let (code, _, err) = d.run(&["discard", "job-2"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = d.run(&["doctor", "--check"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_job_whose_layer_outgrows_layer_size_is_stopped_with_that_reason() {
    let d = Daemon::start_with(&[("BERTH_LAYER_SIZE", "1m")]);
    checkout(&d.dir.path().join("ws"));
    let script = "dd if=/dev/zero of=big bs=1M count=4 2>/dev/null && echo written && exec sleep 120";
    let (code, _, err) = d.run(&[
        "run", "-d", "--write", "layer", "--runner", "docker", "--image", SANDBOX, "--", "sh", "-c", script,
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = d.run(&["wait", "job-1", "--timeout", "60"]);
    assert_ne!(code, 0, "{err}");
    let info = d.json(&["status", "job-1"]);
    assert_eq!(info["status"]["state"], "killed", "{info}");
    assert_eq!(info["ended_by"], "system", "{info}");
    assert_eq!(info["reason"], "layer full (1048576 bytes, layer_size)", "{info}");
    // The layer keeps what was written, for the user to look at or discard.
    let (_, diff, _) = d.run(&["diff", "job-1"]);
    assert!(diff.contains("A  big"), "{diff}");
}

/// Pids of the crash watchdog guarding `d`'s daemon.
fn watchdogs_of(d: &Daemon) -> Vec<i32> {
    let state = d.dir.path().join("state");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
        let env = String::from_utf8_lossy(&env);
        if cmd.contains("watchdog") && env.contains(&*state.to_string_lossy()) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_dead_managers_layer_volume_goes_with_the_next_manager_when_its_watchdog_died_too() {
    let mut d = Daemon::start();
    checkout(&d.dir.path().join("ws"));
    let (code, _, err) = d.run(&[
        "run", "-d", "--write", "layer", "--runner", "docker", "--image", SANDBOX, "--", "sleep", "300",
    ]);
    assert_eq!(code, 0, "{err}");
    until("the layer's volume", || layer_volumes(&d).len() == 1);
    let dogs = watchdogs_of(&d);
    assert!(!dogs.is_empty(), "no watchdog found");
    for pid in dogs {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(d.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = d.wait_exit(Duration::from_secs(30));
    assert_eq!(layer_volumes(&d).len(), 1, "nothing cleaned up yet");
    // The next manager of the instance takes over: the dead one's job, then its volume.
    let _again = KillOnDrop(
        d.cli()
            .arg("daemon")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    until("no layer volume left", || layer_volumes(&d).is_empty());
    let _ = d.run(&["down"]);
}

/// A process killed when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
