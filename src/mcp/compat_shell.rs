//! Seed-compatible tool sets over the same core: `--tools safe_shell` (one
//! `safe_shell` tool: a binary with args, no shell; blocking, keep-alive or
//! background with log files) and `--tools shell` (`shell_run`,
//! `shell_summary`, `shell_log`, `shell_kill`, `shell_resume`; a shell id is a
//! job id).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{id_de, job_id};
use super::core::{Answer, Started, reply};
use super::format::{self, Dialect};
use super::logs::{self, LogMode, LogRequest};
use super::server::BerthMcp;
use super::tools::kill_json;
use crate::error::{Error, Result};
use crate::job::{EndedBy, JobSpec};
use crate::manager::{KillRequest, ListFilter};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SafeShellArgs {
    /// The binary to run (e.g. "./server", "go", "kill"). No shell: put arguments in `args`.
    pub command: String,
    /// Arguments for the command.
    #[serde(default)]
    pub args: Vec<String>,
    /// Stdin data to feed to the process (stdin is closed afterwards).
    pub input: Option<String>,
    /// true: start, detach, answer {pid, stdout, stderr, job_id} with the log file paths. Default false.
    #[serde(default)]
    pub background: bool,
    /// Seconds. Blocking: run, feed input, wait this long, then kill and return the output (for
    /// interactive programs). Background: a time-to-live. 0 or absent: blocking runs wait for the exit.
    pub keep_alive: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellRunArgs {
    /// Shell command line (run with sh -c).
    pub command: String,
    /// true: answer at once with the shell_id (use for anything expected to take over 60 s).
    #[serde(default)]
    pub background: bool,
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

#[tool_router(router = safe_shell_router, vis = "pub(super)")]
impl BerthMcp {
    #[tool(
        description = "Execute one binary safely (no shell: metacharacters are not interpreted). Blocking \
(default): runs, feeds `input`, waits for the exit and returns the exit code and merged stdout/stderr (capped at \
120 lines / 16 KiB). With keep_alive N > 0: runs for N seconds, then kills it and returns the output (interactive \
programs). background: true: starts and detaches at once, answering JSON {pid, stdout, stderr, job_id} where \
stdout/stderr are log file paths to read later."
    )]
    async fn safe_shell(&self, Parameters(a): Parameters<SafeShellArgs>) -> CallToolResult {
        reply(self.safe_shell_answer(a).await)
    }
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
        spec.background = a.background;
        spec.timeout = a.timeout.filter(|_| !a.background);
        reply(async { self.core.run(spec.checked()?, None, Dialect::Shell).await }.await)
    }

    #[tool(
        description = "Summary of shells: running ones by default (id, status, mode, run time, command); \
completed: true and failed: true add ended ones with their exit code and who ended them (agent, user, system)."
    )]
    async fn shell_summary(&self, Parameters(a): Parameters<ShellSummaryArgs>) -> CallToolResult {
        let mut text = String::new();
        let mut groups = vec![("RUNNING", ListFilter::Running)];
        if a.completed {
            groups.push(("COMPLETED", ListFilter::Completed));
        }
        if a.failed {
            groups.push(("FAILED", ListFilter::Failed));
        }
        for (name, filter) in groups {
            let jobs = self.core.manager.list(filter);
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
                Ok(Answer::json(&kill_json(&out)))
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
                let job = self.core.manager.resume(&old).await?;
                self.core.backlog.own(&job.id);
                super::backlog::cover(&self.core.manager, &job.id);
                Ok(Answer::json(&serde_json::json!({
                    "result": "resumed",
                    "shell_id": job.id,
                    "reason": format!("{old} ({}) restarted as {}", format::info_end_words(&before), job.id),
                    "ended_by": serde_json::Value::Null,
                })))
            }
            .await,
        )
    }
}

impl BerthMcp {
    async fn safe_shell_answer(&self, a: SafeShellArgs) -> Result<Answer> {
        if a.command.trim().is_empty() || a.command.contains(char::is_whitespace) {
            return Err(Error::InvalidSpec(format!(
                "`command` is one binary with no spaces (got `{}`); put its arguments in `args`",
                a.command
            )));
        }
        let mut argv = vec![a.command.clone()];
        argv.extend(a.args.iter().cloned());
        let mut spec = JobSpec::argv(argv);
        spec.input = a.input.clone();
        spec.background = a.background;
        let keep = a.keep_alive.filter(|k| *k > 0.0);
        spec.keep_alive = keep;
        if let (Some(k), false) = (keep, a.background) {
            // Blocking with keep-alive: the kill at N s ends it, not the foreground budget.
            spec.timeout = Some(k + self.core.manager.config().grace_secs + 5.0);
        }
        let (info, how) = self.core.start(spec.checked()?, None).await?;
        match how {
            Started::Background(_) => Ok(Answer::json(&serde_json::json!({
                "pid": info.pid,
                "stdout": info.logs.stdout,
                "stderr": info.logs.stderr,
                "job_id": info.id,
            }))),
            Started::Promoted => self.core.promoted(&info, Dialect::SafeShell),
            Started::Finished => {
                let mut text = match info.exit_code {
                    Some(c) => format!("exit code: {c}"),
                    None => "exit code: none".into(),
                };
                text += &format!(
                    " ({}) after {}\n",
                    format::info_end_words(&info),
                    format::duration(&info)
                );
                text += &format::output_block(&self.core.manager, &info.id, Dialect::SafeShell)?;
                Ok(Answer {
                    is_error: info.status.is_failure(),
                    text,
                })
            }
        }
    }
}

/// Validate a spec built by a tool.
pub trait Checked: Sized {
    fn checked(self) -> Result<Self>;
}

impl Checked for JobSpec {
    fn checked(self) -> Result<Self> {
        self.validate()?;
        Ok(self)
    }
}
