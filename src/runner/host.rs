//! The host runner: a job is a process tree under a berth shim, in its own
//! process group.
//!
//! Why a process group: `sh -c 'sleep 1000 & sleep 1000'` leaves a grandchild
//! that a kill of the direct child would orphan. Every signal here goes to the
//! group (`killpg`). Why the shim (`shim.rs`): processes that leave the group
//! (`setsid`, double forks) are re-parented to it, a child subreaper, so when
//! the command ends, is killed or times out, they end too, and the pipes they
//! hold close. A hard kill takes the shim's descendants before the shim. After
//! the shim exits, output is drained for at most [`DRAIN_LIMIT`] and the pipes
//! are then closed whatever holds them: a timeout stays a bound and no
//! descriptor outlives the job.
//!
//! `process_group(0)` is set through std (no `pre_exec`), so spawning keeps the
//! fast `posix_spawn`/vfork path. Stdin gets `input` and is then closed, or is
//! `/dev/null`: a job must never hang waiting on a terminal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};

use futures_util::future::BoxFuture;

use super::{Control, JobControl, Launch, Launched, Runner, shim};
use crate::error::{Error, Result};
use crate::model::{AppliedLimits, JobInfo, JobSpec, PortMapping, Usage};
use crate::output::JobOutput;

mod ending;
mod mounts;

/// Without a shim: after the leader exits, how long leftovers get after SIGTERM.
const LEFTOVER_GRACE: Duration = Duration::from_millis(300);
/// After the shim has exited (its tree is gone), how long to wait for the
/// pipes to drain before closing them anyway.
const DRAIN_LIMIT: Duration = Duration::from_millis(500);

/// Signals the process group of a host job (its leader is the shim).
#[derive(Clone, Debug)]
pub struct HostControl {
    pgid: i32,
    /// Set once the shim is reaped: its pid may then belong to a stranger.
    reaped: Arc<AtomicBool>,
}

impl HostControl {
    pub fn pgid(&self) -> i32 {
        self.pgid
    }
    pub fn signal(&self, signal: i32) {
        if self.reaped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(sig) = Signal::try_from(signal) else {
            return;
        };
        if sig == Signal::SIGKILL {
            // Descendants first: killing the shim first would orphan them to init.
            shim::kill_tree(self.pgid);
        } else {
            // ESRCH (group already gone) is the normal end of a race with exit.
            let _ = killpg(Pid::from_raw(self.pgid), sig);
        }
    }
}

impl JobControl for HostControl {
    fn signal(&self, signal: i32) -> BoxFuture<'_, ()> {
        // Off the async workers: a KILL walks `/proc` for the job's
        // descendants and may retry for up to `shim::KILL_LIMIT`.
        let h = self.clone();
        Box::pin(async move {
            if tokio::task::spawn_blocking(move || h.signal(signal))
                .await
                .is_err()
            {
                tracing::warn!(signal, "signalling a host job failed (its thread panicked)");
            }
        })
    }

    fn kill_now(&self) {
        HostControl::signal(self, Signal::SIGKILL as i32);
    }
}

/// Jobs as process groups on this machine, tagged with the manager's tag
/// (see [`super::tag`]) so that a later manager can tell its own.
pub struct HostRunner {
    tag: String,
}

impl HostRunner {
    pub fn new(tag: String) -> HostRunner {
        HostRunner { tag }
    }
}

impl Runner for HostRunner {
    fn launch<'a>(&'a self, job: &'a Launch<'a>) -> BoxFuture<'a, Result<Launched>> {
        Box::pin(async move {
            let mount = mounts::for_job(job.spec, &job.config.workspace, job.layer)?;
            launch(job.spec, job.cwd, job.output, &self.tag, mount).await
        })
    }

    fn usage<'a>(&'a self, info: &'a JobInfo) -> BoxFuture<'a, Option<Usage>> {
        let pgid = info.pid.map(|p| p as i32);
        // Reading /proc is blocking file work: off the async workers.
        Box::pin(async move {
            tokio::task::spawn_blocking(move || usage(pgid?))
                .await
                .ok()
                .flatten()
        })
    }
}

/// Check that `program` can be started, as a shell would before running it:
/// not found is 127, found but not executable is 126 (a distinct message).
fn check_program(program: &str, cwd: &Path, path_var: Option<&str>) -> Result<()> {
    let candidates: Vec<PathBuf> = if program.contains('/') {
        vec![cwd.join(program)]
    } else {
        let path_var = path_var
            .map(str::to_string)
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        path_var
            .split(':')
            .map(|d| {
                if d.is_empty() {
                    cwd.to_path_buf()
                } else {
                    cwd.join(d)
                }
            })
            .map(|d| d.join(program))
            .collect()
    };
    let mut not_executable = None;
    for c in candidates {
        if c.is_file() {
            if nix::unistd::access(&c, nix::unistd::AccessFlags::X_OK).is_ok() {
                return Ok(());
            }
            not_executable.get_or_insert(c);
        } else if c.is_dir() && program.contains('/') {
            not_executable.get_or_insert(c);
        }
    }
    match not_executable {
        Some(path) => Err(Error::NotExecutable {
            program: program.to_string(),
            path,
        }),
        None => Err(Error::CommandNotFound {
            program: program.to_string(),
        }),
    }
}

/// Start `spec` as a host process group writing into `output`, tagged
/// `tag` (see [`super::tag`]).
pub async fn launch(
    spec: &JobSpec,
    cwd: &Path,
    output: &Arc<JobOutput>,
    tag: &str,
    mount: Option<super::host_mounts::WorkspaceMount>,
) -> Result<Launched> {
    let argv = spec.effective_argv();
    let program = argv[0].clone();
    if !cwd.is_dir() {
        return Err(Error::BadCwd { path: cwd.into() });
    }
    // Released when the job has ended (the exit future below holds it).
    let (ports, reservation) = super::host_ports::pick(spec)?;
    let env = environment(spec, &ports, tag);
    check_program(&program, cwd, env.get("PATH").map(String::as_str))?;

    let shim_exe = shim::executable();
    let mut child = spawn(
        command(shim_exe, &argv, cwd, &env, spec.input.is_some(), mount.as_ref()),
        &program,
    )?;
    let pid = child.id().expect("a just-spawned child has a pid");
    if shim_exe.is_some() {
        shim::started(pid as i32).await;
    }
    let control = HostControl {
        pgid: pid as i32,
        reaped: Arc::new(AtomicBool::new(false)),
    };
    let pumps = match ending::Pumps::start(&mut child, output) {
        Ok(pumps) => pumps,
        Err(e) => {
            control.signal(Signal::SIGKILL as i32);
            return Err(e);
        }
    };
    // Dropped when the leader exits; a keep-alive job holds stdin open until then.
    let (exited_tx, exited_rx) = tokio::sync::oneshot::channel::<()>();
    feed_input(&mut child, spec, exited_rx);
    let exit = Box::pin(ending::observe(
        child,
        control.clone(),
        shim_exe.is_some(),
        pumps,
        exited_tx,
        reservation,
    ));
    Ok(Launched {
        sweep: None,
        engine: None,
        node: None,
        pid: Some(pid),
        container_id: None,
        ports,
        limits: not_enforced(spec),
        internal_ip: None,
        control: Control::new(control),
        exit,
    })
}

/// The job's environment on top of berth's own: line-buffered output
/// (unless set already), its ports, the spec's, and the manager's tag last.
fn environment(spec: &JobSpec, ports: &[PortMapping], tag: &str) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in super::LINE_BUFFERED {
        if std::env::var_os(k).is_none() {
            env.insert(k.to_string(), v.to_string());
        }
    }
    if let Some(first) = ports.first() {
        env.insert("PORT".into(), first.host_port.to_string());
    }
    for m in ports {
        env.insert(format!("BERTH_PORT_{}", m.port), m.host_port.to_string());
    }
    if spec.write == Some(crate::model::WriteMode::Layer) {
        for (k, v) in super::LAYER_POLLING {
            if std::env::var_os(k).is_none() {
                env.insert(k.to_string(), v.to_string());
            }
        }
    }
    env.extend(spec.env.clone());
    // After the spec's: a job cannot pass for another manager's.
    env.insert(super::tag::TAG_VAR.into(), tag.into());
    env
}

/// The command that starts the job: under the shim when there is one, in
/// a process group of its own, stdin piped only to deliver input.
fn command(
    shim_exe: Option<&Path>,
    argv: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
    has_input: bool,
    mount: Option<&super::host_mounts::WorkspaceMount>,
) -> Command {
    let mut cmd = match shim_exe {
        Some(exe) => {
            let mut c = Command::new(exe);
            c.arg(shim::SUBCOMMAND);
            if let Some(m) = mount {
                c.args(m.args());
            }
            c.arg("--").args(argv);
            c
        }
        None => {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
    };
    cmd.current_dir(cwd)
        .envs(env)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if has_input { Stdio::piped() } else { Stdio::null() })
        .kill_on_drop(false);
    cmd
}

/// Spawn the command; a program that is not there is `CommandNotFound`.
fn spawn(mut cmd: Command, program: &str) -> Result<Child> {
    cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::CommandNotFound {
            program: program.to_string(),
        },
        _ => Error::Spawn {
            program: program.to_string(),
            source: e,
        },
    })
}

/// Write the job's input to its stdin, then close it, or under keep-alive
/// once the leader exited (`exited` is dropped then).
fn feed_input(child: &mut Child, spec: &JobSpec, exited: tokio::sync::oneshot::Receiver<()>) {
    if let (Some(mut stdin), Some(input)) = (child.stdin.take(), spec.input.clone()) {
        // Interactive programs (REPLs, `cat`) quit on end of input; under
        // keep-alive they must see the input and stay up until the timer ends
        // them, which bounds how long stdin stays open.
        let hold_open = spec.keep_alive.is_some();
        tokio::spawn(async move {
            // A job that exits without reading its input is not an error.
            let _ = stdin.write_all(input.as_bytes()).await;
            let _ = stdin.flush().await;
            if hold_open {
                let _ = exited.await;
            }
            drop(stdin);
        });
    }
}

/// The limits a host job asked for, each noted as not enforced.
fn not_enforced(spec: &JobSpec) -> AppliedLimits {
    let mut limits = AppliedLimits::default();
    if spec.limits.cpus.is_some() {
        limits
            .not_enforced
            .push("cpus: the host runner does not limit CPU".into());
    }
    if spec.limits.memory.is_some() {
        limits
            .not_enforced
            .push("memory: the host runner does not limit memory".into());
    }
    if spec.limits.pids.is_some() {
        limits
            .not_enforced
            .push("pids: the host runner does not limit processes".into());
    }
    limits
}

/// Memory (RSS) of every process in the group `pgid`, and CPU % since each
/// process started, read from /proc.
pub fn usage(pgid: i32) -> Option<crate::model::Usage> {
    let page = 4096u64;
    let ticks = 100f64; // USER_HZ on Linux
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let (mut rss, mut cpu) = (0u64, 0f64);
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the `(comm)`, which may itself contain spaces.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] = state (field 3), so field N is f[N - 3].
        if f.len() < 22 || f[2].parse::<i32>().ok() != Some(pgid) {
            continue;
        }
        found = true;
        let utime: f64 = f[11].parse().unwrap_or(0.0);
        let stime: f64 = f[12].parse().unwrap_or(0.0);
        let start: f64 = f[19].parse::<f64>().unwrap_or(0.0) / ticks;
        let rss_pages: u64 = f[21].parse().unwrap_or(0);
        rss += rss_pages * page;
        let alive = (uptime - start).max(0.01);
        cpu += (utime + stime) / ticks / alive * 100.0;
    }
    found.then_some(crate::model::Usage {
        cpu_percent: (cpu * 10.0).round() / 10.0,
        memory_bytes: rss,
    })
}
