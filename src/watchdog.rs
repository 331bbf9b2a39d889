//! The crash watchdog: a small process of its own that outlives its manager
//! and cleans up after a manager that died without tearing down (SIGKILL, OOM,
//! a panic that aborted).
//!
//! The manager starts it (`berth watchdog --owner PID:START`, in its own
//! process group so a signal to the manager's group does not reach it). It
//! checks every [`POLL`] whether the manager still runs — by pid *and* start
//! time, so a reused pid is not mistaken for it. When the manager is gone
//! (and its pid file still names it: a manager that ended cleanly removed
//! it, and one that a new manager replaced is the new one's to settle) it
//! removes the containers labelled with that owner (and those of dead owners
//! it adopted, see [`cleanup`]), kills the host jobs' trees
//! (the shim leading each recorded process group, its descendants and group;
//! again only where the leader still has its recorded start time), marks those runs
//! `lost`, sweeps the owner's containers again over the next ~12 s (requests
//! the manager sent just before dying land late, see [`LATE_SWEEPS`]), and exits. In
//! recovery mode `adopt` it first gives a new manager [`ADOPT_WINDOW`] to take
//! the instance over, and stands down if one does.

use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use crate::config::{Config, Recovery};
use crate::error::{Error, Result};
use crate::procinfo;
use crate::store::Store;

/// The subcommand that runs the watchdog (`berth watchdog --owner PID:START`),
/// dispatched by `berth::embed::helpers`.
pub const SUBCOMMAND: &str = "watchdog";
/// How often the manager's life is checked.
pub const POLL: Duration = Duration::from_millis(200);
/// In `adopt` mode, how long a new manager gets to take over.
pub const ADOPT_WINDOW: Duration = Duration::from_secs(3);
/// Pauses before sweeping the dead manager's containers again. A request it
/// sent just before dying (a container create, a pause container being made)
/// may reach the engine after the first sweep listed the containers, and
/// leave a container nobody starts or removes. The engine answers such a
/// request within moments, even a busy one within seconds, so later sweeps
/// catch it (testcontainers' reaper likewise waits before pruning).
const LATE_SWEEPS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(3),
    Duration::from_secs(8),
];

/// Start `berth ARGS…` detached for `config`'s instance: its own process
/// group (a Ctrl+C or a signal to the caller's group does not reach it), no
/// stdin, output appended to `<instance>/<log>` (capped and rotated by the
/// child, see [`crate::logfile`]).
pub fn spawn_berth(config: &Config, args: &[&str], log: &str) -> Result<std::process::Child> {
    let dir = config.instance_dir();
    crate::store::private::own_dir(&dir).map_err(|e| Error::io("create state directory", &dir, e))?;
    let log_path = dir.join(log);
    let log = crate::store::private::open(std::fs::OpenOptions::new().create(true).append(true), &log_path)
        .map_err(|e| Error::io("open", &log_path, e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("find own executable", "berth", e))?;
    std::process::Command::new(exe)
        .args(args)
        // The child logs there itself, capped and rotated (`logfile.rs`);
        // its stderr is the file too until it does.
        .arg("--log-file")
        .arg(&log_path)
        .env("BERTH_INSTANCE", &config.instance)
        .env("BERTH_STATE_DIR", &config.state_dir)
        .env("BERTH_WORKSPACE", &config.workspace)
        .env("BERTH_RECOVERY", config.recovery.as_str())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| Error::io("open", &log_path, e))?)
        .stderr(log)
        .spawn()
        .map_err(|e| Error::io("start", format!("berth {}", args.join(" ")), e))
}

/// Start the watchdog for this process (the manager of `config.instance`).
pub fn spawn(config: &Config) -> Result<u32> {
    let child = spawn_berth(
        config,
        &[SUBCOMMAND, "--owner", &procinfo::owner_label()],
        "watchdog.log",
    )?;
    // Reaped by whoever outlives whom; never waited for here on purpose.
    let pid = child.id();
    std::mem::forget(child);
    Ok(pid)
}

/// The watchdog process: wait for `owner` to die, then clean up after it.
pub async fn run(config: Config, owner: String) -> Result<()> {
    let (pid, start) = procinfo::parse_owner(&owner).ok_or_else(|| Error::InvalidValue {
        what: "owner",
        input: owner.clone(),
        message: "expected PID:START_TIME".into(),
    })?;
    while procinfo::is_same_process(pid, start) {
        tokio::time::sleep(POLL).await;
    }
    // A manager that ended cleanly removed its pid file on the way out (its
    // jobs were stopped, its containers removed); one that another manager
    // replaced is that manager's to settle. Only a crash leaves its pid.
    let pid_file = config.instance_dir().join("daemon.pid");
    if std::fs::read_to_string(&pid_file).map_or(true, |p| p.trim() != pid.to_string()) {
        return Ok(());
    }
    let lock = config.instance_dir().join("daemon.lock");
    if config.recovery == Recovery::Adopt && taken_over(&lock, &pid_file, pid, ADOPT_WINDOW).await {
        crate::logfile::say(&format!(
            "berth watchdog: manager {owner} died; a new manager took over (adopt): standing down"
        ));
        return Ok(());
    }
    // The engine is swept again below even when the records could not be
    // (a store gone or damaged): what the dead manager left running, or a
    // network still in use at the first sweep, must not outlive it.
    let cleaned = match cleanup(&config, &owner).await {
        Ok(done) => done,
        Err(e) => format!("its records could not be settled ({e})"),
    };
    // Said before the late sweeps: whoever reads the log meanwhile (a
    // user, a test playing a late request) knows the first sweep is done.
    crate::logfile::say(&format!(
        "berth watchdog: manager {owner} is gone: {cleaned}; sweeping again for ~12 s"
    ));
    let engine = crate::runner::docker::Engine::new(&config);
    let mut late = 0;
    for pause in LATE_SWEEPS {
        tokio::time::sleep(pause).await;
        late += engine.remove_owned(&owner, !served(&lock)).await;
    }
    crate::logfile::say(&format!(
        "berth watchdog: manager {owner} died; {cleaned}, {late} more later"
    ));
    Ok(())
}

/// Another manager holds the instance lock now (it serves the instance:
/// its networks are not the dead one's to sweep).
fn served(lock: &std::path::Path) -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(lock)
        .is_ok_and(|f| f.try_lock().is_err())
}

/// True when a new manager took the instance over within `window`: it
/// holds the lock **and** published its own pid. The lock alone is not
/// enough: another watchdog's `served` probe or a reader holds it for a
/// moment, and standing down on that left a crash nobody cleaned up.
async fn taken_over(lock: &std::path::Path, pid_file: &std::path::Path, dead: u32, window: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + window;
    loop {
        let new_pid = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok())
            .filter(|&p| p != dead && std::path::Path::new(&format!("/proc/{p}")).exists());
        if new_pid.is_some() && served(lock) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Remove `owner`'s containers, kill its process groups, mark its runs lost.
pub async fn cleanup(config: &Config, owner: &str) -> Result<String> {
    let engine = crate::runner::docker::Engine::new(config);
    let served = served(&config.instance_dir().join("daemon.lock"));
    let mut containers = engine.remove_owned(owner, !served).await;
    // A container this manager adopted still names the dead manager that
    // started it (labels cannot change): every container of the instance
    // whose owner is no live manager goes too, as a new manager would
    // remove it (a live one's, e.g. a `berth run` beside, stays).
    // Once another manager serves, the networks (and pauses) are its own.
    containers += engine.remove_dead_owners(&[], served).await;
    // Not checked for damage: repairing is the next manager's (or `berth
    // doctor`'s) business, not a cleanup's.
    let store = Store::open_unchecked(&config.instance_dir().join("berth.db"))?;
    let events = crate::events::EventLog::with_store(store.clone())?;
    let mut reaped = 0;
    for mut row in store
        .runs()?
        .into_iter()
        .filter(|r| r.owner == owner && r.info.status.is_active())
    {
        // Its containers went by label above: none is left to find.
        let why = format!("its manager ({owner}) died and the crash watchdog cleaned up");
        crate::teardown::reap_run(&mut row, &why, |_| false, &store, &events);
        reaped += 1;
    }
    store.settle();
    store.flush();
    // Host jobs whose record never reached the store, by their tag.
    let tagged = crate::teardown::reap_tagged(config);
    Ok(format!(
        "removed {containers} container(s), reaped {reaped} run(s), killed {tagged} untracked host job(s)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new manager is one that holds the lock and published its own pid;
    /// a lock held for a moment by anyone else (another watchdog's probe, a
    /// reader) is no takeover, and the dead manager's own pid file neither.
    #[tokio::test]
    async fn only_a_new_manager_with_its_pid_published_is_a_takeover() {
        let dir = tempfile::tempdir().unwrap();
        let (lock, pid_file) = (dir.path().join("daemon.lock"), dir.path().join("daemon.pid"));
        let window = Duration::from_millis(300);
        let dead = 999_999;
        let held = std::fs::File::create(&lock).unwrap();
        held.lock().unwrap();
        std::fs::write(&pid_file, dead.to_string()).unwrap();
        assert!(
            !taken_over(&lock, &pid_file, dead, window).await,
            "a probe's lock"
        );
        // This test's process stands for the new manager: alive, not `dead`.
        std::fs::write(&pid_file, std::process::id().to_string()).unwrap();
        assert!(taken_over(&lock, &pid_file, dead, window).await);
        held.unlock().unwrap();
        assert!(!taken_over(&lock, &pid_file, dead, window).await, "no lock held");
    }
}
