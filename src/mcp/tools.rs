//! The canonical tools: `run`, `status`, `list`, `logs`, `wait`,
//! `wait_for_port`, `kill`, `resume`, `background`, `events`, `run_test`,
//! `run_build`, `copy_out`. Each parses its arguments and calls the core; the
//! descriptions are written for a model: when to use the tool, what comes
//! back, what to do next.

use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};

use super::args::{
    CopyOutArgs, EventsArgs, IdArgs, KillArgs, ListArgs, LogsArgs, ProjectArgs, RunArgs, WaitArgs,
    WaitForPortArgs, job_id,
};
use super::core::{Answer, off_worker, reply};
use super::format::{self, Dialect};
use super::logs::{self, LogRequest};
use super::project::{ProjectTask, append_args, project_command};
use super::service::BerthMcp;
use crate::config::DEFAULT_WAIT_SECS;
use crate::error::Result;
use crate::manager::{DEFAULT_LIST_LIMIT, KillOutcome, KillRequest, ListFilter};
use crate::model::{EndedBy, JobSpec};
use crate::ready::WaitOutcome;

const RUN: &str = "Run a command as a job. Foreground (default): waits up to `timeout` seconds (default 60) and \
answers with the exit code and the output (capped at 120 lines / 16 KiB; the answer says how to read the rest). \
A command still running then is moved to the background, not killed: the answer gives its job id, its card and \
its output so far (at most 120 lines). \
Use background: true for servers, watchers and anything long: the answer comes at once with the job id, \
each published port as a URL (ports: [\"3000\"] → http://127.0.0.1:PORT) and the log file paths. \
Add `ready` (e.g. {\"http\": \"/\"} or {\"log\": \"Listening\"}) to answer only once the server is ready, or with \
the reason it never became ready. Add `watch` regexes to be told in later answers when a line matches. \
Next: `logs` to read output, `wait` to wait for readiness or the end, `kill` to stop it. \
The job belongs to this session: it is stopped when the session ends. A few jobs (`max_jobs`, default 3) run at once on this berth \
instance, whoever started them (other agents, the CLI); `queue: true` waits for a free slot.";

#[tool_router(router = canonical_router, vis = "pub(super)")]
impl BerthMcp {
    #[tool(description = RUN)]
    async fn run(&self, Parameters(a): Parameters<RunArgs>) -> CallToolResult {
        let timeout = a.timeout;
        reply(async { self.core.run(a.spec()?, timeout, Dialect::Canonical).await }.await)
    }

    #[tool(
        description = "Show one job's card: status, runner, ports as URLs, why it is in the background, \
CPU and memory use, its log files, and its last lines of output. Use it to check on a job; then `logs` for more output."
    )]
    async fn status(&self, Parameters(a): Parameters<IdArgs>) -> CallToolResult {
        reply(self.status_answer(&a.id).await)
    }

    #[tool(
        description = "List jobs as a compact table: id, status (with exit code and who ended it), runner, mode, \
ports as URLs, run time and command. Shows running jobs by default; filter: completed, failed or all. \
Newest first, 50 at a time: pass `before` (the last id shown) for the next page, `limit` for more or fewer. \
Lists this project's jobs (yours, other sessions', the CLI's): the cap on running jobs is shared with every project. \
usage: true adds CPU/memory of running jobs (takes about a second)."
    )]
    async fn list(&self, Parameters(a): Parameters<ListArgs>) -> CallToolResult {
        let filter: ListFilter = a.filter.map(Into::into).unwrap_or_default();
        reply(Ok(self
            .list_answer(filter, a.usage, a.limit, a.before.as_deref())
            .await))
    }

    #[tool(
        description = "Read a job's output (stdout and stderr merged in order; lines numbered by seq from 1). \
mode tail (default): the last `tail` lines (120). mode body: page forward from `since_seq` with `limit` lines; \
the answer gives `next_seq` to read on. mode diagnostic: the last 120 lines of both streams, to see why it failed. \
Pages are capped at 16 KiB. `stream` picks stdout or stderr only."
    )]
    async fn logs(&self, Parameters(a): Parameters<LogsArgs>) -> CallToolResult {
        let req = LogRequest {
            mode: a.mode.unwrap_or_default(),
            since: a.since_seq,
            limit: a.tail.or(a.limit),
            stream: a.stream.map(Into::into),
        };
        let id = job_id(&a.id);
        reply(
            async {
                self.core.may_read(&id).await?;
                logs::answer(&self.core.manager, &id, &req, Dialect::Canonical).await
            }
            .await,
        )
    }

    #[tool(
        description = "Wait until a job is ready — its port accepts connections (`port`), a line matches (`log` \
regex), an HTTP path answers (`http`, optional `status`) — all given conditions must hold; with none, wait for the \
job to end. Answers as soon as that happens, or early with the reason: the job exited (with its code and last \
output) or `timeout` seconds passed (default 60; says which conditions are still pending). No need to sleep and poll."
    )]
    async fn wait(&self, Parameters(a): Parameters<WaitArgs>) -> CallToolResult {
        let ready = super::args::ReadyArg {
            port: a.port,
            log: a.log,
            http: a.http,
            status: a.status,
        };
        let conds = ready.conditions();
        reply(self.core.wait(&job_id(&a.id), &conds, a.timeout).await)
    }

    #[tool(
        description = "Wait until a server accepts TCP connections at host:port (host default 127.0.0.1), \
instead of sleeping. A job's published port (the PORT of its URL) is checked at the server inside the job, so it \
answers only once that server listens (or early if the job exits); other ports get a plain connect. Answers as \
soon as the port serves, or after `timeout` seconds (default 60) with an error."
    )]
    async fn wait_for_port(&self, Parameters(a): Parameters<WaitForPortArgs>) -> CallToolResult {
        reply(self.wait_for_port_answer(a).await)
    }

    #[tool(
        description = "Stop a job: TERM to its whole process group (or container), then KILL after `grace` seconds \
(default 5). Answers {result: killed|already_finished, reason, ended_by, exit_code} and the job's last `tail` \
lines (default 10), so no `logs` call is needed after it. A job that already ended is not an error \
(already_finished, with who ended it). `reason` is kept in the job's record."
    )]
    async fn kill(&self, Parameters(a): Parameters<KillArgs>) -> CallToolResult {
        reply(
            async {
                let req = KillRequest {
                    ended_by: Some(EndedBy::Agent),
                    reason: a.reason,
                    signal: a.signal.as_ref().map(|s| s.number()).transpose()?,
                    grace: a.grace,
                    ..Default::default()
                };
                let id = job_id(&a.id);
                let out = self.core.kill(&id, req).await?;
                let mut text = serde_json::to_string(&kill_json(&out)).unwrap_or_default();
                text += "\n";
                text += &self
                    .core
                    .last_lines(&id, a.tail.unwrap_or(KILL_TAIL).min(MAX_KILL_TAIL))
                    .await;
                Ok(Answer::ok(text))
            }
            .await,
        )
    }

    #[tool(
        description = "Run a finished job's command again, with the same settings, as a new background job. \
Answers the new job id, its URLs and log files."
    )]
    async fn resume(&self, Parameters(a): Parameters<IdArgs>) -> CallToolResult {
        reply(self.resume_answer(&a.id, Dialect::Canonical).await)
    }

    #[tool(
        description = "Move a job that runs in the foreground (a `run` still waiting for it) to the background now: \
that `run` call answers at once with the job id and the job keeps running."
    )]
    async fn background(&self, Parameters(a): Parameters<IdArgs>) -> CallToolResult {
        reply(self.background_answer(&a.id).await)
    }

    #[tool(
        description = "List job events — started, ready, watch hits, moved to background, ended (with exit code and \
who ended it: agent, user or system) — one line each. By default the events you have not seen yet (every answer \
already ends with those); `since` lists from that event seq on, `limit` (100) events within 8 KiB a page, \
and the answer gives the `since` of the next page. Only your own jobs' events (those you started \
or asked about) unless `all: true`, which also makes your later answers carry the events of every job of your \
project (not other projects' sessions, unless the user's config says agent_all_jobs); its first page starts where \
you last read all events (other jobs' events skipped while you read only yours are there, yours are not repeated)."
    )]
    async fn events(&self, Parameters(a): Parameters<EventsArgs>) -> CallToolResult {
        if let Some(all) = a.all {
            self.core.backlog.set_all(all);
        }
        let core = self.core.clone();
        let (lines, next) = off_worker(move || {
            core.backlog.list(
                &core.manager,
                (a.since, a.limit.unwrap_or(100).max(1)),
                &core.event_reader(),
            )
        })
        .await;
        let text = if lines.is_empty() {
            format!("No new events. Next event seq: {next}.\n")
        } else {
            format!("{}\nNext: `events` {{\"since\":{next}}}\n", lines.join("\n"))
        };
        reply(Ok(Answer::ok(text)))
    }

    #[tool(
        description = "Run the project's tests: the configured test_command, else detected from the workspace \
(cargo test, npm test, go test ./..., pytest, make test). Same as `run`: foreground by default (exit code + capped \
output; moved to background after `timeout` seconds), or background: true to get a job id at once. `args` are \
appended (e.g. a test name)."
    )]
    async fn run_test(&self, Parameters(a): Parameters<ProjectArgs>) -> CallToolResult {
        reply(self.project(ProjectTask::Test, a).await)
    }

    #[tool(
        description = "Build the project: the configured build_command, else detected from the workspace (cargo \
build, npm run build, go build ./..., make). Same semantics as `run_test`."
    )]
    async fn run_build(&self, Parameters(a): Parameters<ProjectArgs>) -> CallToolResult {
        reply(self.project(ProjectTask::Build, a).await)
    }

    #[tool(
        description = "Read a file a running container job wrote (a test report, a build log), e.g. \
{\"id\": \"job-3\", \"path\": \"report.xml\"}: a relative path is from the job's workspace. Needed on a remote \
engine, where the job's workspace is a copy nothing syncs back. A text file answers with its content (up to 64 \
KiB); a directory or a binary file answers with its entries and sizes (`berth cp JOB:PATH DEST` copies them)."
    )]
    async fn copy_out(&self, Parameters(a): Parameters<CopyOutArgs>) -> CallToolResult {
        reply(
            async {
                let id = job_id(&a.id);
                self.core.may_act(&id).await?;
                let tar = self.core.manager.copy_out(&id, &a.path).await?;
                Ok(Answer::ok(super::copy::describe(&a.path, &tar)))
            }
            .await,
        )
    }
}

/// Lines a `kill` answer ends with unless asked otherwise, and the most.
const KILL_TAIL: usize = 10;
const MAX_KILL_TAIL: usize = 200;

impl BerthMcp {
    pub(super) async fn status_answer(&self, id: &str) -> Result<Answer> {
        let m = &self.core.manager;
        let id = job_id(id);
        self.core.may_read(&id).await?;
        let info = m.info_with_usage(&id).await?;
        super::backlog::cover(m, &id);
        let mut text = format::card(&info, &m.read_snippet(&id).await?);
        text += &format::port_lines(&info);
        if let Some(u) = &info.usage {
            text += &format!(
                "  usage: cpu {:.1}% · memory {}\n",
                u.cpu_percent,
                format::bytes(u.memory_bytes)
            );
        }
        text += &format::log_paths(&info);
        text += &format!(
            "  output: {} lines; read with {}\n",
            info.last_seq,
            self.dialect.logs(&id, 1)
        );
        Ok(Answer::ok(text))
    }

    /// A page of the job list: newest first, `limit` jobs (default 50)
    /// older than `before`, with how to read the next page.
    pub(super) async fn list_answer(
        &self,
        filter: ListFilter,
        usage: bool,
        limit: Option<usize>,
        before: Option<&str>,
    ) -> Answer {
        let m = &self.core.manager;
        // A page (by count and bytes) copied out of the registry, not every job.
        let before = before.map(job_id);
        let limit = limit.unwrap_or(DEFAULT_LIST_LIMIT);
        let below = before.clone();
        let mut page = m
            .off_worker(move |m| m.list_page(filter, below.as_ref(), limit))
            .await;
        // Another project's jobs are not this agent's to see.
        self.core.keep_visible(&mut page.jobs);
        if usage {
            m.fill_usage(&mut page.jobs).await;
        }
        let name = serde_json::to_value(filter)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let older_than = before.map(|b| format!(" older than {b}")).unwrap_or_default();
        if page.jobs.is_empty() {
            return Answer::ok(format!("No {name} jobs{older_than}.\n"));
        }
        let mut text = format!(
            "{} {name} job(s){older_than}, newest first{}:\n",
            page.jobs.len(),
            if page.more.is_some() {
                " (older ones follow)"
            } else {
                ""
            }
        );
        text += &format::table(&page.jobs);
        if let Some(last) = page.more {
            text += &format!("More: list again with \"before\": \"{last}\".\n");
        }
        Answer::ok(text)
    }

    pub(super) async fn wait_for_port_answer(&self, a: WaitForPortArgs) -> Result<Answer> {
        let host = a.host.unwrap_or_else(|| "127.0.0.1".into());
        let t = Duration::from_secs_f64(a.timeout.unwrap_or(DEFAULT_WAIT_SECS));
        let w = self.core.manager.wait_for_port(&host, a.port, t).await?;
        let whose = match (&w.job, w.job_port) {
            (Some(job), Some(p)) => {
                super::backlog::cover(&self.core.manager, job);
                format!(" ({job}'s port {p}; its server was checked inside the job)")
            }
            _ => String::new(),
        };
        Ok(match &w.outcome {
            WaitOutcome::Ready { elapsed_ms, .. } => Answer::ok(format!(
                "{host}:{} accepts connections{whose} (after {}).\n",
                a.port,
                format::elapsed(*elapsed_ms as f64 / 1000.0)
            )),
            WaitOutcome::Exited {
                status,
                exit_code,
                reason,
                ..
            } => Answer::fail(format!(
                "{host}:{} never served: {} ended first: {}.\n",
                a.port,
                w.job.as_ref().map(|j| j.to_string()).unwrap_or_default(),
                format::end_words(status, None, *exit_code, reason.as_deref())
            )),
            WaitOutcome::TimedOut { .. } => Answer::fail(format!(
                "nothing accepted connections at {host}:{}{whose} within {}.\n",
                a.port,
                format::elapsed(t.as_secs_f64())
            )),
        })
    }

    pub(super) async fn resume_answer(&self, id: &str, d: Dialect) -> Result<Answer> {
        let old = job_id(id);
        let job = self.core.resume(&old).await?;
        let spec = self.core.manager.read_info(&job).await?.spec;
        let mut a = self.core.run_started(&job, &spec, d).await?;
        a.text = format!(
            "{old} restarted as {job} · `{}`\n{}",
            format::short(&spec.display_command(), 120),
            a.text
        );
        Ok(a)
    }

    pub(super) async fn background_answer(&self, id: &str) -> Result<Answer> {
        let id = job_id(id);
        self.core.may_act(&id).await?;
        let info = self.core.manager.background(&id, EndedBy::Agent)?;
        super::backlog::cover(&self.core.manager, &id);
        Ok(Answer::ok(format!(
            "{id} moved to background ({}); the `run` call waiting on it answers now. Stop it with {}.\n",
            info.promotion_reason.clone().unwrap_or_default(),
            self.dialect.kill(&info)
        )))
    }

    pub(super) async fn project(&self, task: ProjectTask, a: ProjectArgs) -> Result<Answer> {
        // The session client's project says which test/build command applies.
        let mut probe = JobSpec::default();
        self.core.session.claim(&mut probe);
        let project = self.core.manager.project_for(&probe)?;
        let cmd = append_args(&project_command(&project.config, task)?, &a.args);
        let mut spec = JobSpec::shell(cmd);
        spec.label = Some(match task {
            ProjectTask::Test => "test".into(),
            ProjectTask::Build => "build".into(),
        });
        spec.background = a.background;
        spec.timeout = a.timeout.filter(|_| !a.background);
        crate::model::RunRequest {
            runner: a.runner.map(super::args::RunnerArg::word),
            engine: a.engine.map(super::args::EngineArg::word),
            ..Default::default()
        }
        .apply(&mut spec)?;
        self.core.run(spec, None, self.dialect).await
    }
}

/// The answer to a kill, fields in reading order.
#[derive(serde::Serialize)]
pub struct KillAnswer<'a> {
    result: crate::manager::KillResult,
    job: &'a crate::JobId,
    /// Left out when it only repeats `result` (`killed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a str>,
    exit_code: Option<i32>,
    ended_by: Option<EndedBy>,
    reason: Option<&'a str>,
}

/// `{result, job, status, exit_code, ended_by, reason}` of a kill.
pub fn kill_json(out: &KillOutcome) -> KillAnswer<'_> {
    KillAnswer {
        result: out.result,
        job: &out.job,
        status: (!(matches!(out.status, crate::model::JobStatus::Killed { .. })
            && out.result == crate::manager::KillResult::Killed))
            .then(|| out.status.name()),
        exit_code: out.exit_code,
        ended_by: out.ended_by,
        reason: out.reason.as_deref(),
    }
}
