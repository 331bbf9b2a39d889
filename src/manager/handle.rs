//! [`JobHandle`]: a started job, with shortcuts to the manager's calls for
//! it (its record, its readiness, its end, its output, its stop).

use std::time::Duration;

use super::{KillOutcome, KillRequest, Manager};
use crate::error::Result;
use crate::model::{JobId, JobInfo};
use crate::output::{LogPage, LogQuery};
use crate::ready::{ReadyCondition, WaitOutcome};

/// A started job, with shortcuts to the manager's per-job calls.
#[derive(Clone)]
pub struct JobHandle {
    pub id: JobId,
    pub(super) manager: Manager,
}

impl std::fmt::Debug for JobHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHandle").field("id", &self.id).finish()
    }
}

impl JobHandle {
    pub fn info(&self) -> Result<JobInfo> {
        self.manager.info(&self.id)
    }
    /// The host port published for the job's port `port`.
    pub fn host_port(&self, port: u16) -> Option<u16> {
        self.info()
            .ok()?
            .ports
            .iter()
            .find(|m| m.port == port)
            .map(|m| m.host_port)
    }
    pub async fn wait(&self, conditions: &[ReadyCondition], timeout: Duration) -> Result<WaitOutcome> {
        self.manager.wait(&self.id, conditions, timeout).await
    }
    /// Wait until the job has ended and all its output is in.
    pub async fn wait_end(&self) -> Result<JobInfo> {
        self.manager.wait_end(&self.id).await
    }
    pub fn logs(&self, query: &LogQuery) -> Result<LogPage> {
        self.manager.logs(&self.id, query)
    }
    /// Every output line so far (both streams, in seq order), as text,
    /// read page by page.
    pub fn output_lines(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let mut since = 1;
        loop {
            let page = self.logs(&LogQuery {
                since: Some(since),
                ..Default::default()
            })?;
            out.extend(page.lines.into_iter().map(|l| l.text));
            if !page.has_more {
                return Ok(out);
            }
            since = page.next_seq;
        }
    }
    pub async fn kill(&self) -> Result<KillOutcome> {
        self.manager.kill(&self.id, KillRequest::default()).await
    }
}
