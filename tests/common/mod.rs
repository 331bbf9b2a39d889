//! Helpers shared by the integration tests: isolated managers, polling with
//! a deadline (never a bare sleep), and process inspection through /proc.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use berth::{Config, Manager};

pub mod canary;
pub mod lan;

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

/// The owner a root test process gives its workspaces. A root caller's
/// container jobs run as the workspace's owner (nobody when root owns it,
/// who could not write there), as a user's jobs run as that user.
pub const TEST_OWNER: u32 = 4242;

/// Make `ws` (and parents) as a workspace a job may write in: owned by
/// [`TEST_OWNER`] when the tests run as root.
pub fn workspace_dir(ws: &Path) {
    std::fs::create_dir_all(ws).unwrap();
    if nix::unistd::getuid().is_root() {
        std::os::unix::fs::chown(ws, Some(TEST_OWNER), Some(TEST_OWNER)).unwrap();
    }
}

pub fn manager_with(f: impl FnOnce(Config) -> Config) -> TestManager {
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("ws");
    workspace_dir(&ws);
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

/// Zombie processes whose parent is this test process and that stay
/// unreaped: tests run in parallel in this process, and another test's
/// child (a `berth` or `docker` command) is a zombie for the moment between
/// its exit and its `wait`; a leak is one still there 2 s later.
pub fn my_zombies() -> Vec<u32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut left = zombies_now();
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = zombies_now();
        left.retain(|z| now.contains(z));
    }
    left
}

fn zombies_now() -> Vec<u32> {
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
    // Host runner unless a test asks for Docker: these check process-group semantics.
    cmd.env("BERTH_STATE_DIR", state)
        .env("BERTH_RUNNER", "host")
        .env("BERTH_INSTANCE", instance_name("cli"))
        .env("BERTH_WORKSPACE", state)
        // Beside the workspace, not in it (a container job is refused where
        // the workspace holds the user's config); never written unless a
        // test trusts something.
        .env("BERTH_USER_CONFIG", state.with_extension("user-config.toml"))
        // A daemon a `berth run` starts on demand goes soon after the test.
        .env("BERTH_DAEMON_IDLE", "2")
        .env_remove("BERTH_CONFIG")
        .env_remove("BERTH_LOG");
    cmd
}

/// A `berth daemon` child process with its own instance and state dir,
/// stopped (SIGKILL as a last resort) when dropped.
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub instance: String,
    pub child: std::process::Child,
}

impl Daemon {
    pub fn start() -> Daemon {
        Self::start_with(&[])
    }

    /// Start with extra environment (e.g. `BERTH_GRACE`).
    pub fn start_with(env: &[(&str, &str)]) -> Daemon {
        let dir = tempfile::tempdir().expect("temp dir");
        Self::start_in(dir, env, std::process::Stdio::piped())
    }

    /// Start in `dir` (its `state` and `ws`), with extra environment and
    /// the daemon's stderr going to `stderr`.
    pub fn start_in(dir: tempfile::TempDir, env: &[(&str, &str)], stderr: std::process::Stdio) -> Daemon {
        workspace_dir(&dir.path().join("ws"));
        let instance = instance_name("d");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_berth"));
        cmd.arg("daemon");
        Self::apply_env(&mut cmd, dir.path(), &instance);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn berth daemon");
        let d = Daemon { dir, instance, child };
        d.wait_until_up();
        d
    }

    fn apply_env(cmd: &mut Command, dir: &Path, instance: &str) {
        cmd.env("BERTH_STATE_DIR", dir.join("state"))
            .env("BERTH_INSTANCE", instance)
            .env("BERTH_WORKSPACE", dir.join("ws"))
            .env("BERTH_GRACE", "2")
            .env("BERTH_USER_CONFIG", dir.join("user-config.toml"))
            .env("BERTH_RUNNER", "host")
            .env_remove("BERTH_SOCKET")
            .env_remove("BERTH_CONFIG")
            .env_remove("BERTH_LOG");
    }

    /// A `berth` command aimed at this daemon.
    pub fn cli(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_berth"));
        Self::apply_env(&mut cmd, self.dir.path(), &self.instance);
        cmd
    }

    /// Run a `berth` verb, returning (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        Self::outcome(self.cli().args(args))
    }

    /// [`run`](Self::run) from the workspace (relative paths are its).
    pub fn run_in_ws(&self, args: &[&str]) -> (i32, String, String) {
        Self::outcome(self.cli().current_dir(self.dir.path().join("ws")).args(args))
    }

    fn outcome(cmd: &mut Command) -> (i32, String, String) {
        let o = cmd.output().expect("run berth");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// Run a verb with `--json` and parse its answer.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        // Right after the verb: anything after `--` belongs to the job.
        let mut args = args.to_vec();
        args.insert(1, "--json");
        let (code, out, err) = self.run(&args);
        assert_eq!(code, 0, "berth {args:?} failed: {err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("berth {args:?}: {e}: {out}"))
    }

    /// `berth diff LAYER` lists each of `changes` (`A  path`) and none of
    /// `untouched`; then `berth apply LAYER` succeeds, and the checkout
    /// (`ws`) holds each of `applied` (path, text) and none of `gone`.
    pub fn diff_then_apply(
        &self,
        layer: &str,
        changes: &[&str],
        untouched: &str,
        applied: &[(&str, &str)],
        gone: &str,
    ) {
        let (_, diff, _) = self.run(&["diff", layer]);
        for line in changes {
            assert!(
                diff.lines().any(|l| l.starts_with(line)),
                "{line} missing:\n{diff}"
            );
        }
        assert!(!diff.contains(untouched), "{diff}");
        let (code, out, err) = self.run(&["apply", layer]);
        assert_eq!(code, 0, "{out}{err}");
        let ws = self.dir.path().join("ws");
        for (path, text) in applied {
            assert_eq!(std::fs::read_to_string(ws.join(path)).unwrap(), *text, "{path}");
        }
        assert!(!ws.join(gone).exists(), "{gone} is still there");
    }

    pub fn config(&self) -> berth::Config {
        Config::isolated(self.dir.path().join("state"), &self.instance)
    }

    pub fn socket(&self) -> PathBuf {
        berth::api::socket_path(&self.config())
    }

    /// A daemon answers on the socket (`ps` also succeeds without one, from
    /// the store, and says so: that does not count).
    pub fn answers(&self) -> bool {
        let (code, _, err) = self.run(&["ps"]);
        code == 0 && !err.contains("reading its store")
    }

    fn wait_until_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if self.answers() {
                return;
            }
            assert!(Instant::now() < deadline, "daemon did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait for the daemon process to exit, up to `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
            if self.wait_exit(Duration::from_secs(10)).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

/// How many containers (any state) carry `berth.instance=<instance>`: jobs'
/// and the daemon's pause containers (what must be gone after teardown).
pub fn containers_of(instance: &str) -> usize {
    labelled(&[&format!("berth.instance={instance}")])
}

/// How many job containers (any state) `instance` has: a daemon's idle
/// pause containers, made once a job without ports ended, are not jobs.
pub fn job_containers_of(instance: &str) -> usize {
    labelled(&[&format!("berth.instance={instance}"), "berth.job"])
}

fn labelled(labels: &[&str]) -> usize {
    let mut cmd = Command::new("docker");
    cmd.args(["ps", "-aq"]);
    for l in labels {
        cmd.args(["--filter", &format!("label={l}")]);
    }
    let o = cmd.output().expect("docker CLI");
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).lines().count()
}

/// GET / over HTTP/1.0 on 127.0.0.1:`port`; the whole answer.
pub fn http_get(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(s, "GET / HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// [`http_get`] that says `None` when nothing (or nothing whole) answers.
pub fn try_http_get(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET / HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

/// The small image the container tests run in (a static busybox).
pub const SANDBOX: &str = "berth/sandbox:latest";

/// `spec` as a container job in [`SANDBOX`].
pub fn in_sandbox(spec: berth::JobSpec) -> berth::JobSpec {
    spec.with_runner(berth::RunnerChoice::Docker).with_image(SANDBOX)
}

/// `docker inspect` (container or network) as JSON; None when it does not exist.
pub fn docker_inspect(kind: &str, id: &str) -> Option<serde_json::Value> {
    let o = Command::new("docker")
        .args([kind, "inspect", id])
        .output()
        .expect("docker CLI");
    o.status
        .success()
        .then(|| serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()[0].clone())
}

/// This machine's addresses other than loopback (`ip -o addr`).
pub fn global_addresses() -> Vec<std::net::IpAddr> {
    let o = Command::new("ip")
        .args(["-o", "addr", "show", "scope", "global"])
        .output()
        .expect("ip");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "inet" || *w == "inet6")?;
            words.next()?.split('/').next()?.parse().ok()
        })
        .collect()
}
