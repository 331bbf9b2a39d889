//! The job model: what a caller asks for ([`JobSpec`]), where a job is in its
//! life ([`JobStatus`], [`StartMode`], [`EndedBy`]) and the serializable record
//! every interface shows ([`JobInfo`]). Nothing here holds a live handle (a
//! child process, a container stream): those belong to the runner and the
//! manager, so every type in this file can be saved, sent and compared.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ready::ReadyCondition;

/// A job's id: `job-N`, N counting up per instance and never reused.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub String);

impl JobId {
    pub fn from_number(n: u64) -> Self {
        JobId(format!("job-{n}"))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for JobId {
    fn from(s: &str) -> Self {
        // Accept a bare number as a convenience: `berth kill 3` means job-3.
        if s.chars().all(|c| c.is_ascii_digit()) && !s.is_empty() {
            JobId(format!("job-{s}"))
        } else {
            JobId(s.to_string())
        }
    }
}

/// Which runner executes a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerChoice {
    /// Docker when the engine answers, else host.
    #[default]
    Auto,
    Docker,
    Host,
}

impl FromStr for RunnerChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "docker" => Ok(Self::Docker),
            "host" => Ok(Self::Host),
            _ => Err(Error::InvalidValue {
                what: "runner",
                input: s.into(),
                message: "expected auto, docker or host".into(),
            }),
        }
    }
}

/// The runner a job actually ran on, once `auto` is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerKind {
    Docker,
    Host,
}

impl fmt::Display for RunnerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RunnerKind::Docker => "docker",
            RunnerKind::Host => "host",
        })
    }
}

/// What to do when a foreground budget runs out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    /// Promote to background: the work goes on, the caller is released.
    #[default]
    Background,
    /// Kill the process group (exit code 124 in the CLI).
    Kill,
}

/// A port a job wants published: `3000`, `3000/tcp`, or `8080:3000` (ask for host 8080).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortSpec {
    /// The port the server listens on (inside the container, or the port the job asked for).
    pub port: u16,
    /// A host port asked for explicitly; when taken, a free one is used and reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_port: Option<u16>,
    /// `tcp` (default) or `udp`.
    #[serde(default = "default_proto")]
    pub proto: String,
}

fn default_proto() -> String {
    "tcp".into()
}

impl FromStr for PortSpec {
    type Err = Error;
    fn from_str(input: &str) -> Result<Self> {
        let bad = |message: &str| Error::InvalidPort {
            input: input.into(),
            message: message.into(),
        };
        let (rest, proto) = match input.split_once('/') {
            Some((r, p @ ("tcp" | "udp"))) => (r, p.to_string()),
            Some(_) => return Err(bad("protocol must be tcp or udp")),
            None => (input, "tcp".to_string()),
        };
        let parse = |s: &str| -> Result<u16> {
            match s.trim().parse::<u16>() {
                Ok(0) => Err(bad("port must be between 1 and 65535")),
                Ok(p) => Ok(p),
                Err(_) => Err(bad("not a number between 1 and 65535")),
            }
        };
        let (host_port, port) = match rest.split_once(':') {
            Some((h, c)) => (Some(parse(h)?), parse(c)?),
            None => (None, parse(rest)?),
        };
        Ok(PortSpec {
            port,
            host_port,
            proto,
        })
    }
}

/// A published port as it actually came out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortMapping {
    /// Port of the server (container port, or the port the host job was asked to serve).
    pub port: u16,
    pub proto: String,
    /// Always 127.0.0.1.
    pub host_ip: String,
    pub host_port: u16,
    /// Set when an explicitly asked host port was taken and another was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl PortMapping {
    pub fn url(&self) -> String {
        format!("http://{}:{}", self.host_ip, self.host_port)
    }
}

/// Resource limits asked for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU cores (e.g. 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Memory in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// Maximum number of processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<i64>,
}

/// Most processes a job may be limited to (`pids`).
pub const MAX_PIDS: i64 = 32768;
/// Least memory a job may be limited to: the engine refuses less.
pub const MIN_MEMORY: u64 = 6 << 20;

/// CPUs this machine offers (at least 1).
pub fn host_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

impl Limits {
    /// Bounds: a limit that would switch itself off (`pids = 0`/`-1`) or that
    /// the engine would refuse is a clear error before anything runs.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &'static str, input: String, message: String| {
            Err(Error::InvalidValue { what, input, message })
        };
        if let Some(c) = self.cpus {
            let host = host_cpus();
            if !(c.is_finite() && c > 0.0 && c <= host as f64) {
                return bad(
                    "cpus",
                    c.to_string(),
                    format!("must be more than 0 and at most {host} (this machine's CPUs)"),
                );
            }
        }
        if let Some(m) = self.memory
            && m < MIN_MEMORY
        {
            return bad(
                "memory",
                m.to_string(),
                "must be at least 6 MiB (e.g. 64m, 2g)".into(),
            );
        }
        if let Some(p) = self.pids
            && !(1..=MAX_PIDS).contains(&p)
        {
            return bad("pids", p.to_string(), format!("must be between 1 and {MAX_PIDS}"));
        }
        Ok(())
    }
}

/// Which limits were actually enforced, so nothing claims a limit that was not applied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AppliedLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<i64>,
    /// Human-readable notes on limits that were asked for but not enforced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_enforced: Vec<String>,
    /// Container jobs: the `uid:gid` the job ran as (`root` when it was root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Container jobs: the network it was attached to (`none` for none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
}

/// Parse a size like `512m`, `2g`, `1.5G`, `1048576`, `64k` into bytes.
pub fn parse_size(input: &str) -> Result<u64> {
    let s = input.trim().to_ascii_lowercase();
    let bad = || Error::InvalidSize { input: input.into() };
    let s = s.strip_suffix('b').unwrap_or(&s);
    let s = s.strip_suffix('i').unwrap_or(s);
    let (num, mult) = match s.chars().last().ok_or_else(bad)? {
        'k' => (&s[..s.len() - 1], 1u64 << 10),
        'm' => (&s[..s.len() - 1], 1 << 20),
        'g' => (&s[..s.len() - 1], 1 << 30),
        't' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let value: f64 = num.trim().parse().map_err(|_| bad())?;
    if !value.is_finite() || value <= 0.0 {
        return Err(bad());
    }
    let bytes = value * mult as f64;
    if bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// Everything a caller can ask of a job. Every interface maps onto this struct.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Program and arguments, run directly: nothing is interpreted by a shell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// A shell command line, run with `sh -c`. Exactly one of `argv` and `shell`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    #[serde(default)]
    pub runner: RunnerChoice,
    /// Docker image; unset = the project's image, else berth/dev when
    /// built, else the sandbox (see `images::choose_image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// When the image is pulled; unset = the config's `pull`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<crate::images::PullPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortSpec>,
    #[serde(default)]
    pub limits: Limits,
    /// False = foreground: the caller waits up to `timeout`.
    #[serde(default)]
    pub background: bool,
    /// Foreground budget in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    #[serde(default)]
    pub on_timeout: OnTimeout,
    /// Run, feed `input`, wait this many seconds, then kill (for programs that never exit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<f64>,
    /// Bytes for stdin; stdin is closed after them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Regexes on output; each match is a `watch_hit` event.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watch: Vec<String>,
    /// Readiness condition(s) to check after start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ready: Vec<ReadyCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// When the cap is reached, wait as `queued` instead of being refused.
    #[serde(default)]
    pub queue: bool,
    /// Container jobs: a read-only root file system (with a writable tmpfs
    /// `/tmp`); the workspace stays writable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// Container jobs: `isolated` (a berth bridge of the job's own, no
    /// traffic between jobs), `bridge` (the engine's default bridge, where
    /// jobs reach each other) or `none` (no network at all); unset = the
    /// config's `network` (default `isolated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// The caller's working directory. A manager serving several projects
    /// (the daemon) resolves the project from it: the `berth.toml` found from
    /// here upwards gives the workspace, rules, image and limits of the job,
    /// and a job without `cwd` runs here. Unset = the manager's own config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_cwd: Option<PathBuf>,
    /// The caller's `BERTH_*` variables (`BERTH_CONFIG`, `BERTH_IMAGE` …),
    /// applied to its project as they would be by a manager it ran itself.
    /// Used to resolve the project, then dropped from the record.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub caller_env: BTreeMap<String, String>,
    /// Who started the job, when it belongs to a session that ends (an MCP
    /// session attached to the daemon): `mcp:<session id>`. The session's
    /// end stops its running jobs (`ended_by: system`, reason
    /// `session ended`); jobs without an owner run until stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// An opaque token of the caller's, kept on the record: how a client
    /// whose create request is still under way (pulling or building the
    /// image) recognises its own job in the event stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ref: Option<String>,
}

impl JobSpec {
    /// A spec running `argv` directly.
    pub fn argv<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        JobSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// A spec running `cmd` with `sh -c`.
    pub fn shell(cmd: impl Into<String>) -> Self {
        JobSpec {
            shell: Some(cmd.into()),
            ..Default::default()
        }
    }

    pub fn with_runner(mut self, runner: RunnerChoice) -> Self {
        self.runner = runner;
        self
    }
    pub fn with_port(mut self, port: u16) -> Self {
        self.ports.push(PortSpec {
            port,
            host_port: None,
            proto: "tcp".into(),
        });
        self
    }
    pub fn with_image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }
    pub fn background(mut self) -> Self {
        self.background = true;
        self
    }
    pub fn with_input(mut self, input: impl Into<String>) -> Self {
        self.input = Some(input.into());
        self
    }
    pub fn with_watch(mut self, pattern: impl Into<String>) -> Self {
        self.watch.push(pattern.into());
        self
    }
    pub fn with_queue(mut self) -> Self {
        self.queue = true;
        self
    }

    /// The argv actually executed (`sh -c CMD` in shell mode).
    pub fn effective_argv(&self) -> Vec<String> {
        match &self.shell {
            Some(cmd) => vec!["sh".into(), "-c".into(), cmd.clone()],
            None => self.argv.clone(),
        }
    }

    /// The command as a person would type it, for cards and lists.
    pub fn display_command(&self) -> String {
        match &self.shell {
            Some(cmd) => cmd.clone(),
            None => self
                .argv
                .iter()
                .map(|a| {
                    if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
                        format!("'{}'", a.replace('\'', r"'\''"))
                    } else {
                        a.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// Check what can be checked without running anything.
    pub fn validate(&self) -> Result<()> {
        match (&self.shell, self.argv.is_empty()) {
            (Some(_), false) => {
                return Err(Error::InvalidSpec("give either argv or shell, not both".into()));
            }
            (None, true) => return Err(Error::InvalidSpec("no command given".into())),
            (Some(s), true) if s.trim().is_empty() => {
                return Err(Error::InvalidSpec("empty shell command".into()));
            }
            _ => {}
        }
        for (what, value) in [("timeout", self.timeout), ("keep_alive", self.keep_alive)] {
            if let Some(v) = value
                && !(v.is_finite() && v > 0.0)
            {
                return Err(Error::InvalidValue {
                    what,
                    input: v.to_string(),
                    message: "must be a positive number".into(),
                });
            }
        }
        self.limits.validate()?;
        for p in &self.ports {
            if p.port == 0 || p.host_port == Some(0) {
                return Err(Error::InvalidPort {
                    input: format!("{}:{}", p.host_port.unwrap_or(p.port), p.port),
                    message: "port must be between 1 and 65535".into(),
                });
            }
            if p.proto != "tcp" && p.proto != "udp" {
                return Err(Error::InvalidPort {
                    input: format!("{}/{}", p.port, p.proto),
                    message: "protocol must be tcp or udp".into(),
                });
            }
        }
        for p in &self.watch {
            regex::Regex::new(p).map_err(|e| Error::InvalidRegex {
                pattern: p.clone(),
                message: e.to_string(),
            })?;
        }
        for c in &self.ready {
            c.validate()?;
        }
        self.validate_isolation()
    }

    /// `read_only` and `network` are container settings: refuse what cannot hold.
    fn validate_isolation(&self) -> Result<()> {
        match self.network.as_deref() {
            None | Some("bridge" | "isolated") => {}
            Some("none") if !self.ports.is_empty() => {
                return Err(Error::InvalidSpec(
                    "network `none` cannot publish ports: drop the ports or use network `bridge`".into(),
                ));
            }
            Some("none") => {}
            Some(other) => {
                return Err(Error::InvalidValue {
                    what: "network",
                    input: other.into(),
                    message: "expected bridge, isolated or none".into(),
                });
            }
        }
        if self.runner == RunnerChoice::Host && (self.read_only || self.network.is_some()) {
            return Err(Error::InvalidSpec(
                "read_only and network apply to container jobs; the host runner cannot enforce them".into(),
            ));
        }
        Ok(())
    }
}

/// Who ended a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// A tool call or API client.
    Agent,
    /// A person (TUI `k`, `berth kill --as user`).
    User,
    /// berth itself: timeout, keep-alive expiry, shutdown, OOM, crash recovery.
    System,
}

impl fmt::Display for EndedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndedBy::Agent => "agent",
            EndedBy::User => "user",
            EndedBy::System => "system",
        })
    }
}

impl FromStr for EndedBy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "agent" => Ok(EndedBy::Agent),
            "user" => Ok(EndedBy::User),
            "system" => Ok(EndedBy::System),
            _ => Err(Error::InvalidValue {
                what: "ended_by",
                input: s.into(),
                message: "expected agent, user or system".into(),
            }),
        }
    }
}

/// How a job was started, and whether it was moved to background since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode", content = "by")]
pub enum StartMode {
    Foreground,
    Background,
    /// A foreground job moved to background, by the system (budget) or a user (Ctrl+R, `berth bg`).
    Promoted(EndedBy),
}

impl StartMode {
    /// Counts against the background cap.
    pub fn is_background(self) -> bool {
        !matches!(self, StartMode::Foreground)
    }
}

impl fmt::Display for StartMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartMode::Foreground => f.write_str("foreground"),
            StartMode::Background => f.write_str("background"),
            StartMode::Promoted(by) => write!(f, "promoted by {by}"),
        }
    }
}

/// Where a job is in its life. Terminal variants carry how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum JobStatus {
    /// Waiting for a free background slot.
    Queued,
    Starting,
    Running,
    /// The process exited on its own.
    Exited {
        code: i32,
    },
    /// The process died of a signal nobody here sent (e.g. a segfault).
    Signaled {
        signal: i32,
    },
    /// Stopped on request, or by the system (keep-alive expiry, shutdown, OOM).
    Killed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        ended_by: EndedBy,
        reason: String,
    },
    /// A foreground budget ran out with `on_timeout = kill`.
    TimedOut,
    /// Found dead or unreachable during recovery.
    Lost {
        reason: String,
    },
    StartFailed {
        error: String,
    },
}

impl JobStatus {
    pub fn is_active(&self) -> bool {
        matches!(self, JobStatus::Queued | JobStatus::Starting | JobStatus::Running)
    }
    pub fn is_terminal(&self) -> bool {
        !self.is_active()
    }
    /// Ended well: exited 0, or stopped on purpose (keep-alive, a kill asked for).
    pub fn is_success(&self) -> bool {
        matches!(self, JobStatus::Exited { code: 0 })
    }
    /// Ended badly: a non-zero exit, a crash, a timeout, a failed start, lost, OOM.
    pub fn is_failure(&self) -> bool {
        match self {
            JobStatus::Exited { code } => *code != 0,
            JobStatus::Signaled { .. }
            | JobStatus::TimedOut
            | JobStatus::Lost { .. }
            | JobStatus::StartFailed { .. } => true,
            JobStatus::Killed { reason, .. } => reason == "oom",
            _ => false,
        }
    }
    /// The short name used in lists and events.
    pub fn name(&self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Starting => "starting",
            JobStatus::Running => "running",
            JobStatus::Exited { code: 0 } => "success",
            JobStatus::Exited { .. } => "failed",
            JobStatus::Signaled { .. } => "signaled",
            JobStatus::Killed { .. } => "killed",
            JobStatus::TimedOut => "timed_out",
            JobStatus::Lost { .. } => "lost",
            JobStatus::StartFailed { .. } => "start_failed",
        }
    }
    /// Shell-style exit code: the code, 128+signal, 124 for a timeout.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            JobStatus::Exited { code } => Some(*code),
            JobStatus::Signaled { signal } => Some(128 + signal),
            JobStatus::Killed { signal, .. } => signal.map(|s| 128 + s),
            JobStatus::TimedOut => Some(124),
            JobStatus::StartFailed { .. } => Some(127),
            _ => None,
        }
    }
    /// Who ended the job: the client that stopped it, else `system` (it
    /// exited or failed on its own, timed out, was lost, ran out of memory).
    /// `None` only while it is still queued, starting or running.
    pub fn ended_by(&self) -> Option<EndedBy> {
        match self {
            JobStatus::Killed { ended_by, .. } => Some(*ended_by),
            JobStatus::Queued | JobStatus::Starting | JobStatus::Running => None,
            _ => Some(EndedBy::System),
        }
    }
    pub fn reason(&self) -> Option<String> {
        match self {
            JobStatus::Killed { reason, .. } => Some(reason.clone()),
            JobStatus::TimedOut => Some("timeout".into()),
            JobStatus::Lost { reason } => Some(reason.clone()),
            JobStatus::StartFailed { error } => Some(error.clone()),
            JobStatus::Signaled { signal } => Some(format!("died of signal {signal}")),
            _ => None,
        }
    }
}

/// Paths of the raw per-stream log files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogPaths {
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

/// Resource usage sampled at the time of asking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub cpu_percent: f64,
    pub memory_bytes: u64,
}

/// The serializable record of a job: what every interface shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    pub id: JobId,
    pub label: String,
    pub command: String,
    pub spec: JobSpec,
    /// Resolved runner (None while queued and not yet resolved).
    pub runner: Option<RunnerKind>,
    /// Why the runner is not the one asked for: `auto` found no engine and
    /// ran the job on the host, unsandboxed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_note: Option<String>,
    /// The workspace the job ran in: the directory of the caller's
    /// `berth.toml`, else the caller's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// Settings of the caller's project that the running manager did not
    /// apply because they belong to the whole instance (`max_jobs` …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_note: Option<String>,
    /// Set on a job a restarted manager took over from a dead one (recovery
    /// mode `adopt`): it kept running and its output was followed on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovered: bool,
    pub status: JobStatus,
    pub start_mode: StartMode,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<EndedBy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the job is in the background, if it was promoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortMapping>,
    #[serde(default)]
    pub limits: AppliedLimits,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    pub logs: LogPaths,
    /// Seq of the last output line (0 = no output yet).
    pub last_seq: u64,
    /// Place in line while queued for a slot of the cap (1 = next).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<usize>,
    /// Container jobs: the image it ran in, why that one, how long a pull took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<crate::images::ImageChoice>,
    /// While starting: the image pull under way (status `starting (pulling)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulling: Option<crate::images::PullProgress>,
    /// While starting: the project image build under way (status `starting (building)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub building: Option<crate::images::BuildProgress>,
}

impl JobInfo {
    /// Runtime so far (running) or in total (ended).
    pub fn runtime(&self) -> Option<chrono::Duration> {
        let start = self.started_at?;
        Some(self.ended_at.unwrap_or_else(Utc::now) - start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn ports_parse() {
        assert_eq!(
            "3000".parse::<PortSpec>().unwrap(),
            PortSpec {
                port: 3000,
                host_port: None,
                proto: "tcp".into()
            }
        );
        assert_eq!(
            "8080:3000/udp".parse::<PortSpec>().unwrap(),
            PortSpec {
                port: 3000,
                host_port: Some(8080),
                proto: "udp".into()
            }
        );
        for bad in ["", "x", "0", "70000", "80/sctp", "a:80", "-1"] {
            let err = bad.parse::<PortSpec>().unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("64KiB").unwrap(), 64 << 10);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        for bad in ["", "m", "-5m", "12q", "abc", "0"] {
            assert!(parse_size(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn status_vocabulary() {
        assert_eq!(JobStatus::Exited { code: 0 }.name(), "success");
        assert!(JobStatus::Exited { code: 3 }.is_failure());
        assert_eq!(JobStatus::TimedOut.exit_code(), Some(124));
        assert_eq!(JobStatus::Signaled { signal: 9 }.exit_code(), Some(137));
        let json = serde_json::to_value(JobStatus::Killed {
            signal: Some(15),
            ended_by: EndedBy::User,
            reason: "killed by user".into(),
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"state":"killed","signal":15,"ended_by":"user","reason":"killed by user"})
        );
        let mode = serde_json::to_value(StartMode::Promoted(EndedBy::System)).unwrap();
        assert_eq!(mode, serde_json::json!({"mode":"promoted","by":"system"}));
    }

    #[test]
    fn spec_validation() {
        assert!(JobSpec::default().validate().is_err());
        assert!(JobSpec::argv(["true"]).validate().is_ok());
        let err = JobSpec::argv(["true"]).with_watch("(").validate().unwrap_err();
        assert!(matches!(err, Error::InvalidRegex { .. }), "{err}");
        assert_eq!(
            JobSpec::argv(["echo", "a b", "c"]).display_command(),
            "echo 'a b' c"
        );
    }
}
