//! What the scoped-engine tests set up: the wheelhouse (testcontainers for
//! the dev image's Python, fetched once with `pip download`), the project's
//! files, and a `berth` verb run as a container job's caller.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::common::{Daemon, TEST_OWNER};

/// The image the jobs run in (python3, pip, pytest, curl).
pub const DEV: &str = "berth/dev:latest";

/// Containers of `instance` that are some job's children (any state).
pub fn children_of(instance: &str) -> usize {
    let o = Command::new("docker")
        .args(["ps", "-aq", "--filter"])
        .arg(format!("label=berth.instance={instance}"))
        .args(["--filter", "label=berth.parent"])
        .output()
        .expect("docker CLI");
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).lines().count()
}

/// Containers of `instance` (any state): jobs', children, pauses.
pub fn containers_of(instance: &str) -> usize {
    crate::common::containers_of(instance)
}

/// A wheelhouse with testcontainers for the dev image's Python, made once
/// per target dir with `pip download` on this machine (the jobs install
/// from it: a container may have no registry access).
pub fn wheelhouse() -> PathBuf {
    static MADE: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(dir) = made.as_ref() {
        return dir.clone();
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("testcontainers-wheels");
    let ready = dir.join(".complete");
    if !ready.exists() {
        let version = Command::new("docker")
            .args(["run", "--rm", DEV, "python3", "-c"])
            .arg("import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')")
            .output()
            .expect("docker CLI");
        assert!(version.status.success(), "{version:?}");
        let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
        let arch = String::from_utf8_lossy(&Command::new("uname").arg("-m").output().unwrap().stdout)
            .trim()
            .to_string();
        std::fs::create_dir_all(&dir).unwrap();
        let o = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "testcontainers",
                "--only-binary=:all:",
                "-d",
            ])
            .arg(&dir)
            .args(["--python-version", &version])
            .args(["--platform", &format!("manylinux2014_{arch}")])
            .args(["--platform", &format!("manylinux_2_28_{arch}")])
            .args(["--platform", "any"])
            .output()
            .expect("pip");
        assert!(
            o.status.success(),
            "pip download: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::write(&ready, "").unwrap();
    }
    *made = Some(dir.clone());
    dir
}

/// The project's files in `ws`, owned by the user its jobs run as.
pub fn project(ws: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        std::fs::write(ws.join(name), text).unwrap();
    }
    chown_tree(ws);
}

pub fn chown_tree(p: &Path) {
    if !nix::unistd::getuid().is_root() {
        return;
    }
    let _ = std::os::unix::fs::chown(p, Some(TEST_OWNER), Some(TEST_OWNER));
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            chown_tree(&e.path());
        }
    }
}

/// A `berth` verb of `d`'s, run in its workspace as a container job's caller.
pub fn berth_in(d: &Daemon, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut cmd = d.cli();
    cmd.current_dir(d.dir.path().join("ws"))
        .env("BERTH_RUNNER", "docker")
        .env("BERTH_IMAGE", DEV)
        .env("BERTH_TIMEOUT", "300");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.args(args).output().expect("run berth");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
