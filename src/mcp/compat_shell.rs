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
use crate::model::{EndedBy, JobSpec, Outcome};

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
    /// Also list completed shells, and kept-alive ones stopped before their time (STOPPED).
    #[serde(default)]
    pub completed: bool,
    /// Also list failed shells (non-zero exits and killed ones).
    #[serde(default)]
    pub failed: bool,
    /// Most shells in the answer, newest first (default 30, at most 200).
    pub limit: Option<usize>,
    /// Only shells older than this shell_id: the `before` the previous answer gave.
    #[serde(default, deserialize_with = "super::args::opt_id_de")]
    #[schemars(with = "Option<String>")]
    pub before: Option<String>,
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

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellKillArgs {
    /// The shell id (e.g. "job-3").
    #[serde(deserialize_with = "id_de")]
    #[schemars(with = "String")]
    pub shell_id: String,
    /// Why it is killed (kept in its record, its `ended` event and the answer).
    pub reason: Option<String>,
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
completed: true and failed: true add ended ones with their exit code and who ended them (agent, user, system); \
killed shells are under FAILED, except kept-alive ones (keep_alive) stopped before their time: STOPPED, listed with completed. Newest first, 30 at a time: the answer says the `before` to pass for the next page."
    )]
    async fn shell_summary(&self, Parameters(a): Parameters<ShellSummaryArgs>) -> CallToolResult {
        let mut all = self.core.manager.off_worker(|m| m.list(ListFilter::All)).await;
        self.core.keep_visible(&mut all);
        reply(Ok(Answer::ok(summary(&all, &a))))
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
        let id = job_id(&a.shell_id);
        reply(
            async {
                self.core.may_read(&id).await?;
                logs::answer(&self.core.manager, &id, &req, Dialect::Shell).await
            }
            .await,
        )
    }

    #[tool(
        description = "Kill a shell (its whole process group). Answers {result: killed|already_finished, reason, \
ended_by}; already_finished says who ended it before (agent, user or system). `reason` is kept in its record."
    )]
    async fn shell_kill(&self, Parameters(a): Parameters<ShellKillArgs>) -> CallToolResult {
        reply(
            async {
                let req = KillRequest {
                    ended_by: Some(EndedBy::Agent),
                    reason: a.reason,
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
                let before = self.core.manager.read_info(&old).await?;
                let job = self.core.resume(&old).await?;
                super::backlog::cover(&self.core.manager, &job);
                Ok(Answer::json(&serde_json::json!({
                    "result": "resumed",
                    "shell_id": job,
                    "reason": format!("{old} ({}) restarted as {job}", before.end_words()),
                    "ended_by": serde_json::Value::Null,
                })))
            }
            .await,
        )
    }
}

/// Most shells one `shell_summary` answer lists unless asked (`limit`), the
/// most it lists when asked, and the most bytes of table it holds.
const SUMMARY_LIMIT: usize = 30;
const MAX_SUMMARY_LIMIT: usize = 200;
const SUMMARY_BYTES: usize = 6 * 1024;

/// The seed's panel as text: tabs RUNNING, then COMPLETED and STOPPED (a
/// `keep_alive` shell its caller stopped: not a failure) and FAILED when
/// asked, each with its total (grouped by [`crate::JobInfo::outcome`]);
/// one page of the shells in the asked tabs (newest first, older than
/// `before`, at most `limit` and [`SUMMARY_BYTES`]) and the call that
/// reads the next page.
pub fn summary(all: &[crate::JobInfo], a: &ShellSummaryArgs) -> String {
    let id_number = |id: &crate::JobId| {
        id.as_str()
            .strip_prefix("job-")
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let number = |j: &crate::JobInfo| id_number(&j.id);
    let tab = |j: &crate::JobInfo| match j.outcome() {
        Outcome::Active => "RUNNING",
        Outcome::Completed => "COMPLETED",
        Outcome::Stopped => "STOPPED",
        Outcome::Failed => "FAILED",
    };
    let mut tabs = vec!["RUNNING"];
    if a.completed {
        tabs.extend(["COMPLETED", "STOPPED"]);
    }
    if a.failed {
        tabs.push("FAILED");
    }
    let below = a
        .before
        .as_deref()
        .map(|b| id_number(&job_id(b)))
        .filter(|n| *n > 0)
        .unwrap_or(u64::MAX);
    let mut asked: Vec<&crate::JobInfo> = all.iter().filter(|j| tabs.contains(&tab(j))).collect();
    asked.sort_by_key(|j| std::cmp::Reverse(number(j)));
    let limit = a.limit.unwrap_or(SUMMARY_LIMIT).clamp(1, MAX_SUMMARY_LIMIT);
    let mut page: Vec<&crate::JobInfo> = Vec::new();
    let mut bytes = 0;
    let mut more = false;
    for j in asked.iter().filter(|j| number(j) < below) {
        let row = format::table(std::slice::from_ref(*j));
        if page.len() == limit || (bytes + row.len() > SUMMARY_BYTES && !page.is_empty()) {
            more = true;
            break;
        }
        bytes += row.len();
        page.push(j);
    }
    let mut text = String::new();
    for name in &tabs {
        let total = asked.iter().filter(|j| tab(j) == *name).count();
        // Not the seed's own tab: said only when it holds a shell.
        if *name == "STOPPED" && total == 0 {
            continue;
        }
        let rows: Vec<crate::JobInfo> = page
            .iter()
            .filter(|j| tab(j) == *name)
            .map(|j| (*j).clone())
            .collect();
        let shown = if rows.len() < total {
            format!("; {} shown", rows.len())
        } else {
            String::new()
        };
        text += &format!("{name} ({total}{shown})\n{}", format::table(&rows));
    }
    if more && let Some(last) = page.last() {
        let next = serde_json::json!({"completed": a.completed, "failed": a.failed, "before": last.id});
        text += &format!("More (older): `shell_summary` {next}\n");
    }
    text
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
