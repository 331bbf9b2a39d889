//! The manager's read side: a job's record, its output pages (on the
//! blocking pool for async callers), its snippet and child logs, the event
//! log, and the waits for readiness and for the end. A job the registry no
//! longer holds is read from the store.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Manager;
use crate::error::{Error, Result};
use crate::events::{Event, EventKind};
use crate::model::{JobId, JobInfo, JobStatus, StartMode};
use crate::output::{JobOutput, LogPage, LogQuery};
use crate::ready::{self, ReadyCondition, WaitOutcome};

impl Manager {
    pub(super) fn watchers(
        &self,
        id: &JobId,
    ) -> Result<(watch::Receiver<JobStatus>, watch::Receiver<StartMode>)> {
        {
            let reg = self.inner.registry.lock().unwrap();
            if let Ok(e) = reg.get(id) {
                return Ok((e.status_tx.subscribe(), e.mode_tx.subscribe()));
            }
        }
        Ok(self.inner.stored_watchers(&self.inner.stored(id)?))
    }

    pub fn info(&self, id: &JobId) -> Result<JobInfo> {
        match self.registered(id) {
            Some(info) => Ok(info),
            None => self.inner.stored(id),
        }
    }

    /// The record of a job the registry holds (no store read).
    fn registered(&self, id: &JobId) -> Option<JobInfo> {
        let mut info = {
            let reg = self.inner.registry.lock().unwrap();
            reg.get(id).ok().map(|e| reg.snapshot(e))
        }?;
        crate::runner::host_ports::note_listening(&mut info);
        Some(info)
    }

    /// [`Manager::info`] for async callers: a job the registry holds is
    /// answered at once; one only in the store (an older finished job, or
    /// an unknown id, which waits for the store's writer once) is read on
    /// the blocking pool, so a slow disk or a long page read holding the
    /// store's reader never holds an async worker.
    pub async fn read_info(&self, id: &JobId) -> Result<JobInfo> {
        if let Some(info) = self.registered(id) {
            return Ok(info);
        }
        let (m, id) = (self.clone(), id.clone());
        self.blocking(move || m.inner.stored(&id)).await
    }

    /// [`Manager::snippet`] for async callers, on the blocking pool: the
    /// snippet of a job recovered from an earlier manager, or only in the
    /// store, is read from SQLite.
    pub async fn read_snippet(&self, id: &JobId) -> Result<String> {
        let (m, id) = (self.clone(), id.clone());
        self.blocking(move || m.snippet(&id)).await
    }

    /// Run a read of the store on the blocking pool; a panic in it is a
    /// store error, not a panic of the caller.
    async fn blocking<T: Send + 'static>(
        &self,
        read: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let path = self.inner.store.path().to_path_buf();
        tokio::task::spawn_blocking(read).await.unwrap_or_else(|e| {
            Err(Error::Store {
                path,
                message: format!("reading the store failed: {e}"),
            })
        })
    }

    /// Run `read` (one that may read the store: lists with finished jobs,
    /// records of older jobs) on the blocking pool, for the faces' async
    /// handlers. A panic in it is resumed in the caller, as if called here.
    pub async fn off_worker<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Manager) -> T + Send + 'static,
    ) -> T {
        let m = self.clone();
        off_worker(move || read(&m)).await
    }

    pub fn logs(&self, id: &JobId, query: &LogQuery) -> Result<LogPage> {
        let output = self.output(id)?;
        output.read(query)
    }

    /// [`Manager::logs`] for async callers (the socket API, MCP tools): a
    /// page older than the ring is read from SQLite after the store's
    /// writer flushed, which may wait on the disk, so it runs on the
    /// blocking pool and never holds an async worker.
    pub async fn read_logs(&self, id: &JobId, query: &LogQuery) -> Result<LogPage> {
        // Finding the output may itself read the store (a job only there).
        let (m, id, query) = (self.clone(), id.clone(), query.clone());
        self.blocking(move || m.output(&id)?.read(&query)).await
    }

    /// The last `tail` lines (all, up to 1 MiB, when `None`) of the output
    /// of child `name` of job `id` (a container it started through its
    /// scoped engine), kept with the job while it runs and after.
    pub fn child_logs(&self, id: &JobId, name: &str, tail: Option<usize>) -> Result<Vec<String>> {
        let output = self.output(id)?;
        crate::runner::docker::read_child_log(output.dir(), id.as_str(), name, tail)
    }

    /// The last ~1.5 KiB of a job's output.
    pub fn snippet(&self, id: &JobId) -> Result<String> {
        Ok(self.output(id)?.snippet())
    }

    /// Bytes of output held in memory for a job (bounded by the ring size).
    pub fn ring_bytes(&self, id: &JobId) -> Result<usize> {
        Ok(self.output(id)?.ring_bytes())
    }

    pub(crate) fn output(&self, id: &JobId) -> Result<Arc<JobOutput>> {
        {
            let reg = self.inner.registry.lock().unwrap();
            if let Ok(e) = reg.get(id) {
                return Ok(e.output.clone());
            }
        }
        Ok(self.inner.stored_output(&self.inner.stored(id)?))
    }

    /// Events with `seq >= since`.
    pub fn events(&self, since: u64, limit: usize) -> Vec<Event> {
        self.inner.events.since(since, limit)
    }

    /// Wait until all `conditions` hold, the job ends, or `timeout` passes.
    /// With no conditions, wait for the job to end.
    pub async fn wait(
        &self,
        id: &JobId,
        conditions: &[ReadyCondition],
        timeout: Duration,
    ) -> Result<WaitOutcome> {
        if conditions.is_empty() {
            return self.wait_for_end(id, timeout).await;
        }
        let target = {
            let reg = self.inner.registry.lock().unwrap();
            reg.get(id).ok().map(|e| ready::Target {
                output: e.output.clone(),
                status: e.status_tx.subscribe(),
                ports: e.info.ports.clone(),
                internal_ip: e.live.as_ref().and_then(|l| l.internal_ip),
                relayed: e.info.runner == Some(crate::model::RunnerKind::Docker)
                    && e.live.as_ref().is_some_and(|l| l.internal_ip.is_none()),
                on_host: e.info.runner == Some(crate::model::RunnerKind::Host),
            })
        };
        let target = match target {
            Some(t) => t,
            None => {
                let info = self.inner.stored(id)?;
                ready::Target {
                    output: self.inner.stored_output(&info),
                    status: self.inner.stored_watchers(&info).0,
                    ports: info.ports.clone(),
                    internal_ip: None,
                    relayed: false,
                    on_host: info.runner == Some(crate::model::RunnerKind::Host),
                }
            }
        };
        let outcome = ready::wait(target, conditions, timeout).await?;
        if let WaitOutcome::Ready { elapsed_ms, .. } = &outcome {
            let first = {
                let mut reg = self.inner.registry.lock().unwrap();
                reg.get_mut(id)
                    .is_ok_and(|e| !std::mem::replace(&mut e.ready_seen, true))
            };
            if first && !conditions.is_empty() {
                self.inner.events.emit(
                    id.clone(),
                    EventKind::Ready {
                        elapsed_ms: *elapsed_ms,
                    },
                );
            }
        }
        Ok(outcome)
    }

    /// `wait` with no conditions: until the job ends, or the timeout.
    async fn wait_for_end(&self, id: &JobId, timeout: Duration) -> Result<WaitOutcome> {
        let started = std::time::Instant::now();
        let elapsed_ms = || started.elapsed().as_millis() as u64;
        Ok(match tokio::time::timeout(timeout, self.wait_end(id)).await {
            Ok(info) => {
                let info = info?;
                WaitOutcome::Exited {
                    elapsed_ms: elapsed_ms(),
                    status: info.status.name().into(),
                    exit_code: info.exit_code,
                    reason: info.reason,
                }
            }
            Err(_) => WaitOutcome::TimedOut {
                elapsed_ms: elapsed_ms(),
                pending: vec!["the job to end".into()],
            },
        })
    }

    /// Wait until the job has ended and all its output is in.
    pub async fn wait_end(&self, id: &JobId) -> Result<JobInfo> {
        let (mut status_rx, _) = self.watchers(id)?;
        while !status_rx.borrow_and_update().is_terminal() {
            if status_rx.changed().await.is_err() {
                break;
            }
        }
        self.info(id)
    }
}

/// Run `read` on the blocking pool: reads that may reach SQLite (events
/// older than memory, records and output of finished jobs) never run on an
/// async worker. A panic in `read` goes on in the calling task.
pub async fn off_worker<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(read).await {
        Ok(v) => v,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => panic!("a blocking read was cancelled: {e}"),
        },
    }
}
