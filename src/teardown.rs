//! Where a manager's life ends, so that nothing outlives berth.
//!
//! - **Clean exit.** A serving manager (the daemon, or `berth mcp` hosting
//!   the instance) serves until [`signals`], `berth down` or its own end,
//!   then `daemon::Daemon::serve` tears down: `Manager::shutdown` stops every
//!   job (grace, then kill; containers removed), closes the MCP sessions and
//!   removes the socket. The last `Manager` handle dropped kills whatever
//!   still runs (`TeardownGuard` in `manager/mod.rs`).
//! - **Crash.** The watchdog process (`watchdog.rs`) outlives a manager that
//!   died, removes its containers by label, then reaps each of its runs with
//!   [`reap_run`]; a manager starting later reaps the runs a dead one left
//!   with the same function (`manager/recover.rs`), then whatever dead
//!   managers left that no record names: containers by label, host jobs by
//!   tag ([`reap_tagged`]).

use crate::events::EventLog;
use crate::model::JobStatus;
use crate::procinfo;
use crate::store::{RunRow, Store};

/// Kill what is left of a dead manager's run and record it `lost`: its host
/// process tree (the shim's descendants, escapees included, then its group;
/// only when the leader still has the recorded start time, so a reused pid
/// is never signalled), its container through `remove_container` (which
/// says whether there was one), then the record, derived from the status,
/// and the run's one `ended` event. `why` starts the reason (e.g. `its
/// manager (pid 42) died`); what was found is added to it.
pub fn reap_run(
    row: &mut RunRow,
    why: &str,
    remove_container: impl FnOnce(&str) -> bool,
    store: &Store,
    events: &EventLog,
) {
    let mut found = Vec::new();
    if let (Some(pgid), Some(start)) = (row.pgid, row.pid_start_time)
        && procinfo::is_same_process(pgid as u32, start)
    {
        crate::runner::shim::kill_tree(pgid);
        found.push(format!("killed its process group {pgid}"));
    }
    if let Some(cid) = row.info.container_id.as_deref()
        && remove_container(cid)
    {
        found.push("removed its container".to_string());
    }
    let mut reason = match found.is_empty() {
        true => format!("{why}; the job was gone"),
        false => format!("{why}; {}", found.join(" and ")),
    };
    // Output it held in memory while the store could not write died with
    // the manager: the record says how far it went, so it reads as lost.
    if let Some((seq, store_why)) = store.held_at_death(&row.info.id) {
        let stored = store.last_seq(&row.info.id).unwrap_or(0).max(row.info.last_seq);
        if seq > stored {
            row.info.last_seq = seq;
            reason = match store_why {
                "" => {
                    format!("{reason}; its last lines (to seq {seq}) died with it, before they were stored")
                }
                why => format!(
                    "store unavailable ({why}): the output its manager held in memory was lost; {reason}"
                ),
            };
        }
    }
    let ended = row.info.end(JobStatus::Lost { reason }, chrono::Utc::now());
    store.put_run(row.clone());
    events.emit(row.info.id.clone(), ended);
}

/// Kill the host jobs of `config`'s instance and state dir whose manager
/// is dead, found by their tag (`runner::tag`), records or not: what a
/// store found damaged, or a record that never reached the disk, no longer
/// names. Returns how many job trees were killed.
pub fn reap_tagged(config: &crate::config::Config) -> usize {
    let state = crate::runner::docker::state_hash(&config.state_dir);
    let orphans = crate::runner::tag::orphans(&state, &config.instance);
    for &shim in &orphans {
        crate::runner::shim::kill_tree(shim);
    }
    orphans.len()
}

/// SIGINT, SIGTERM or SIGHUP (the terminal went away): each one a reason
/// to tear down cleanly rather than die with jobs still running. The
/// handlers are in place when this returns, not when the future is first
/// polled: a caller that makes it before starting a job cannot be killed
/// by a signal that lands between the start and its first wait.
pub fn signals() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
    async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = hup.recv() => {}
        }
    }
}
