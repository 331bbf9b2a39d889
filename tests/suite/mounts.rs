//! `berth run -v HOST:CONTAINER[:ro]`: extra bind mounts of paths inside the
//! job's workspace, on the real engine. A file written through a mount is
//! the host's, `:ro` refuses writes, and every way out (a path outside the
//! workspace, a symlink the agent planted pointing out, a relative or
//! system container path, the workspace's own mount, a host job) is refused
//! in one line with no job made.

use crate::common::{Daemon, SANDBOX};

fn container_run<'a>(mount: &'a str, script: &'a str) -> Vec<&'a str> {
    vec![
        "run", "--runner", "docker", "--image", SANDBOX, "-v", mount, "--", "sh", "-c", script,
    ]
}

fn jobs(d: &Daemon) -> usize {
    d.json(&["ps", "--all"]).as_array().map_or(0, Vec::len)
}

#[test]
fn a_mount_inside_the_workspace_is_shared_and_ro_refuses_writes() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    crate::common::workspace_dir(&ws.join("data"));

    // Read-write (relative host path, from where berth runs): the host sees the file.
    let (code, out, err) = d.run_in_ws(&container_run(
        "./data:/data",
        "echo hi > /data/out.txt && cat /data/out.txt",
    ));
    assert_eq!((code, out.trim()), (0, "hi"), "{err}");
    assert_eq!(std::fs::read_to_string(ws.join("data/out.txt")).unwrap(), "hi\n");

    // Read-only: the write fails inside, nothing lands on the host.
    let (code, _, err) = d.run_in_ws(&container_run(
        "data:/data:ro",
        "cat /data/out.txt && echo x > /data/new.txt",
    ));
    assert_ne!(code, 0, "{err}");
    assert!(!ws.join("data/new.txt").exists());
    // The record shows the resolved mount.
    let last = &d.json(&["ps", "--all"])[0];
    let mounts = &last["spec"]["mounts"][0];
    assert_eq!(mounts["target"], "/data", "{last}");
    assert_eq!(mounts["read_only"], true, "{last}");
    let real = std::fs::canonicalize(ws.join("data")).unwrap();
    assert_eq!(mounts["source"], real.to_str().unwrap(), "{last}");
}

#[test]
fn mounts_that_leave_the_workspace_or_cover_the_system_are_refused_in_one_line() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    std::fs::create_dir_all(ws.join("data")).unwrap();
    // What an agent could plant in the workspace: a symlink pointing out.
    std::os::unix::fs::symlink("/etc", ws.join("etc-link")).unwrap();
    let outside = d.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let outside_mount = format!("{}:/data", outside.display());
    let ws_target = format!("data:{}", std::fs::canonicalize(&ws).unwrap().display());
    std::fs::write(ws.join("notes.txt"), "x").unwrap();
    let cases: [(&str, &str); 8] = [
        // A file cannot be pinned (the engine binds directories it is given open).
        ("notes.txt:/data", "is a file"),
        (&outside_mount, "outside the workspace"),
        ("etc-link:/data", "outside the workspace"),
        ("data/../..:/data", "outside the workspace"),
        ("data:data", "must be absolute"),
        ("data:/etc", "system directory"),
        ("data:/usr/local/bin", "system directory"),
        (&ws_target, "workspace's own mount"),
    ];
    for (mount, says) in cases {
        let (code, out, err) = d.run_in_ws(&container_run(mount, "true"));
        assert_eq!(code, 2, "{mount}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{mount}: {err}");
        assert!(err.contains(says), "{mount}: {err}");
    }
    // A host job has nothing to mount.
    let (code, _, err) = d.run_in_ws(&["run", "--runner", "host", "-v", "data:/data", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("container jobs"), "{err}");
    // More than 16 mounts.
    let mut many: Vec<String> = Vec::new();
    for i in 0..17 {
        many.extend(["-v".into(), format!("data:/m{i}")]);
    }
    let mut args = vec!["run", "--runner", "docker", "--image", SANDBOX];
    args.extend(many.iter().map(String::as_str));
    args.extend(["--", "true"]);
    let (code, _, err) = d.run_in_ws(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at most 16"), "{err}");
    // None of them made a job.
    assert_eq!(jobs(&d), 0);
}

/// The exchange race: a background job swaps `data/` with a symlink to a
/// directory outside the workspace (`renameat2(RENAME_EXCHANGE)`, as fast as
/// it can) while 200 container jobs mount `data`. A job either is refused
/// (admission saw the symlink, or the launch found another directory than
/// admission pinned) or reads the workspace's own file: never the outside
/// one. Both other outcomes must occur, or the swapper did not race at all.
#[test]
fn a_mount_swapped_for_a_symlink_by_a_background_job_never_reaches_outside() {
    let d = Daemon::start();
    let ws = d.dir.path().join("ws");
    crate::common::workspace_dir(&ws.join("data"));
    std::fs::write(ws.join("data/marker"), "inside\n").unwrap();
    let outside = d.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let secret = format!("outside-{}", std::process::id());
    std::fs::write(outside.join("marker"), format!("{secret}\n")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("swap")).unwrap();
    std::fs::write(ws.join("swapper.py"), SWAPPER).unwrap();
    let (code, out, err) = d.run_in_ws(&["run", "--detach", "--json", "--", "python3", "swapper.py"]);
    assert_eq!(code, 0, "{out}{err}");
    let swapper = serde_json::from_str::<serde_json::Value>(&out).unwrap()["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (mut inside, mut refused, mut wins) = (0, 0, Vec::new());
    for _ in 0..200 {
        let (code, out, err) = d.run_in_ws(&container_run("data:/data:ro", "cat /data/marker"));
        if out.contains(&secret) || err.contains(&secret) {
            wins.push(format!("{code}: {out}{err}"));
        } else if code == 0 && out.trim() == "inside" {
            inside += 1;
        } else if code == 2 || err.contains("changed since") || err.contains("-v mounts") {
            refused += 1;
        } else {
            panic!("neither inside nor refused: {code}: {out}{err}");
        }
    }
    let (code, _, err) = d.run(&["kill", &swapper]);
    assert_eq!(code, 0, "{err}");
    assert!(wins.is_empty(), "{} of 200 reached outside: {wins:?}", wins.len());
    assert!(
        inside > 0 && refused > 0,
        "the swap did not race: {inside} inside, {refused} refused"
    );
}

/// Swaps `data` and `swap` in the current directory until killed, at
/// random moments up to 50 ms apart: the attacker's pacing, so that either
/// state lasts long enough for an admission to pass and the engine's mount,
/// a few hundred milliseconds later, to find the other.
const SWAPPER: &str = r#"
import ctypes, random, time
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
while True:
    libc.renameat2(AT_FDCWD, b"data", AT_FDCWD, b"swap", RENAME_EXCHANGE)
    time.sleep(random.uniform(0, 0.05))
"#;
