//! Jobs that belong to a session: ending an owner's jobs when the owner goes.
//!
//! A job whose spec names an `owner` (an MCP session, `mcp:<id>`) lives no
//! longer than that owner: when the session ends (its client's stdin closes,
//! or the client is killed and its connection drops), every one of its jobs
//! still queued, starting or running is stopped as the system, with the
//! reason given (`session ended`). Jobs of other owners, and jobs with no
//! owner (the CLI's, the TUI's), are left alone. The session's pod (the
//! network namespace its container jobs share, `runner/docker/pod/`)
//! goes with its last job.

use super::{KillRequest, Manager};
use crate::model::{EndedBy, JobId, StopCause};

impl Manager {
    /// Stop every active job owned by `owner` (grace, then kill), with
    /// `ended_by: system` and `reason`; returns once all of them have ended,
    /// with their ids.
    pub async fn end_owner(&self, owner: &str, cause: StopCause) -> Vec<JobId> {
        let ended = self.end_active(Some(owner), cause).await;
        // Its container jobs' shared network (its pod) goes with them, and
        // the volume that mounted its layer (the layer's files stay).
        self.inner.engine.end_pods(owner).await;
        self.inner.engine.forget_owner_layers(owner).await;
        ended
    }

    /// How many jobs are queued, starting or running, whoever owns them.
    pub fn active_jobs(&self) -> usize {
        let reg = self.inner.registry.lock().unwrap();
        reg.jobs.values().filter(|e| e.info.status.is_active()).count()
    }

    /// True while a job of `owner` is queued, starting or running.
    pub fn owns_active(&self, owner: &str) -> bool {
        let reg = self.inner.registry.lock().unwrap();
        reg.jobs
            .values()
            .any(|e| e.info.status.is_active() && e.info.spec.owner.as_deref() == Some(owner))
    }

    /// Stop every active job (of `owner`, or all when `None`) as the system
    /// with `reason`, all at once; returns their ids once all have ended.
    pub(super) async fn end_active(&self, owner: Option<&str>, cause: StopCause) -> Vec<JobId> {
        let ids: Vec<JobId> = {
            let reg = self.inner.registry.lock().unwrap();
            reg.jobs
                .values()
                .filter(|e| e.info.status.is_active())
                .filter(|e| owner.is_none() || e.info.spec.owner.as_deref() == owner)
                .map(|e| e.info.id.clone())
                .collect()
        };
        let kills = ids.iter().map(|id| {
            self.kill(
                id,
                KillRequest {
                    ended_by: Some(EndedBy::System),
                    cause: Some(cause.clone()),
                    ..Default::default()
                },
            )
        });
        for (id, r) in ids.iter().zip(futures_util::future::join_all(kills).await) {
            if let Err(e) = r {
                tracing::warn!(job = %id, owner, error = %e, %cause, "stopping a job failed");
            }
        }
        ids
    }
}
