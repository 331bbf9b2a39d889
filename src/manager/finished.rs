//! Finished jobs cost O(1) memory each, and only the newest few cost any:
//! at most [`IN_MEMORY`] finished jobs stay in the registry (their record,
//! about 2 KiB, and an output handle holding their ~1.5 KiB snippet); those
//! that ended earlier are let go and read back from the store when asked
//! for (`info`, `logs`, `ps --all`, `resume`, `kill` answering
//! `already_finished`, `prune`). Their output was in the store already
//! (a finished job's ring is let go when its output ends), so nothing a
//! reader sees changes; only where it comes from.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::watch;

use super::{Inner, ListFilter, Manager, number};
use crate::error::{Error, Result};
use crate::model::{JobId, JobInfo, JobStatus, StartMode};
use crate::output::JobOutput;

/// Finished jobs kept in memory; older ones are read from the store.
pub const IN_MEMORY: usize = 256;

/// Let the finished jobs that ended earliest go, beyond [`IN_MEMORY`].
/// (The one that just ended is the latest: never it.)
pub(super) fn trim(inner: &Inner) {
    let mut reg = inner.registry.lock().unwrap();
    let mut finished: Vec<_> = reg
        .jobs
        .iter()
        .filter(|(_, e)| e.info.status.is_terminal() && e.live.is_none())
        .map(|(n, e)| (e.info.ended_at.unwrap_or(e.info.created_at), *n))
        .collect();
    if finished.len() <= IN_MEMORY {
        return;
    }
    finished.sort_unstable();
    let extra = finished.len() - IN_MEMORY;
    for (_, n) in finished.into_iter().take(extra) {
        reg.jobs.remove(&n);
    }
    inner.let_go.fetch_add(extra, Ordering::SeqCst);
}

impl Inner {
    /// True when some finished jobs are only in the store.
    pub(super) fn some_let_go(&self) -> bool {
        self.let_go.load(Ordering::SeqCst) > 0
    }

    /// The record of a finished job that is only in the store (its end may
    /// still be on its way there: the writer is waited for once).
    pub(super) fn stored(&self, id: &JobId) -> Result<JobInfo> {
        let unknown = || Error::UnknownJob(id.to_string());
        if !self.some_let_go() || number(id).is_none() {
            return Err(unknown());
        }
        let mut run = self.store.run(id)?;
        if run.is_none() {
            self.store.flush();
            run = self.store.run(id)?;
        }
        run.map(|r| r.info)
            .filter(|i| i.status.is_terminal())
            .ok_or_else(unknown)
    }

    /// The output of a finished job that is only in the store.
    pub(super) fn stored_output(&self, info: &JobInfo) -> Arc<JobOutput> {
        JobOutput::finished(
            info.id.clone(),
            &self.job_dir(&info.id),
            self.events.clone(),
            self.store.clone(),
            info.last_seq,
        )
    }

    /// Watchers of a finished job that is only in the store: they say its
    /// end at once.
    pub(super) fn stored_watchers(
        &self,
        info: &JobInfo,
    ) -> (watch::Receiver<JobStatus>, watch::Receiver<StartMode>) {
        (
            watch::channel(info.status.clone()).1,
            watch::channel(info.start_mode).1,
        )
    }

    /// Finished runs only in the store, skipping those `in_memory` says are
    /// in the registry: what `list` and `prune` add to the registry's.
    pub(super) fn stored_finished(&self, in_memory: impl Fn(u64) -> bool) -> Vec<JobInfo> {
        if !self.some_let_go() {
            return Vec::new();
        }
        self.store.flush();
        match self.store.runs() {
            Ok(rows) => rows
                .into_iter()
                .map(|r| r.info)
                .filter(|i| i.status.is_terminal() && number(&i.id).is_some_and(|n| !in_memory(n)))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "could not read finished runs from the store");
                Vec::new()
            }
        }
    }
}

impl Manager {
    /// Every job that `filter` admits, oldest first (finished jobs let go
    /// of memory are read from the store).
    pub fn list(&self, filter: ListFilter) -> Vec<JobInfo> {
        let mut jobs: Vec<JobInfo> = {
            let reg = self.inner.registry.lock().unwrap();
            reg.jobs
                .values()
                .filter(|e| filter.admits(&e.info.status))
                .map(|e| reg.snapshot(e))
                .collect()
        };
        if filter != ListFilter::Running && self.inner.some_let_go() {
            let listed: std::collections::BTreeSet<u64> = jobs.iter().filter_map(|j| number(&j.id)).collect();
            let stored = self
                .inner
                .stored_finished(|n| listed.contains(&n) || self.in_registry(n));
            jobs.extend(stored.into_iter().filter(|i| filter.admits(&i.status)));
            jobs.sort_by_key(|j| number(&j.id).unwrap_or(0));
        }
        jobs
    }

    pub(super) fn in_registry(&self, n: u64) -> bool {
        self.inner.registry.lock().unwrap().jobs.contains_key(&n)
    }
}
