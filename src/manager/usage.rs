//! CPU and memory of running jobs, sampled only when a caller asks
//! (`ps --usage`, `?usage=true`, MCP `usage: true`, a job's card).
//!
//! Why a cache: a container's stats take the engine about a second to
//! answer, so lists answer from the records and usage is an opt-in column.
//! Samples are taken for all asked jobs at once and kept for [`FRESH`], so a
//! second list in a row (a TUI refresh, two clients) costs nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{ListFilter, Manager};
use crate::error::Result;
use crate::model::{JobId, JobInfo, NodeLoad, RunnerKind, Usage};

/// How long a sample is reused.
pub const FRESH: Duration = Duration::from_secs(2);

/// Recent samples by job.
#[derive(Default)]
pub(crate) struct UsageCache(Mutex<HashMap<JobId, (Instant, Option<Usage>)>>);

impl UsageCache {
    fn get(&self, id: &JobId) -> Option<Option<Usage>> {
        let map = self.0.lock().unwrap();
        map.get(id)
            .filter(|(at, _)| at.elapsed() < FRESH)
            .map(|(_, u)| u.clone())
    }

    fn put(&self, id: &JobId, u: Option<Usage>) {
        let mut map = self.0.lock().unwrap();
        map.retain(|_, (at, _)| at.elapsed() < FRESH);
        map.insert(id.clone(), (Instant::now(), u));
    }
}

impl Manager {
    /// `info` with live resource usage for running jobs.
    pub async fn info_with_usage(&self, id: &JobId) -> Result<JobInfo> {
        let mut info = self.read_info(id).await?;
        info.usage = self.usage(&info).await;
        Ok(info)
    }

    /// `list` with live resource usage for running jobs, sampled concurrently.
    pub async fn list_with_usage(&self, filter: ListFilter) -> Vec<JobInfo> {
        let mut infos = self.list(filter);
        self.fill_usage(&mut infos).await;
        infos
    }

    /// Sample the running jobs among `infos` (concurrently) into their `usage`.
    pub async fn fill_usage(&self, infos: &mut [JobInfo]) {
        let samples = futures_util::future::join_all(infos.iter().map(|i| self.usage(i))).await;
        for (info, u) in infos.iter_mut().zip(samples) {
            info.usage = u;
        }
    }

    /// The nodes of the runners this manager's running jobs use, with what
    /// they hold (a swarm's; none for one engine or the host). Asks no
    /// engine when no running job is on a swarm.
    pub async fn nodes(&self) -> Result<Vec<NodeLoad>> {
        let on_swarm = self
            .list(ListFilter::Running)
            .iter()
            .any(|j| j.runner == Some(RunnerKind::Swarm));
        match on_swarm {
            true => self.inner.runner(RunnerKind::Swarm).nodes().await,
            false => Ok(Vec::new()),
        }
    }

    async fn usage(&self, info: &JobInfo) -> Option<Usage> {
        if !info.status.is_active() {
            return None;
        }
        if let Some(u) = self.inner.usage_cache.get(&info.id) {
            return u;
        }
        let u = match info.runner {
            Some(kind) => self.inner.runner(kind).usage(info).await,
            None => None,
        };
        self.inner.usage_cache.put(&info.id, u.clone());
        u
    }
}
