//! Which of this manager's containers a live job record still claims, and
//! the sweep that removes the rest once the engine answers again after it
//! stopped answering.
//!
//! While the engine is unreachable nothing can be removed: a job that ends
//! then (given up after [`Claims::patience`], or killed) leaves its
//! container behind, and a removal asked meanwhile is refused. When the
//! engine is back, every container labelled with this instance, state dir
//! *and* this manager's owner whose job no live record claims is removed:
//! never by the generic `berth.managed` label, never another manager's, and
//! neither pauses (the pool's) nor scoped children (their job's scope
//! removes them).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::cleanup::remove_if_owned;
use super::ownership::{LABEL_JOB, LABEL_OWNER, LABEL_PAUSE, Ownership};
use super::{BLOCKING_REMOVE_LIMIT, DockerClient, Engine, LABEL_PARENT, remove_container};
use crate::model::JobId;

/// The jobs whose containers berth still follows, and what the sweep needs.
pub struct Claims {
    /// Job id → how many holders (a launch and an adoption never overlap,
    /// but a count keeps a stray second claim from freeing the first).
    jobs: Mutex<BTreeMap<String, usize>>,
    ownership: Ownership,
    /// The `berth.owner` of this manager: only its own containers are swept.
    owner: String,
    /// How long a job's exit waits for an engine that stopped answering
    /// before it is given up (`engine_patience`).
    pub patience: Duration,
}

/// One job's claim on its container, held by its control (so by its live
/// record) and its exit future; the container is unclaimed once both went.
pub struct Claim {
    claims: Arc<Claims>,
    job: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Ok(mut jobs) = self.claims.jobs.lock()
            && let Some(n) = jobs.get_mut(&self.job)
        {
            *n -= 1;
            if *n == 0 {
                jobs.remove(&self.job);
            }
        }
    }
}

impl Claims {
    pub fn new(ownership: Ownership, owner: String, patience: Duration) -> Self {
        Claims {
            jobs: Mutex::default(),
            ownership,
            owner,
            patience,
        }
    }

    /// Claim job `id`'s container until the returned claim is dropped.
    pub fn claim(self: &Arc<Self>, id: &JobId) -> Arc<Claim> {
        if let Ok(mut jobs) = self.jobs.lock() {
            *jobs.entry(id.to_string()).or_default() += 1;
        }
        Arc::new(Claim {
            claims: self.clone(),
            job: id.to_string(),
        })
    }

    fn claimed(&self, job: &str) -> bool {
        self.jobs.lock().map(|j| j.contains_key(job)).unwrap_or(true)
    }

    /// Remove this manager's job containers that no live record claims.
    /// Returns how many were removed.
    pub async fn sweep(&self, docker: &DockerClient) -> usize {
        let mut labels = self.ownership.filters();
        labels.push(format!("{LABEL_OWNER}={}", self.owner));
        labels.push(LABEL_JOB.to_string());
        let Some(list) = super::cleanup::list_labelled(docker, labels).await else {
            return 0;
        };
        let mut removed = 0;
        for c in &list {
            let Some(labels) = c.labels.as_ref() else { continue };
            let job = labels.get(LABEL_JOB).map(String::as_str).unwrap_or_default();
            if labels.contains_key(LABEL_PAUSE) || labels.contains_key(LABEL_PARENT) || self.claimed(job) {
                continue;
            }
            let Some(id) = c.id.as_deref() else { continue };
            tracing::warn!(container = %id, job, "removing a container no job record claims (left while the engine was unreachable)");
            removed += usize::from(remove_container(docker, id).await);
        }
        removed
    }
}

impl Engine {
    /// Force-remove container `id` (a job given up while the engine did not
    /// answer) when its labels say it is this instance's and state dir's;
    /// true once it is removed or gone, false while the engine does not
    /// answer (within [`BLOCKING_REMOVE_LIMIT`]).
    pub async fn remove_if_owned(&self, id: &str) -> bool {
        let attempt = async {
            let docker = self.client().await.ok()?;
            Some(remove_if_owned(docker, id, &self.ownership).await)
        };
        matches!(
            tokio::time::timeout(BLOCKING_REMOVE_LIMIT, attempt).await,
            Ok(Some(true))
        )
    }
}
