//! Helpers shared by the integration tests: isolated managers, polling with
//! a deadline (never a bare sleep), and process inspection through /proc.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use berth::{Config, Manager};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A unique instance name for this test process.
pub fn instance_name(prefix: &str) -> String {
    format!(
        "t{}-{}-{}",
        std::process::id(),
        prefix,
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A manager with its own state dir and workspace.
pub struct TestManager {
    pub manager: Manager,
    pub dir: tempfile::TempDir,
}

impl TestManager {
    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
}

pub fn manager() -> TestManager {
    manager_with(|c| c)
}

pub fn manager_with(f: impl FnOnce(Config) -> Config) -> TestManager {
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let config = Config::isolated(dir.path().join("state"), &instance_name("m"))
        .with_workspace(&ws)
        .with_grace_secs(2.0);
    let manager = Manager::new(f(config)).expect("manager");
    TestManager { manager, dir }
}

/// Poll `check` every 10 ms until it holds or `timeout` passes (then panic with `what`).
pub async fn eventually(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Pids of live (non-zombie) `sleep` processes whose command line contains `token`.
pub fn processes_with(token: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if !cmdline.contains(token) || comm.trim() != "sleep" {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().and_then(|s| s.split_whitespace().next());
        if state != Some("Z") && state.is_some() {
            found.push(pid);
        }
    }
    found
}

/// Zombie processes whose parent is this test process.
pub fn my_zombies() -> Vec<u32> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let mut after = stat.rsplit(')').next().unwrap_or("").split_whitespace();
        let (state, ppid) = (after.next(), after.next());
        if state == Some("Z") && ppid == Some(me.as_str()) {
            found.push(entry.file_name().to_string_lossy().parse().unwrap_or(0));
        }
    }
    found
}

/// A unique `sleep` duration to find a test's processes by command line.
pub fn unique_sleep() -> String {
    format!(
        "{}.{}",
        900 + COUNTER.fetch_add(1, Ordering::SeqCst) % 99,
        std::process::id()
    )
}

/// The `berth` binary with its state confined to `state`.
pub fn berth(state: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_berth"));
    cmd.env("BERTH_STATE_DIR", state)
        .env("BERTH_INSTANCE", instance_name("cli"))
        .env("BERTH_WORKSPACE", state)
        .env_remove("BERTH_CONFIG")
        .env_remove("BERTH_LOG");
    cmd
}
