//! The core every tool set adapts: start a job and answer for it
//! (foreground: its exit and capped output, or why it went to background;
//! background: id, URLs, log files, readiness), wait, kill, and the project's
//! test/build command. Tools only parse their arguments into these calls and
//! pick a [`Dialect`] for the hints.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock};

use super::backlog::{self, Backlog};
use super::format::{self, Dialect};
use super::waited::wait_words;
use crate::config::{Config, DEFAULT_WAIT_SECS};
use crate::error::{Error, Result};
use crate::manager::{Foreground, KillOutcome, KillRequest, ListFilter, Manager};
use crate::model::{JobId, JobInfo, JobSpec};
use crate::ready::{ReadyCondition, WaitOutcome};

/// A tool's answer before the backlog is appended.
#[derive(Debug, Clone)]
pub struct Answer {
    pub text: String,
    pub is_error: bool,
}

impl Answer {
    pub fn ok(text: impl Into<String>) -> Self {
        Answer {
            text: text.into(),
            is_error: false,
        }
    }
    pub fn fail(text: impl Into<String>) -> Self {
        Answer {
            text: text.into(),
            is_error: true,
        }
    }
    /// Compact JSON on one line (field order kept for structs): a model
    /// reads it as well as the pretty form, at two thirds of the characters.
    pub fn json(v: &impl serde::Serialize) -> Self {
        Answer::ok(serde_json::to_string(v).unwrap_or_else(|e| format!("(unserializable answer: {e})")))
    }
}

/// A library error as one line for a model (hints name MCP tools, not CLI verbs).
pub fn message(e: &Error) -> String {
    match e {
        Error::UnknownJob(id) => {
            format!(
                "unknown job `{id}`: list job ids with `list` {{\"filter\":\"all\"}} (or the set's list tool)"
            )
        }
        Error::CapReached { max, running } => format!(
            "job limit reached ({max} running on this berth instance, started by any of its clients: {running}); stop one first, or pass \"queue\": true to wait for a free slot"
        ),
        other => other.to_string(),
    }
}

/// Turn a tool outcome into an MCP result (`isError` for failures).
pub fn reply(r: Result<Answer>) -> CallToolResult {
    let a = r.unwrap_or_else(|e| {
        let text = message(&e);
        let one_line: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        Answer::fail(format!("error ({}): {}", e.code(), one_line.join(" ")))
    });
    let content = vec![ContentBlock::text(a.text)];
    if a.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// Reads that may reach SQLite run on the blocking pool (the manager's one helper).
pub use crate::manager::off_worker;

/// State shared by every tool of one MCP session.
pub struct Core {
    pub manager: Manager,
    /// Whose jobs this session starts (owner, the client's cwd and `BERTH_*` variables).
    pub session: Session,
    pub backlog: Backlog,
    /// The exec set's snippets sent so far (each once).
    pub snippets: super::snippets::Snippets,
    /// The JSON-RPC id of the call that started each job (the seed's `call_id`).
    calls: std::sync::Mutex<std::collections::HashMap<JobId, String>>,
}

impl Core {
    pub fn new(manager: Manager, session: Session) -> Self {
        Core {
            backlog: Backlog::new(&manager),
            snippets: Default::default(),
            manager,
            session,
            calls: Default::default(),
        }
    }

    /// The id of the tool call that started `id`, if this server started it.
    pub fn call_of(&self, id: &JobId) -> Option<String> {
        self.calls.lock().unwrap().get(id).cloned()
    }

    /// This client started `id` in the call being answered.
    fn owned(&self, id: &JobId) {
        self.backlog.own(id);
        if let Some(c) = backlog::call_id() {
            self.calls.lock().unwrap().insert(id.clone(), c);
        }
    }

    fn cover(&self, id: &JobId) {
        backlog::cover(&self.manager, id);
    }

    /// Start `spec` and answer: foreground waits up to its budget (then
    /// promotes), background answers at once, after `spec.ready` if given.
    pub async fn run(&self, spec: JobSpec, ready_timeout: Option<f64>, d: Dialect) -> Result<Answer> {
        let (info, outcome) = self.start(spec, ready_timeout).await?;
        match outcome {
            Started::Finished => self.finished(&info, d).await,
            Started::Promoted => self.promoted(&info, d).await,
            Started::Background(waited) => self.background(&info, waited.as_ref(), d).await,
        }
    }

    /// Run a finished job's command again as a new background job of this session.
    pub async fn resume(&self, id: &JobId) -> Result<JobId> {
        self.may_act(id).await?;
        let target = id.clone();
        let mut spec = self
            .manager
            .off_worker(move |m| m.resumable_spec(&target))
            .await?;
        self.session.claim(&mut spec);
        let job = self.manager.start_from(spec, "mcp").await?;
        self.backlog.own(&job.id);
        Ok(job.id)
    }

    /// Answer for a background job started another way (resume): after its
    /// readiness conditions, if it has any.
    pub async fn run_started(&self, id: &JobId, spec: &JobSpec, d: Dialect) -> Result<Answer> {
        let waited = if spec.ready.is_empty() {
            None
        } else {
            let t = Duration::from_secs_f64(DEFAULT_WAIT_SECS);
            Some(self.manager.wait(id, &spec.ready, t).await?)
        };
        self.cover(id);
        self.background(&self.manager.read_info(id).await?, waited.as_ref(), d)
            .await
    }

    /// Start a job and follow it as far as the spec says.
    pub async fn start(&self, spec: JobSpec, ready_timeout: Option<f64>) -> Result<(JobInfo, Started)> {
        let started = self.start_claimed(spec, ready_timeout).await;
        // The agent hears it as a tool error; the user watching the client's
        // log hears it here: no engine, so no job (never a silent host one).
        if let Err(e @ Error::EngineUnavailable { .. }) = &started {
            tracing::warn!("berth mcp: a job was refused: {e}");
        }
        started
    }

    async fn start_claimed(
        &self,
        mut spec: JobSpec,
        ready_timeout: Option<f64>,
    ) -> Result<(JobInfo, Started)> {
        self.session.claim(&mut spec);
        if let Some(asked) = spec.network {
            let project = self.manager.project_for(&spec)?;
            super::spec::check_network(asked, project.config.network)?;
        }
        // A job that names no runner, budget or image gets its project's
        // (the session client's `berth.toml`): the manager fills them in.
        if spec.background {
            // Checked at admission (an HTTP check needs a port), for every face.
            let ready = spec.ready.clone();
            let job = self.manager.start_from(spec, "mcp").await?;
            self.owned(&job.id);
            let waited = if ready.is_empty() {
                None
            } else {
                let t = Duration::from_secs_f64(ready_timeout.unwrap_or(DEFAULT_WAIT_SECS));
                let w = self.manager.wait(&job.id, &ready, t).await;
                Some(w.map_err(|e| {
                    Error::InvalidSpec(format!(
                        "{} started, but its readiness could not be checked: {}",
                        job.id,
                        message(&e)
                    ))
                })?)
            };
            self.cover(&job.id);
            return Ok((
                self.manager.read_info(&job.id).await?,
                Started::Background(waited),
            ));
        }
        // An agent is never left waiting: at the budget the job is promoted
        // (the default) or, where it asked `on_timeout: "kill"`, stopped.
        let job = self.manager.start_from(spec, "mcp").await?;
        self.owned(&job.id);
        let fg = self.manager.await_foreground(&job.id).await?;
        self.cover(&job.id);
        Ok(match fg {
            Foreground::Finished { info } => (*info, Started::Finished),
            Foreground::Promoted { info } => (*info, Started::Promoted),
        })
    }

    /// Wait on a job and answer how it went.
    pub async fn wait(&self, id: &JobId, conds: &[ReadyCondition], timeout: Option<f64>) -> Result<Answer> {
        self.may_read(id).await?;
        let t = Duration::from_secs_f64(timeout.unwrap_or(DEFAULT_WAIT_SECS));
        let outcome = self.manager.wait(id, conds, t).await?;
        self.cover(id);
        let info = self.manager.read_info(id).await?;
        if conds.is_empty() && !matches!(outcome, WaitOutcome::TimedOut { .. }) {
            // Ended: how, and its last lines (a test run's summary, a crash).
            let mut text = format!(
                "{id} ended: {} after {}.\n",
                info.end_words(),
                format::duration(&info)
            );
            text += &self.last_lines(id, END_TAIL).await;
            return Ok(Answer::ok(text));
        }
        let (mut text, ok) = match &outcome {
            WaitOutcome::TimedOut { elapsed_ms, .. } if conds.is_empty() => (
                format!(
                    "{id} is still running after {}.\n",
                    format::elapsed(*elapsed_ms as f64 / 1000.0)
                ),
                false,
            ),
            _ => wait_words(&info, &outcome),
        };
        if !ok {
            text += &format::card(&info, &self.manager.read_snippet(id).await?);
        }
        Ok(Answer { text, is_error: !ok })
    }

    /// The job's last `n` lines under a `Last N lines` header (`of M` when
    /// there are more), made inert; nothing for none.
    pub async fn last_lines(&self, id: &JobId, n: usize) -> String {
        if n == 0 {
            return String::new();
        }
        let query = crate::LogQuery {
            tail: Some(n),
            ..Default::default()
        };
        match self.manager.read_logs(id, &query).await {
            Ok(mut page) if !page.lines.is_empty() => {
                format::cap_page_tail(&mut page);
                let shown = page.lines.len();
                let of = if (shown as u64) < page.last_seq {
                    format!(" of {}", page.last_seq)
                } else {
                    String::new()
                };
                let mut out = format!("Last {shown} lines{of}:\n");
                for l in &page.lines {
                    out += &crate::inert::visible(&format::truncate_line(&l.text, format::MAX_LINE_SHOWN));
                    out.push('\n');
                }
                out
            }
            _ => String::new(),
        }
    }

    /// Stop a job; the answer is `{result, reason, ended_by, …}`.
    pub async fn kill(&self, id: &JobId, req: KillRequest) -> Result<KillOutcome> {
        self.may_act(id).await?;
        let out = self.manager.kill(id, req).await?;
        self.cover(id);
        Ok(out)
    }

    /// A note when more background jobs run than the cap allows (a promotion never kills).
    pub(super) fn cap_note(&self) -> Option<String> {
        let max = self.manager.config().max_jobs;
        let n = self
            .manager
            .list(ListFilter::Running)
            .iter()
            .filter(|i| i.start_mode.is_background())
            .count();
        (n > max).then(|| {
            format!(
                "Note: {n} background jobs now run, over the cap of {max}; stop one you no longer need.\n"
            )
        })
    }
}

/// Lines an answer about a job's end (`wait` for the end) carries.
pub const END_TAIL: usize = 10;

/// How a job was followed after its start.
pub enum Started {
    Finished,
    Promoted,
    Background(Option<WaitOutcome>),
}

/// One MCP session's identity.
#[derive(Debug, Clone)]
pub struct Session {
    /// `mcp:<pid>-<n>`: the owner recorded on the session's jobs.
    pub owner: String,
    /// The client's working directory, given to its jobs as `caller_cwd`.
    pub cwd: Option<PathBuf>,
    /// The client's `BERTH_*` variables, given to its jobs as `caller_env`.
    pub env: BTreeMap<String, String>,
}

impl Session {
    /// A new session (its id is unique in this process) for a client in
    /// `cwd` with the `BERTH_*` variables `env`.
    pub fn new(cwd: Option<PathBuf>, env: BTreeMap<String, String>) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Session {
            owner: format!("mcp:{}-{n}", std::process::id()),
            cwd,
            env,
        }
    }

    /// The session of this process's own stdio: its cwd and `BERTH_*`
    /// variables, as the CLI sends them (a `--workspace` flag included).
    pub fn of_this_process(config: &Config) -> Self {
        let mut env = crate::manager::project::caller_env();
        if config.sources.get("workspace") == Some(&crate::config::Source::Flag) {
            let ws = std::path::absolute(&config.workspace).unwrap_or_else(|_| config.workspace.clone());
            env.insert("BERTH_WORKSPACE".into(), ws.display().to_string());
        }
        Session::new(std::env::current_dir().ok(), env)
    }

    /// Make `spec` a job of this session: its owner, and the caller's
    /// context (cwd and `BERTH_*` variables: the project it runs under).
    pub fn claim(&self, spec: &mut JobSpec) {
        spec.owner = Some(self.owner.clone());
        if self.cwd.is_some() {
            spec.caller_cwd = self.cwd.clone();
            spec.caller_env = self.env.clone();
        }
    }
}
