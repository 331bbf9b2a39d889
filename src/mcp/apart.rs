//! Sessions apart: what one agent's session may do to jobs it did not start.
//!
//! One manager serves the CLI (the user), the TUI and every agent's MCP
//! session. The user acts on every job; an agent is one party among
//! several, and another project's agent (or the user's own dev server) is
//! not its to stop or read. So an MCP session **acts** (kill, copy_out,
//! resume, background) only on jobs it started, and **reads** (status,
//! logs, wait, list) only jobs of its own project (its workspace) or its
//! own — unless the user's own config says `agent_all_jobs = true`. A
//! refusal is `not_yours` (API 403) and names the rule.

use std::path::{Path, PathBuf};

use super::core::Core;
use crate::error::{Error, Result};
use crate::model::{JobId, JobInfo, JobSpec};

/// What a refusal says of the rule and the way round it.
const ACT_RULE: &str = "an agent acts only on jobs its own session started; the user may (berth kill, or set agent_all_jobs = true in your own config)";
const READ_RULE: &str = "an agent reads only jobs of its own project; the user may (berth logs, or set agent_all_jobs = true in your own config)";

impl Core {
    /// Every job is this session's to act on and read (the user said so).
    fn all_jobs(&self) -> bool {
        self.manager.config().agent_all_jobs
    }

    /// This session started `info`.
    fn started(&self, info: &JobInfo) -> bool {
        info.spec.owner.as_deref() == Some(self.session.owner.as_str())
    }

    /// This session's project's workspace.
    fn workspace(&self) -> Option<PathBuf> {
        let mut probe = JobSpec::default();
        self.session.claim(&mut probe);
        self.manager
            .project_for(&probe)
            .ok()
            .map(|p| p.config.workspace.clone())
    }

    fn visible_in(&self, info: &JobInfo, workspace: Option<&Path>) -> bool {
        self.started(info) || (workspace.is_some() && info.workspace.as_deref() == workspace)
    }

    /// `info` is a job of this session's project (or its own).
    pub fn visible(&self, info: &JobInfo) -> bool {
        self.all_jobs() || self.visible_in(info, self.workspace().as_deref())
    }

    /// Which jobs' events this session may read (`events` `all: true`
    /// widens to these, not to every session's): the project is looked up
    /// once for all the events of one answer.
    pub fn event_reader(&self) -> impl Fn(&JobId) -> bool + '_ {
        let all = self.all_jobs();
        let ws = (!all).then(|| self.workspace()).flatten();
        move |id| {
            all || self
                .manager
                .info(id)
                .is_ok_and(|info| self.visible_in(&info, ws.as_deref()))
        }
    }

    /// Keep the jobs of `jobs` this session may see (lists).
    pub fn keep_visible(&self, jobs: &mut Vec<JobInfo>) {
        if self.all_jobs() {
            return;
        }
        let ws = self.workspace();
        jobs.retain(|j| self.visible_in(j, ws.as_deref()));
    }

    /// Refuse unless this session started `id` (kill, copy_out, resume, background).
    pub async fn may_act(&self, id: &JobId) -> Result<()> {
        if self.all_jobs() {
            return Ok(());
        }
        let info = self.manager.read_info(id).await?;
        if self.started(&info) {
            return Ok(());
        }
        Err(Error::NotYours {
            job: id.to_string(),
            rule: ACT_RULE,
        })
    }

    /// Refuse unless `id` is of this session's project (status, logs, wait).
    pub async fn may_read(&self, id: &JobId) -> Result<()> {
        if self.all_jobs() {
            return Ok(());
        }
        let info = self.manager.read_info(id).await?;
        if self.visible(&info) {
            return Ok(());
        }
        Err(Error::NotYours {
            job: id.to_string(),
            rule: READ_RULE,
        })
    }
}
