//! Recovery when a manager starts: read the instance's runs back from the
//! store so that `ps --all`, `logs` and `events` keep working across
//! restarts, and settle runs that a dead manager left `running`.
//!
//! A run whose owner (manager pid + start time) is still alive belongs to
//! another manager of the instance (e.g. a `berth run` beside the daemon) and
//! is left alone. A run whose owner is dead is reaped: what is left of it is
//! killed — a host process group only when its leader still has the recorded
//! start time, so a reused pid is never signalled; a container by its labels —
//! and it is marked `lost` with the reason. In recovery mode `adopt` a dead
//! manager's containers are followed on instead, except those a session
//! owned (`spec.owner`): the session died with its manager, and its jobs
//! with it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{Inner, JobEntry, Live, Manager, number};
use crate::config::Recovery;
use crate::error::Result;
use crate::model::JobStatus;
use crate::output::JobOutput;
use crate::procinfo;
use crate::runner::docker::Adoption;
use crate::store::RunRow;
use crate::watch::Watchers;

/// How long taking over may spend removing what dead managers left.
const SWEEP_LIMIT: Duration = Duration::from_secs(15);

pub(super) fn load(inner: &Arc<Inner>) -> Result<()> {
    let rows = inner.store.runs()?;
    missing_records(inner, &rows);
    let mut highest = 0;
    for mut row in rows {
        let Some(n) = number(&row.info.id) else { continue };
        highest = highest.max(n);
        if row.info.status.is_active() {
            if procinfo::owner_alive(&row.owner) && row.owner != inner.owner {
                continue; // another live manager's job
            }
            // A job owned by a session (an MCP client attached to the dead
            // manager) lived no longer than that session, which died with
            // its manager: it is reaped, not adopted, so no job is left
            // running that no live session can end.
            // A job with a scoped engine too: its socket died with the
            // manager that served it.
            let scoped = row.info.spec.engine == Some(crate::model::EngineAccess::Scoped);
            if inner.config.recovery == Recovery::Adopt
                && row.info.container_id.is_some()
                && row.info.spec.owner.is_none()
                && !scoped
            {
                // Settled by `adopt_orphans` once this manager owns the instance.
                inner.orphans.lock().unwrap().push(row);
                continue;
            }
            reap(inner, &mut row);
        }
        // An ended run's record may say its output went further than the
        // store has it (held in memory when its manager stopped or died).
        let last_seq = inner.store.last_seq(&row.info.id)?.max(row.info.last_seq);
        insert_finished(inner, n, row, last_seq);
    }
    inner.ids.ensure_above(highest)?;
    super::finished::trim(inner);
    Ok(())
}

/// Jobs whose output directory exists but whose record the store does not
/// have: a store that lost its latest writes (its `-wal` file removed, then
/// a crash) would otherwise drop them without a word. Said as the store's
/// notice (`/v1/health`, `berth up`, `berth doctor`). A directory younger
/// than two seconds may be a job another manager is starting right now.
fn missing_records(inner: &Inner, rows: &[RunRow]) {
    let known: std::collections::HashSet<&str> = rows.iter().map(|r| r.info.id.as_str()).collect();
    let jobs = inner.config.instance_dir().join("jobs");
    let settled = |e: &std::fs::DirEntry| {
        e.metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > Duration::from_secs(2)))
    };
    let mut missing: Vec<String> = std::fs::read_dir(&jobs)
        .into_iter()
        .flatten()
        .flatten()
        .filter(settled)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|id| id.starts_with("job-") && !known.contains(id.as_str()))
        .collect();
    if missing.is_empty() {
        return;
    }
    missing.sort_by_key(|id| number(&crate::model::JobId::from(id.as_str())));
    let shown = match missing.len() {
        n if n > 5 => format!("{} … {} ({n} jobs)", missing[..3].join(", "), missing[n - 1]),
        _ => missing.join(", "),
    };
    inner.store.add_notice(format!(
        "the store has no record of {shown}, though their output directories remain in {}: its latest writes were lost (was its -wal file removed before a crash?); their raw logs are still there",
        jobs.display()
    ));
}

/// Put an ended run into the registry; its output is read from the store.
fn insert_finished(inner: &Arc<Inner>, n: u64, mut row: RunRow, last_seq: u64) {
    row.info.last_seq = last_seq;
    let dir = inner.job_dir(&row.info.id);
    let output = JobOutput::finished(
        row.info.id.clone(),
        &dir,
        inner.events.clone(),
        inner.store.clone(),
        last_seq,
    );
    let entry = JobEntry {
        status_tx: watch::channel(row.info.status.clone()).0,
        mode_tx: watch::channel(row.info.start_mode).0,
        pid_start: row.pid_start_time,
        info: row.info,
        output,
        live: None,
        ready_seen: true,
    };
    inner.registry.lock().unwrap().jobs.insert(n, entry);
}

/// Kill what is left of an orphaned run and mark it lost (now owned by this
/// manager, which settled it).
fn reap(inner: &Arc<Inner>, row: &mut RunRow) {
    let owner_pid = procinfo::parse_owner(&row.owner).map(|(p, _)| p).unwrap_or(0);
    row.owner = inner.owner.clone();
    let reason = match &row.info.spec.owner {
        Some(session) => format!("its manager (pid {owner_pid}) died, and with it its session {session}"),
        None => format!("its manager (pid {owner_pid}) died"),
    };
    if row.info.spec.engine == Some(crate::model::EngineAccess::Scoped) {
        let n = inner.engine.remove_children_blocking(&row.info.id);
        tracing::debug!(job = %row.info.id, children = n, "removed the children of a reaped job");
    }
    crate::teardown::reap_run(
        row,
        &reason,
        |cid| inner.engine.remove_container_blocking(cid),
        &inner.store,
        &inner.events,
    );
}

impl Manager {
    /// Take the instance over from managers that died: in recovery mode
    /// `adopt`, follow the containers a dead manager left running,
    /// continuing their output from the last stored line (a container that
    /// is gone, or cannot be followed, is reaped as `lost`); then remove
    /// whatever else dead managers left on the engine, labelled with this
    /// instance and state dir (their jobs' and pauses' containers,
    /// networks), which their records may not name (a create that landed
    /// late, a watchdog killed with its daemon). Call once this manager owns
    /// the instance (after binding its socket), before serving.
    pub async fn adopt_orphans(&self) -> Result<Vec<crate::model::JobId>> {
        let adopted = self.adopt().await?;
        let keep: Vec<String> = {
            let reg = self.inner.registry.lock().unwrap();
            adopted
                .iter()
                .filter_map(|id| reg.get(id).ok()?.info.container_id.clone())
                .collect()
        };
        let sweep = self.inner.engine.remove_dead_owners(&keep, !keep.is_empty());
        match tokio::time::timeout(SWEEP_LIMIT, sweep).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                removed = n,
                "removed containers that managers which died left behind"
            ),
            Err(_) => tracing::warn!(
                "the engine did not answer the sweep of dead managers' containers within {SWEEP_LIMIT:?}"
            ),
        }
        // Host jobs the same way, by their tag (no record needed).
        let killed = tokio::task::spawn_blocking({
            let config = self.inner.config.clone();
            move || crate::teardown::reap_tagged(&config)
        })
        .await
        .unwrap_or(0);
        if killed > 0 {
            tracing::info!(killed, "killed host jobs that managers which died left running");
        }
        Ok(adopted)
    }

    async fn adopt(&self) -> Result<Vec<crate::model::JobId>> {
        let inner = &self.inner;
        let orphans = std::mem::take(&mut *inner.orphans.lock().unwrap());
        let mut adopted = Vec::new();
        for mut row in orphans {
            let id = row.info.id.clone();
            let Some(n) = number(&id) else { continue };
            let last_seq = inner.store.last_seq(&id)?;
            let stored = inner.store.line_counts(&id)?;
            let watchers = Watchers::new(&row.info.spec.watch).unwrap_or_default();
            let output = inner.job_output(&id, watchers, last_seq + 1)?;
            // Its project's allowlist for its egress proxy (the manager's
            // own when the project is gone).
            let project = match inner.projects.resolve(&row.info.spec) {
                Ok(p) => p,
                // A spec without a caller directory gets the manager's own.
                Err(_) => inner.projects.resolve(&crate::model::JobSpec::default())?,
            };
            let cwd = row
                .info
                .spec
                .cwd
                .clone()
                .unwrap_or_else(|| project.config.workspace.clone());
            let adoption = Adoption {
                container_id: row.info.container_id.clone().unwrap_or_default(),
                stored,
                ports: row.info.ports.clone(),
                limits: row.info.limits.clone(),
                allow: crate::net::Allowlist::parse(&project.config.egress_allow).unwrap_or_default(),
                on_denial: super::reporters::egress_reporter(inner, &id, &row.info.spec, &project, &cwd),
            };
            match inner.engine.adopt(&id, &output, adoption).await {
                Ok(launched) => {
                    let (stop_tx, stop_rx) = tokio::sync::mpsc::unbounded_channel();
                    let mut spec = row.info.spec.clone();
                    // Nobody waits in the foreground for it any more.
                    spec.background = true;
                    // Said in every answer about it (the exec tool set's `recovered`).
                    row.info.recovered = true;
                    // Forwarded again: a host port taken meanwhile was replaced.
                    row.info.ports = launched.ports.clone();
                    {
                        let entry = JobEntry {
                            status_tx: watch::channel(JobStatus::Running).0,
                            mode_tx: watch::channel(row.info.start_mode).0,
                            pid_start: None,
                            info: row.info.clone(),
                            output,
                            live: Some(Live {
                                stop_tx,
                                // Beyond the cap (lowered across the restart)
                                // it runs on without one.
                                slot: inner.slots.clone().try_acquire_owned().ok(),
                                control: Some(launched.control.clone()),
                                internal_ip: launched.internal_ip,
                                children: None,
                                safety: project.safety.clone(),
                            }),
                            ready_seen: true,
                        };
                        inner.registry.lock().unwrap().jobs.insert(n, entry);
                        // Recorded as this manager's now.
                        let _ = inner.commit(&id, |_| Ok(()));
                    }
                    // No second `started`: the job started once, under the
                    // manager that died; its record says `recovered`.
                    tracing::info!(job = %id, "adopted a running container");
                    super::supervise::spawn_guarded(
                        inner,
                        &id,
                        super::supervise::supervise(inner.clone(), id.clone(), spec, launched, stop_rx),
                    );
                    adopted.push(id);
                }
                Err(e) => {
                    tracing::warn!(job = %id, error = %e, "could not adopt; reaping");
                    reap(inner, &mut row);
                    insert_finished(inner, n, row, last_seq);
                }
            }
        }
        Ok(adopted)
    }
}
