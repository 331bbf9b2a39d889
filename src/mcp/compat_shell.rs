//! The seed-compatible `--tools shell` set over the same core: `shell_run`,
//! `shell_summary`, `shell_log`, `shell_kill`, `shell_resume` (a shell id is
//! a job id).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{id_de, job_id};
use super::core::{Answer, reply};
use super::format::{self, Dialect};
use super::logs::{self, LogMode, LogRequest};
use super::service::BerthMcp;
use crate::manager::{KillRequest, ListFilter};
use crate::model::{EndedBy, JobSpec};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellRunArgs {
    /// Shell command line (run with sh -c).
    pub command: String,
    /// true: answer at once with the shell_id (use for anything expected to take over 60 s).
    /// `background` is accepted as the same flag.
    #[serde(default, alias = "background")]
    pub run_in_background: bool,
    /// Foreground budget in seconds (default 60); then it moves to the background, never killed.
    pub timeout: Option<f64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellSummaryArgs {
    /// Also list completed shells.
    #[serde(default)]
    pub completed: bool,
    /// Also list failed shells.
    #[serde(default)]
    pub failed: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellLogArgs {
    /// The shell id from shell_run (e.g. "job-3").
    #[serde(deserialize_with = "id_de")]
    #[schemars(with = "String")]
    pub shell_id: String,
    /// tail (default), body (page from cursor) or diagnostic (last 120 lines, both streams).
    pub mode: Option<LogMode>,
    /// Line seq to read from (body mode): the `next_seq` of the previous page.
    pub cursor: Option<u64>,
    /// Same as cursor.
    pub since_seq: Option<u64>,
    /// Lines per page, at most 120 (default 120).
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellIdArgs {
    /// The shell id (e.g. "job-3").
    #[serde(deserialize_with = "id_de")]
    #[schemars(with = "String")]
    pub shell_id: String,
}

#[tool_router(router = shell_router, vis = "pub(super)")]
impl BerthMcp {
    #[tool(
        description = "Run a shell command. Foreground by default: waits up to 60 s (or `timeout`) and answers \
the exit code and capped output; still running then, it moves to the background automatically (answer says \
\"auto background\" and gives the shell_id). Set background: true for anything expected to take longer than \
60 s. The user may also move it to the background at any time."
    )]
    async fn shell_run(&self, Parameters(a): Parameters<ShellRunArgs>) -> CallToolResult {
        let mut spec = JobSpec::shell(a.command);
        spec.background = a.run_in_background;
        spec.timeout = a.timeout.filter(|_| !a.run_in_background);
        reply(async { self.core.run(spec, None, Dialect::Shell).await }.await)
    }

    #[tool(
        description = "Summary of shells: running ones by default (id, status, mode, run time, command); \
completed: true and failed: true add ended ones with their exit code and who ended them (agent, user, system)."
    )]
    async fn shell_summary(&self, Parameters(a): Parameters<ShellSummaryArgs>) -> CallToolResult {
        // As the seed's panel: killed shells sit under FAILED, not COMPLETED.
        let all = self.core.manager.list(ListFilter::All);
        let tab = |j: &&crate::JobInfo| {
            if j.status.is_active() {
                "RUNNING"
            } else if shell_failed(j) {
                "FAILED"
            } else {
                "COMPLETED"
            }
        };
        let mut groups = vec!["RUNNING"];
        if a.completed {
            groups.push("COMPLETED");
        }
        if a.failed {
            groups.push("FAILED");
        }
        let mut text = String::new();
        for name in groups {
            let jobs: Vec<crate::JobInfo> = all.iter().filter(|j| tab(j) == name).cloned().collect();
            text += &format!("{name} ({})\n{}", jobs.len(), format::table(&jobs));
        }
        reply(Ok(Answer::ok(text)))
    }

    #[tool(
        description = "Read a shell's output, paged: mode tail (default, the last lines), body (from `cursor`, \
the next_seq of the previous page) or diagnostic (last 120 lines of stdout+stderr). At most 120 lines per call; \
the answer gives next_seq."
    )]
    async fn shell_log(&self, Parameters(a): Parameters<ShellLogArgs>) -> CallToolResult {
        let req = LogRequest {
            mode: a.mode.unwrap_or_default(),
            since: a.cursor.or(a.since_seq),
            limit: Some(a.limit.unwrap_or(format::MAX_LINES).min(format::MAX_LINES)),
            stream: None,
        };
        reply(logs::answer(
            &self.core.manager,
            &job_id(&a.shell_id),
            &req,
            Dialect::Shell,
        ))
    }

    #[tool(
        description = "Kill a shell (its whole process group). Answers {result: killed|already_finished, reason, \
ended_by}; already_finished says who ended it before (agent, user or system)."
    )]
    async fn shell_kill(&self, Parameters(a): Parameters<ShellIdArgs>) -> CallToolResult {
        reply(
            async {
                let req = KillRequest {
                    ended_by: Some(EndedBy::Agent),
                    ..Default::default()
                };
                let out = self.core.kill(&job_id(&a.shell_id), req).await?;
                let ended_by = out
                    .ended_by
                    .or(out.status.is_failure().then_some(EndedBy::System));
                Ok(Answer::json(&serde_json::json!({
                    "result": out.result,
                    "reason": out.reason,
                    "ended_by": ended_by,
                    "shell_id": out.job,
                    "status": out.status.name(),
                    "exit_code": out.exit_code,
                })))
            }
            .await,
        )
    }

    #[tool(
        description = "Run a finished shell's command again in the background. Answers {result: resumed, \
reason, ended_by, shell_id} with the new shell_id."
    )]
    async fn shell_resume(&self, Parameters(a): Parameters<ShellIdArgs>) -> CallToolResult {
        reply(
            async {
                let old = job_id(&a.shell_id);
                let before = self.core.manager.info(&old)?;
                let job = self.core.resume(&old).await?;
                super::backlog::cover(&self.core.manager, &job);
                Ok(Answer::json(&serde_json::json!({
                    "result": "resumed",
                    "shell_id": job,
                    "reason": format!("{old} ({}) restarted as {job}", format::info_end_words(&before)),
                    "ended_by": serde_json::Value::Null,
                })))
            }
            .await,
        )
    }
}

/// Whether the seed's panel shows a shell under FAILED: a failure or a kill.
pub fn shell_failed(j: &crate::JobInfo) -> bool {
    j.status.is_failure() || matches!(j.status, crate::model::JobStatus::Killed { .. })
}

/// The seed's event metadata `{call_id, shell_id, start_mode, ended_by, exit_code}`
/// for an event line; a natural failure is ended by `system`.
pub fn shell_event_meta(core: &super::core::Core, e: &crate::events::Event) -> Option<String> {
    let info = core.manager.info(&e.job).ok()?;
    let ended = matches!(e.kind, crate::events::EventKind::Ended { .. });
    let ended_by = match &e.kind {
        crate::events::EventKind::Ended { ended_by, .. } => {
            ended_by.or(info.status.is_failure().then_some(EndedBy::System))
        }
        _ => None,
    };
    Some(
        serde_json::json!({
            "call_id": core.call_of(&e.job),
            "shell_id": e.job,
            "start_mode": info.start_mode.to_string(),
            "ended_by": ended_by,
            "exit_code": if ended { info.exit_code } else { None },
        })
        .to_string(),
    )
}
