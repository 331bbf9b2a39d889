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
        let live = {
            let reg = self.inner.registry.lock().unwrap();
            reg.get(id).ok().map(|e| reg.snapshot(e))
        };
        match live {
            Some(mut info) => {
                crate::runner::host_ports::note_listening(&mut info);
                Ok(info)
            }
            None => self.inner.stored(id),
        }
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
        let output = self.output(id)?;
        let query = query.clone();
        let path = self.inner.store.path().to_path_buf();
        tokio::task::spawn_blocking(move || output.read(&query))
            .await
            .unwrap_or_else(|e| {
                Err(Error::Store {
                    path,
                    message: format!("reading the job's output failed: {e}"),
                })
            })
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
