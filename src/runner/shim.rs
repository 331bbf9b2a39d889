//! The host-job shim: `berth __shim -- CMD…`, the leader of every host job's
//! process group, and a child subreaper (`PR_SET_CHILD_SUBREAPER`).
//!
//! Why: a process group does not hold a job. `setsid -f sleep 301` or a
//! double fork leaves the group and, once its parent exits, is re-parented to
//! init — out of reach of `killpg`, holding the job's output pipe open. As a
//! subreaper the shim becomes the parent of every such orphan instead, so the
//! job's whole tree is always "the shim and its descendants", findable by a
//! walk of `/proc` ([`descendants`]).
//!
//! The shim runs the command in its own group, reaps every child, forwards
//! SIGTERM/SIGINT/SIGHUP/SIGQUIT to descendants that left the group (the group
//! already got the signal from `killpg`), and when the command ends it ends
//! what is left of the tree (TERM, a short grace, KILL), then exits as the
//! command did: same code, or death by the same signal. The manager's hard kill
//! ([`kill_tree`]) kills the descendants before the shim so none is orphaned,
//! and the crash watchdog does the same for a dead manager's jobs.
//!
//! No `unsafe`: signals are taken with `signal-hook`'s iterator (handlers
//! and a self-pipe, no blocked mask, which the command would inherit; caught
//! signals go back to their default in the command at exec), and the shim
//! dies by the command's signal with `emulate_default_handler`.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// The hidden subcommand that runs the shim.
pub const SUBCOMMAND: &str = "__shim";
/// The shim's process name (`comm`) once its command runs.
pub const RUNNING_NAME: &std::ffi::CStr = c"berth-shim";
/// How long leftovers get after SIGTERM once the command has ended.
const LEFTOVER_GRACE: Duration = Duration::from_millis(300);
/// How long killing a tree may take before giving up (a fork bomb outrunning us).
const KILL_LIMIT: Duration = Duration::from_secs(2);
/// Signals the shim takes itself.
const HANDLED: [Signal; 5] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Set once this executable was made to serve berth's helpers (`berth::embed::helpers`).
static SERVED_HERE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on this executable, re-run with [`SUBCOMMAND`], is the shim
/// (and, with `watchdog`, the crash watchdog): `berth::embed::helpers`.
pub fn serve_from_this_executable() {
    SERVED_HERE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`serve_from_this_executable`] was called.
pub fn served_from_this_executable() -> bool {
    SERVED_HERE.load(std::sync::atomic::Ordering::Relaxed)
}

/// The berth binary that runs the shim: this process when it is `berth`
/// (the CLI, the daemon) or serves berth's helpers (an embedding program
/// called `berth::embed::helpers`), else `BERTH_SHIM_EXE`, else a `berth` next to this
/// executable's directory (cargo's test layout: `target/debug/deps/x` →
/// `target/debug/berth`). `None` for an embedder with no berth binary: host
/// jobs then run as a plain process group, without escape protection.
pub fn executable() -> Option<&'static Path> {
    static EXE: OnceLock<Option<PathBuf>> = OnceLock::new();
    EXE.get_or_init(|| {
        let own = std::env::current_exe().ok();
        if let Some(own) = &own
            && (served_from_this_executable() || own.file_stem().is_some_and(|n| n == "berth"))
        {
            return Some(own.clone());
        }
        if let Some(p) = std::env::var_os("BERTH_SHIM_EXE").map(PathBuf::from)
            && p.is_file()
        {
            return Some(p);
        }
        let sibling = own?.parent()?.parent()?.join("berth");
        if sibling.is_file() {
            return Some(sibling);
        }
        tracing::warn!(
            "no berth binary found for the host-job shim: host jobs run without escape protection"
        );
        None
    })
    .as_deref()
}

/// How the command ended.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ended {
    Code(i32),
    Signal(Signal),
}

/// Entry point for `berth __shim -- CMD ARGS…` (`args` excludes the subcommand).
/// Never returns normally: exits with the command's status.
pub fn main(args: Vec<OsString>) -> ! {
    // `layer` and `read-only` jobs: their workspace mounted in a namespace
    // of their own, while this process is still single-threaded.
    let (mount, args) = super::host_mounts::WorkspaceMount::parse(&args);
    if let Some(m) = mount
        && let Err(e) = m.enter()
    {
        eprintln!("berth: could not mount the job's workspace in a namespace of its own: {e}");
        std::process::exit(125);
    }
    let argv: Vec<OsString> = match args.first().map(|a| a == "--") {
        Some(true) => args[1..].to_vec(),
        _ => args.to_vec(),
    };
    let Some(program) = argv.first().cloned() else {
        eprintln!("berth: {SUBCOMMAND}: no command given");
        std::process::exit(2);
    };
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        // Without it escapees cannot be collected; the job still runs, grouped.
        eprintln!("berth: could not become a child subreaper ({e}); escaped processes may outlive this job");
    }
    // Registered before the command starts, so its SIGCHLD cannot be missed.
    let mut signals = match signal_hook::iterator::Signals::new(HANDLED.map(|s| s as i32)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("berth: could not take signals: {e}");
            std::process::exit(126);
        }
    };
    let child = match std::process::Command::new(&program).args(&argv[1..]).spawn() {
        Ok(c) => c,
        Err(e) => {
            let name = program.to_string_lossy();
            let (msg, code) = spawn_failure(&e);
            eprintln!("berth: {name}: {msg}");
            std::process::exit(code);
        }
    };
    // `spawn` returned, so the command has been exec'd: say so to the manager.
    let _ = nix::sys::prctl::set_name(RUNNING_NAME);
    let cmd = Pid::from_raw(child.id() as i32);
    let own_group = nix::unistd::getpgrp();
    let ended = 'wait: loop {
        for sig in signals.wait() {
            match Signal::try_from(sig) {
                Ok(Signal::SIGCHLD) => {
                    if let Some(ended) = reap(Some(cmd)) {
                        break 'wait ended;
                    }
                }
                Ok(sig) => forward(sig, own_group),
                Err(_) => {}
            }
        }
    };
    end_tree(std::process::id() as i32);
    exit_as(ended)
}

/// What a shell says, and its exit code, when a command cannot start.
pub fn spawn_failure(e: &std::io::Error) -> (String, i32) {
    match e.kind() {
        std::io::ErrorKind::NotFound => ("command not found".into(), 127),
        std::io::ErrorKind::PermissionDenied => ("permission denied (not executable)".into(), 126),
        _ => (e.to_string(), 126),
    }
}

/// Reap every child that has ended; the command's status if it was among them.
fn reap(cmd: Option<Pid>) -> Option<Ended> {
    let mut ended = None;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if Some(pid) == cmd => ended = Some(Ended::Code(code)),
            Ok(WaitStatus::Signaled(pid, sig, _)) if Some(pid) == cmd => ended = Some(Ended::Signal(sig)),
            Ok(WaitStatus::StillAlive) | Err(_) => return ended,
            Ok(_) => {}
        }
    }
}

/// Pass a stop signal on to descendants that left the shim's process group
/// (the group itself got it already from the manager's `killpg`).
fn forward(sig: Signal, own_group: Pid) {
    for pid in descendants(std::process::id() as i32) {
        if nix::unistd::getpgid(Some(Pid::from_raw(pid))).is_ok_and(|g| g != own_group) {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }
}

/// The command has ended: TERM what is left of the tree, give it a moment,
/// then KILL the rest; reap everything.
fn end_tree(root: i32) {
    // No child at all means no descendant either: an orphan anywhere below
    // is re-parented to the shim (the subreaper), so a live tree always has
    // a child here. The common case, a command that left nothing, then ends
    // without walking `/proc` (~1 ms on a busy machine).
    if waitpid(None, Some(WaitPidFlag::WNOHANG)) == Err(nix::errno::Errno::ECHILD) {
        return;
    }
    let left = live_descendants(root);
    if left.is_empty() {
        reap(None);
        return;
    }
    for pid in &left {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + LEFTOVER_GRACE;
    while Instant::now() < deadline {
        reap(None);
        if live_descendants(root).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_descendants(root);
    reap(None);
}

/// Die the way the command died, so the manager sees the same status.
fn exit_as(ended: Ended) -> ! {
    match ended {
        Ended::Code(c) => std::process::exit(c),
        Ended::Signal(sig) => {
            // The command may have dumped core; the shim must not add a second one.
            let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
            let _ = signal_hook::low_level::emulate_default_handler(sig as i32);
            // std's own SIGSEGV/SIGBUS handler resets to the default and
            // returns on the first raise; the second one terminates.
            let _ = nix::sys::signal::raise(sig);
            let _ = nix::sys::signal::raise(sig);
            // A signal whose default is not to terminate: report it as a shell would.
            std::process::exit(128 + sig as i32)
        }
    }
}

/// One process's parent and state, read from `/proc/PID/stat`.
fn stat(pid: i32) -> Option<(i32, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after `(comm)`, which may itself hold spaces and parentheses.
    let rest = text.rsplit_once(')')?.1;
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((ppid, state))
}

/// Wait until the shim `pid` runs its command (it renames itself then) or has
/// ended, so that a started job's process exists when `launch` returns.
///
/// Polled on a blocking thread every 100 µs for the first 50 ms (the shim
/// usually gets there in 1–2 ms; tokio's timer would round each poll up to
/// a millisecond or two, on every host job's start), then every 2 ms, for
/// at most 5 s.
pub async fn started(pid: i32) {
    let want = RUNNING_NAME.to_str().unwrap_or_default();
    let poll = move || {
        let begun = Instant::now();
        loop {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return;
            };
            let comm = stat
                .split_once('(')
                .and_then(|(_, r)| r.rsplit_once(')'))
                .map(|(c, _)| c);
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next());
            let waited = begun.elapsed();
            if comm == Some(want) || matches!(state, Some("Z" | "X")) || waited >= Duration::from_secs(5) {
                return;
            }
            std::thread::sleep(if waited < Duration::from_millis(50) {
                Duration::from_micros(100)
            } else {
                Duration::from_millis(2)
            });
        }
    };
    let _ = tokio::task::spawn_blocking(poll).await;
}

/// Every process below `root` (children, their children, …), zombies included.
pub fn descendants(root: i32) -> Vec<i32> {
    tree(root).into_iter().map(|(pid, _)| pid).collect()
}

fn live_descendants(root: i32) -> Vec<i32> {
    tree(root)
        .into_iter()
        .filter(|(_, state)| *state != 'Z' && *state != 'X')
        .map(|(pid, _)| pid)
        .collect()
}

fn tree(root: i32) -> Vec<(i32, char)> {
    let mut children: HashMap<i32, Vec<(i32, char)>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some((ppid, state)) = stat(pid) {
            children.entry(ppid).or_default().push((pid, state));
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &(c, state) in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            out.push((c, state));
            todo.push(c);
        }
    }
    out
}

/// SIGKILL every live descendant of `root`, again and again until none is
/// left: one killed mid-fork leaves a child that is re-parented to the
/// subreaper and found on the next pass. Bounded by [`KILL_LIMIT`].
pub fn kill_descendants(root: i32) -> usize {
    let deadline = Instant::now() + KILL_LIMIT;
    let mut killed = 0;
    loop {
        let left = live_descendants(root);
        if left.is_empty() || Instant::now() >= deadline {
            return killed;
        }
        for pid in left {
            if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Hard-kill a host job: every descendant of its shim first (so none is
/// orphaned away from the subreaper), then the shim's whole process group.
pub fn kill_tree(shim: i32) {
    kill_descendants(shim);
    let _ = nix::sys::signal::killpg(Pid::from_raw(shim), Signal::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_failures_map_like_a_shell() {
        let nf = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(spawn_failure(&nf).1, 127);
        let pd = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(spawn_failure(&pd).1, 126);
    }

    #[test]
    fn descendants_finds_grandchildren() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 3017 & wait"])
            .spawn()
            .unwrap();
        let root = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(5);
        while descendants(root).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let found = descendants(root);
        assert_eq!(found.len(), 1, "{found:?}");
        kill_tree(root);
        let _ = kill(Pid::from_raw(root), Signal::SIGKILL);
        let _ = child.wait();
        assert!(live_descendants(root).is_empty());
    }
}
