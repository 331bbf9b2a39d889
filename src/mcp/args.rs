//! Arguments of the canonical tools (their JSON schemas come from these
//! types via schemars; the doc comments are what a model reads), and their
//! mapping onto the library's [`JobSpec`], readiness conditions and signals.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use super::logs::LogMode;
pub use super::spec::{EngineArg, RunnerArg};
use crate::JobSpec;
use crate::error::{Error, Result};
use crate::manager::ListFilter;
use crate::model::{ReadyAsk, RunRequest};
use crate::output::Stream;
use crate::ready::ReadyCondition;

/// When a job counts as ready; all given conditions must hold.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadyArg {
    /// The job's port (as given in `ports`) accepts TCP connections.
    pub port: Option<u16>,
    /// A line of output matches this regex, e.g. "Listening on".
    pub log: Option<String>,
    /// An HTTP GET of this path (e.g. "/") on the job's first published port answers 2xx/3xx.
    pub http: Option<String>,
    /// The HTTP status `http` must answer with (implies http "/" when alone).
    pub status: Option<u16>,
}

impl ReadyArg {
    /// The core's readiness ask: the same conditions as the CLI's flags.
    pub fn ask(&self) -> ReadyAsk {
        ReadyAsk {
            port: self.port,
            log: self.log.clone(),
            http: self.http.clone(),
            status: self.status,
        }
    }
    pub fn conditions(&self) -> Vec<ReadyCondition> {
        self.ask().conditions()
    }
}

/// Arguments of `run`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// A shell command line, run with `sh -c` (pipes, &&, $VARS work). Give this or `argv`.
    pub command: Option<String>,
    /// Program and arguments, run directly with no shell. Give this or `command`.
    pub argv: Option<Vec<String>>,
    /// true: start and answer at once with the job id (servers, watchers, long builds).
    /// Default false: wait up to `timeout` seconds for the end. Giving `ready` implies true.
    pub background: Option<bool>,
    /// Foreground: seconds to wait before the job moves to the background (default 60; it is
    /// never killed for this). Background with `ready`: seconds to wait for readiness (default 60).
    pub timeout: Option<f64>,
    /// Foreground: what happens when `timeout` runs out: "background" (default: it moves to
    /// the background and goes on) or "kill" (it is stopped; ends as timed_out, exit 124).
    pub on_timeout: Option<OnTimeoutArg>,
    /// Stop the job after this many seconds and return its output (programs that never exit).
    pub keep_alive: Option<f64>,
    /// Text written to stdin, which is then closed.
    pub input: Option<String>,
    /// Ports to publish, e.g. ["3000"] or ["8080:3000"] (host:job). Each comes back as a URL
    /// http://127.0.0.1:PORT. A host job gets its port in $PORT: make the server listen on it.
    #[serde(default, deserialize_with = "crate::mcp::args::ports_de")]
    #[schemars(with = "Vec<crate::mcp::args::PortArg>")]
    pub ports: Vec<String>,
    /// CPU cores, e.g. 0.5.
    pub cpus: Option<f64>,
    /// Memory limit, e.g. "256m", "1g".
    pub memory: Option<String>,
    /// Docker image (default: the project's image, else berth/dev when built, else berth/sandbox:latest).
    pub image: Option<String>,
    /// When to pull the image: `missing` (default), `always` or `never`.
    pub pull: Option<String>,
    /// auto (default: docker when available), docker, host or swarm.
    pub runner: Option<RunnerArg>,
    /// Engine access for a container job: none (default) or scoped (testcontainers work inside).
    pub engine: Option<EngineArg>,
    /// Most processes in the container, e.g. 256 (default: the project's limit).
    pub pids: Option<i64>,
    /// The container's network: isolated (its own), none (no network), or the project's
    /// (`bridge` only where berth.toml says so: an agent may only tighten it).
    pub network: Option<String>,
    /// true: a read-only root file system (a writable /tmp; the workspace stays writable).
    pub read_only: Option<bool>,
    /// "gvisor": the job's system calls go to gVisor's kernel, not the host's (slower
    /// starts and system calls); "container": the engine's default. Never weaker than the project's.
    pub isolation: Option<String>,
    /// How the job writes the workspace: "layer" (default: its writes wait in this session's
    /// layer, shared by the session's jobs, until `apply` brings them to the checkout) or
    /// "read-only"; "direct" (the checkout itself) only where the user's config allows it.
    pub write: Option<String>,
    /// Working directory, relative to the workspace root.
    pub cwd: Option<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Regexes on output; each matching line is reported once in a later answer (e.g. "error|panic").
    #[serde(default)]
    pub watch: Vec<String>,
    /// Wait until the job is ready before answering (implies background).
    pub ready: Option<ReadyArg>,
    /// A short name for the job in lists and cards.
    pub label: Option<String>,
    /// When the background cap (3 jobs) is full, wait for a free slot instead of failing.
    #[serde(default)]
    pub queue: bool,
}

impl RunArgs {
    pub fn spec(&self) -> Result<JobSpec> {
        let mut spec = match (&self.command, &self.argv) {
            (Some(c), None) => JobSpec::shell(c.clone()),
            (None, Some(a)) => JobSpec::argv(a.clone()),
            (Some(_), Some(_)) => {
                return Err(Error::InvalidSpec("give `command` or `argv`, not both".into()));
            }
            (None, None) => {
                return Err(Error::InvalidSpec(
                    "missing command: give `command` (a shell command line) or `argv` (a program and its arguments)"
                        .into(),
                ));
            }
        };
        let ready = self.ready.as_ref().map(ReadyArg::ask).unwrap_or_default();
        let asks_ready = !ready.conditions().is_empty();
        spec.background = self.background.unwrap_or(asks_ready);
        if !spec.background && asks_ready {
            return Err(Error::InvalidSpec(
                "`ready` needs a background job: drop `background: false`".into(),
            ));
        }
        RunRequest {
            ports: self.ports.clone(),
            image: self.image.clone(),
            pull: self.pull.clone(),
            runner: self.runner.map(RunnerArg::word),
            engine: self.engine.map(EngineArg::word),
            cwd: self.cwd.clone().map(Into::into),
            cpus: self.cpus,
            memory: self.memory.clone(),
            pids: self.pids,
            network: self.network.clone(),
            read_only: self.read_only,
            isolation: self.isolation.clone(),
            write: self.write.clone(),
            timeout: self.timeout.filter(|_| !spec.background),
            keep_alive: self.keep_alive,
            input: self.input.clone(),
            env: self.env.clone(),
            watch: self.watch.clone(),
            label: self.label.clone(),
            queue: self.queue,
            ready,
            ..Default::default()
        }
        .apply(&mut spec)?;
        if let Some(o) = self.on_timeout {
            if spec.background {
                return Err(Error::InvalidSpec(
                    "`on_timeout` is for foreground runs (its `timeout` budget): drop `background`".into(),
                ));
            }
            spec.on_timeout = match o {
                OnTimeoutArg::Background => crate::model::OnTimeout::Background,
                OnTimeoutArg::Kill => crate::model::OnTimeout::Kill,
            };
        }
        // Validated by the manager, with its defaults filled in.
        Ok(spec)
    }
}

/// A job id argument.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdArgs {
    /// The job id from `run` (e.g. "job-3").
    #[serde(deserialize_with = "id_de")]
    #[schemars(with = "String")]
    pub id: String,
}

/// Arguments of `diff`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// A job of this session whose layer to show (default: this session's layer).
    #[serde(default, deserialize_with = "opt_id_de")]
    #[schemars(with = "Option<String>")]
    pub id: Option<String>,
    /// true: a unified diff of the text files; default: one line a changed path.
    #[serde(default)]
    pub patch: bool,
    /// Only these paths (relative to the workspace root) and what is under them.
    #[serde(default)]
    pub paths: Vec<String>,
}

/// Arguments of `apply`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyArgs {
    /// A job of this session whose layer to apply (default: this session's layer).
    #[serde(default, deserialize_with = "opt_id_de")]
    #[schemars(with = "Option<String>")]
    pub id: Option<String>,
    /// Only these paths (relative to the workspace root) and what is under them.
    #[serde(default)]
    pub paths: Vec<String>,
}

/// Arguments of `copy_out`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CopyOutArgs {
    /// The job id from `run` (e.g. "job-3").
    #[serde(deserialize_with = "id_de")]
    #[schemars(with = "String")]
    pub id: String,
    /// A file or directory in the job's container; relative paths are from its workspace.
    pub path: String,
}

/// Accept "job-3", "3" or 3 as a job id.
pub fn id_de<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Text(String),
        Number(u64),
    }
    Ok(match Id::deserialize(d)? {
        Id::Text(s) => s.trim().to_string(),
        Id::Number(n) => n.to_string(),
    })
}

/// `on_timeout` of `run`.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeoutArg {
    Background,
    Kill,
}

/// One port as an agent may write it: `8000` or `"8000"`, `"8080:3000"`.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum PortArg {
    Number(u32),
    Text(String),
}

/// Accept ports as strings or integers (`[8000]`, `["8080:3000"]`).
pub fn ports_de<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    Ok(Vec::<PortArg>::deserialize(d)?
        .into_iter()
        .map(|p| match p {
            PortArg::Number(n) => n.to_string(),
            PortArg::Text(s) => s,
        })
        .collect())
}

/// [`id_de`] for an optional id (`#[serde(default)]` makes it absent-able).
pub fn opt_id_de<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    id_de(d).map(Some)
}

/// The library's id for an id argument.
pub fn job_id(s: &str) -> crate::JobId {
    crate::JobId::from(s)
}

/// Which jobs to list.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FilterArg {
    Running,
    Completed,
    Failed,
    All,
}

impl From<FilterArg> for ListFilter {
    fn from(f: FilterArg) -> Self {
        match f {
            FilterArg::Running => ListFilter::Running,
            FilterArg::Completed => ListFilter::Completed,
            FilterArg::Failed => ListFilter::Failed,
            FilterArg::All => ListFilter::All,
        }
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// running (default), completed, failed or all.
    pub filter: Option<FilterArg>,
    /// true: add CPU and memory of running jobs (sampled live, about a second with containers).
    #[serde(default)]
    pub usage: bool,
    /// Most jobs in the answer, newest first (default 50).
    pub limit: Option<usize>,
    /// Only jobs older than this id: the last id of the previous page, e.g. "job-51".
    pub before: Option<String>,
}

/// One output stream.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StreamArg {
    Stdout,
    Stderr,
}

impl From<StreamArg> for Stream {
    fn from(s: StreamArg) -> Self {
        match s {
            StreamArg::Stdout => Stream::Stdout,
            StreamArg::Stderr => Stream::Stderr,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsArgs {
    /// The job id.
    #[serde(deserialize_with = "id_de")]
    #[schemars(with = "String")]
    pub id: String,
    /// tail (default: the last lines), body (page forward from since_seq) or diagnostic
    /// (the last 120 lines of both streams).
    pub mode: Option<LogMode>,
    /// The last N lines (tail mode; default 120).
    pub tail: Option<usize>,
    /// First line to return (body mode; lines are numbered from 1). Use the `next_seq` of the
    /// previous answer to read on.
    pub since_seq: Option<u64>,
    /// Most lines in this page (default 120, at most 1000; pages are also capped at 16 KiB).
    pub limit: Option<usize>,
    /// Only stdout or only stderr (default both, merged in order).
    pub stream: Option<StreamArg>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// The job id.
    #[serde(deserialize_with = "id_de")]
    #[schemars(with = "String")]
    pub id: String,
    /// Wait until the job's port accepts connections.
    pub port: Option<u16>,
    /// Wait until a line of output matches this regex.
    pub log: Option<String>,
    /// Wait until an HTTP GET of this path on the job's first port answers.
    pub http: Option<String>,
    /// Expected HTTP status for `http`.
    pub status: Option<u16>,
    /// Seconds to wait at most (default 60).
    pub timeout: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitForPortArgs {
    /// Host to connect to (default 127.0.0.1).
    pub host: Option<String>,
    /// The TCP port.
    pub port: u16,
    /// Seconds to wait at most (default 60).
    pub timeout: Option<f64>,
}

/// A signal as a number (15) or a name ("TERM", "SIGINT").
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SignalArg {
    Number(i32),
    Name(String),
}

impl SignalArg {
    pub fn number(&self) -> Result<i32> {
        match self {
            SignalArg::Number(n) => Ok(*n),
            SignalArg::Name(name) => {
                let upper = name.trim().to_ascii_uppercase();
                let full = if upper.starts_with("SIG") {
                    upper
                } else {
                    format!("SIG{upper}")
                };
                full.parse::<nix::sys::signal::Signal>()
                    .map(|s| s as i32)
                    .map_err(|_| Error::InvalidValue {
                        what: "signal",
                        input: name.clone(),
                        message: "expected a signal name like TERM, INT, KILL or a number".into(),
                    })
            }
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillArgs {
    /// The job id.
    #[serde(deserialize_with = "id_de")]
    #[schemars(with = "String")]
    pub id: String,
    /// First signal (default TERM); KILL follows after `grace`.
    pub signal: Option<SignalArg>,
    /// Seconds between the first signal and KILL (default 5).
    pub grace: Option<f64>,
    /// Why it is stopped (kept in the job's record and its `ended` event).
    pub reason: Option<String>,
    /// The job's last lines to add to the answer (default 10, 0 for none, at most 200).
    pub tail: Option<usize>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsArgs {
    /// Events with seq >= since (default: everything you have not seen yet).
    pub since: Option<u64>,
    /// Most events to return (default 100).
    pub limit: Option<usize>,
    /// true: from now on your answers also carry other sessions' and the
    /// CLI's jobs' events; false: only your own jobs' (the default).
    pub all: Option<bool>,
}

/// Arguments of `run_test` and `run_build`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectArgs {
    /// true: start in the background and answer at once with the job id.
    #[serde(default)]
    pub background: bool,
    /// Foreground budget in seconds before it moves to the background (default 60).
    pub timeout: Option<f64>,
    /// auto (default), docker, host or swarm.
    pub runner: Option<RunnerArg>,
    /// Engine access: none (default) or scoped (the suite's testcontainers start containers of its own).
    pub engine: Option<EngineArg>,
    /// Extra arguments appended to the command (e.g. a test name filter).
    #[serde(default)]
    pub args: Vec<String>,
}
