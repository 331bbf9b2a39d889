//! What a caller asks of a job ([`JobSpec`]) and the pieces it is made of:
//! its id, runner, ports and limits. Plain data: parsing and validation,
//! which can fail with the crate's errors, live in `job.rs`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ReadyCondition;

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
    /// A one-replica service on a Docker Swarm, through its manager
    /// (never picked by `auto`).
    Swarm,
}

impl RunnerChoice {
    /// The word a caller types for it (`auto`, `docker`, `host`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerChoice::Auto => "auto",
            RunnerChoice::Docker => "docker",
            RunnerChoice::Host => "host",
            RunnerChoice::Swarm => "swarm",
        }
    }
}

/// The runner a job actually ran on, once `auto` is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerKind {
    Docker,
    Host,
    Swarm,
}

impl fmt::Display for RunnerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RunnerKind::Docker => "docker",
            RunnerKind::Host => "host",
            RunnerKind::Swarm => "swarm",
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
    #[serde(default)]
    pub proto: Proto,
}

/// A port's protocol, serialized as `tcp`/`udp` (the engine's words too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Proto {
    #[default]
    Tcp,
    Udp,
}

impl Proto {
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which network a container job is attached to, serialized as the word a
/// caller types (`isolated`, `bridge`, `none`, `project`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// A berth bridge of the job's own from the instance's pool: no traffic
    /// between jobs.
    #[default]
    Isolated,
    /// The engine's default bridge, where jobs reach each other.
    Bridge,
    /// No network at all.
    None,
    /// The project's pod: the container jobs of one project (one workspace)
    /// share one berth bridge and one network namespace, so they reach each
    /// other on `localhost` and by label; other projects' jobs do not.
    Project,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Isolated => "isolated",
            Network::Bridge => "bridge",
            Network::None => "none",
            Network::Project => "project",
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A published port as it actually came out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortMapping {
    /// Port of the server (container port, or the port the host job was asked to serve).
    pub port: u16,
    pub proto: Proto,
    /// Where berth reaches the port: always 127.0.0.1.
    pub host_ip: String,
    pub host_port: u16,
    /// Set when an asked port was taken and another was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A running host job's server as seen bound (`0.0.0.0:8000`): host
    /// jobs have no mapping, this is where they really listen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
}

impl PortMapping {
    /// Where a client reaches the port: for a host job seen bound, the
    /// address it really listens on (`http://[::1]:8000` for a server bound
    /// to IPv6 loopback only, which 127.0.0.1 would not reach; loopback for
    /// one bound to every address), else `host_ip:host_port`.
    pub fn url(&self) -> String {
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
        match self.listen.as_deref().and_then(|l| l.parse::<SocketAddr>().ok()) {
            Some(mut addr) => {
                if addr.ip().is_unspecified() {
                    addr.set_ip(match addr.ip() {
                        IpAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
                        IpAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
                    });
                }
                format!("http://{addr}")
            }
            None => format!("http://{}:{}", self.host_ip, self.host_port),
        }
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
    /// Container jobs: what it could reach outside (`none`, `proxy`, `all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<String>,
    /// Container jobs: what stood between it and the host's kernel, and
    /// the engine runtime that gave it (`container (runc)`, `gvisor (runsc)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
    /// The job took a spare container made ahead for its shape
    /// (`warm_pool`) instead of a create and start of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warm: bool,
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
    pub pull: Option<super::PullPolicy>,
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
    pub network: Option<Network>,
    /// Container jobs: what the job may reach outside (`none`, `proxy`,
    /// `all`); unset = the config's `egress`. Only as tight as the
    /// project's or tighter: a looser one is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<super::Egress>,
    /// Container jobs: `container` or `gvisor` (a kernel of gVisor's own
    /// between the job and the host); unset = the config's `isolation`.
    /// Only as strong as the project's or stronger: a weaker one is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<super::Isolation>,
    /// Container jobs: `scoped` gives the job an engine socket of its own
    /// (a filtering proxy: its own child containers and nothing else, see
    /// `runner/docker/scoped/`); unset = the config's `engine` (default `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<super::EngineAccess>,
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
    /// Container jobs: extra bind mounts of paths inside the job's
    /// workspace (`-v HOST:CONTAINER[:ro]`), checked at admission.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<MountSpec>,
    /// How the job writes its workspace: `layer`, `direct` or `read-only`;
    /// unset = the caller's default (`write` for the CLI, `agent_write` for
    /// MCP sessions). Admission writes the mode that applies here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<super::WriteMode>,
    /// `layer` mode: the layer to write (a name, created when new); unset =
    /// the session's layer (MCP) or one of the job's own (CLI). Admission
    /// writes the layer's name here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
}

/// An extra bind mount of a container job (`berth run -v HOST:CONTAINER[:ro]`):
/// a directory or file inside the job's workspace, shown at another path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MountSpec {
    /// The host path; it must resolve (symlinks followed, `..` resolved)
    /// inside the job's workspace. Relative: from the workspace root. The
    /// record holds the resolved path.
    pub source: PathBuf,
    /// Where it appears in the container: an absolute path, not a system
    /// directory and not the workspace's own.
    pub target: String,
    /// Read-only (also when the job is `read_only`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// Device and inode of the directory admission resolved: the launch
    /// mounts that directory or none (`runner/docker/launch/pins.rs`).
    #[serde(skip)]
    pub pinned: Option<(u64, u64)>,
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
            proto: Proto::Tcp,
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
}
