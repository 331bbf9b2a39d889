//! Configuration: built-in defaults, then `berth.toml`, then `BERTH_*`
//! environment variables, then command-line flags, each layer overriding the
//! one before. [`Config`] remembers where every value came from so that
//! `berth config` can say it. Every default is a named constant here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::job::parse_size;
use crate::model::{Egress, Limits, Network, Publish, RunnerChoice, host_cpus};
use crate::output::DEFAULT_RING_BYTES;
use crate::trust::{Loosening, Trusted};

mod loosen;
pub mod safety;

pub use safety::{BlockedPattern, SafetyConfig, SafetyLayer};

/// Default background job cap.
pub const DEFAULT_MAX_JOBS: usize = 3;
/// Default bound of the queue: starts waiting for a slot of the cap, per
/// instance (a start beyond it is refused, naming the bound).
pub const DEFAULT_MAX_QUEUED: usize = 64;
/// Default idle time (seconds) after which an MCP session attached to a
/// serving manager is closed, when it sent nothing and has no job running
/// (0 = never).
pub const DEFAULT_MCP_IDLE_SECS: f64 = 1800.0;
/// Default foreground budget (seconds) when a manager can promote.
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;
/// Default wait (seconds) for readiness or a job's end, when a caller names
/// none: `berth wait`, `berth run -d --ready-…`, the API's wait routes and
/// MCP's wait and readiness checks.
pub const DEFAULT_WAIT_SECS: f64 = 60.0;
/// Default grace between SIGTERM and SIGKILL (seconds).
pub const DEFAULT_GRACE_SECS: f64 = 5.0;
/// Default sandbox image, built from `images/sandbox`.
pub const DEFAULT_IMAGE: &str = "berth/sandbox:latest";
/// Default limit on one image pull (seconds): large images on slow links
/// take minutes; a pull that is stuck must still end.
pub const DEFAULT_PULL_TIMEOUT_SECS: f64 = 600.0;
/// The smallest per-job output cap accepted (below it a job's own tail would not fit).
pub const MIN_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;
/// Default instance name.
pub const DEFAULT_INSTANCE: &str = "default";
pub use crate::store::DEFAULT_MAX_OUTPUT_BYTES;
/// Finished runs kept in history (newest first); older ones are pruned.
pub const DEFAULT_KEEP_RUNS: usize = 500;
/// Finished runs older than this many days are pruned.
pub const DEFAULT_KEEP_DAYS: f64 = 7.0;
/// Default CPU limit of a container job (capped at the host's CPUs).
pub const DEFAULT_CPUS: f64 = 2.0;
/// Default memory limit of a container job.
pub const DEFAULT_MEMORY: u64 = 2 << 30;
/// Default process limit of a container job.
pub const DEFAULT_PIDS: i64 = 512;
/// Hosts a job behind the egress proxy may reach when the config names
/// none (`defaults` in `egress_allow`): the common package registries.
pub use crate::net::DEFAULT_EGRESS_ALLOW;
/// Default most children (containers started through its scoped engine) a
/// job may have at once.
pub const DEFAULT_MAX_CHILDREN: usize = 8;
/// Name of the project config file.
pub const CONFIG_FILE: &str = "berth.toml";
/// The uid:gid a root caller's container jobs run as when root also owns
/// the workspace (the conventional `nobody`).
pub const NOBODY: u32 = 65534;

/// What a restarted manager does with jobs a dead manager left running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// Kill what is left and mark the runs `lost` (the crash watchdog does it at once).
    #[default]
    Reap,
    /// Let a new manager take the instance over; the watchdog stands down if one does.
    Adopt,
}

impl Recovery {
    pub fn as_str(self) -> &'static str {
        match self {
            Recovery::Reap => "reap",
            Recovery::Adopt => "adopt",
        }
    }
}

impl std::str::FromStr for Recovery {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "reap" => Ok(Recovery::Reap),
            "adopt" => Ok(Recovery::Adopt),
            _ => Err(Error::InvalidValue {
                what: "recovery",
                input: s.into(),
                message: "expected reap or adopt".into(),
            }),
        }
    }
}

/// A size in a config file: a byte count or a string like `4m`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    Bytes(u64),
    Text(String),
}

impl SizeValue {
    fn bytes(&self) -> Result<u64> {
        match self {
            SizeValue::Bytes(b) => Ok(*b),
            SizeValue::Text(t) => parse_size(t),
        }
    }
}

/// One layer of settings; every field optional. `berth.toml` has this shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    pub instance: Option<String>,
    pub state_dir: Option<PathBuf>,
    pub workspace: Option<PathBuf>,
    pub max_jobs: Option<usize>,
    /// Most starts waiting in the queue for a slot (`--queue`).
    pub max_queued: Option<usize>,
    /// Seconds an attached MCP session may sit idle (nothing sent, no job running); 0 = never closed.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    pub mcp_idle: Option<f64>,
    /// Foreground budget in seconds.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    pub timeout: Option<f64>,
    /// Grace between SIGTERM and SIGKILL, in seconds.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    pub grace: Option<f64>,
    pub ring_size: Option<SizeValue>,
    /// `image = "name:tag"`, or `[image] dockerfile = …` (+ `context`, `args`).
    pub image: Option<crate::model::ImageValue>,
    /// When a job's image is pulled: `missing` (default), `always`, `never`.
    pub pull: Option<crate::model::PullPolicy>,
    /// Longest one image pull may take, in seconds.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    pub pull_timeout: Option<f64>,
    pub runner: Option<RunnerChoice>,
    pub test_command: Option<String>,
    pub build_command: Option<String>,
    pub recovery: Option<Recovery>,
    /// Most output stored per job (`256m`); the oldest lines beyond it are dropped.
    pub max_output: Option<SizeValue>,
    /// Finished runs kept in history.
    pub keep_runs: Option<usize>,
    /// Days a finished run is kept in history.
    pub keep_days: Option<f64>,
    /// Store jobs' `env` values (default: names kept, values `***`).
    pub store_env: Option<bool>,
    /// With `runner = auto` and no engine answering: run on the host (true,
    /// default, said loudly) or refuse (false).
    pub fallback: Option<bool>,
    /// The `[safety]` table: blocked patterns, the default blocklist, the security log.
    pub safety: Option<SafetyLayer>,
    /// Container jobs run as `UID:GID`, or `root`; unset = the caller's own uid:gid.
    pub user: Option<String>,
    /// Container jobs' network: `isolated` (default: a berth bridge per
    /// running job, no traffic between jobs), `bridge` (the engine's default
    /// bridge, jobs reach each other) or `none`.
    pub network: Option<String>,
    /// Default CPU limit of container jobs (cores).
    pub cpus: Option<f64>,
    /// Default memory limit of container jobs (`2g`, `512m`, bytes).
    pub memory: Option<SizeValue>,
    /// Default process limit of container jobs.
    pub pids: Option<i64>,
    /// What container jobs may reach outside: `none`, `proxy` (default:
    /// berth's HTTP(S) proxy, to the hosts of `egress_allow` only) or `all`.
    pub egress: Option<String>,
    /// Hosts reachable through the egress proxy (`pypi.org`, `*.corp.net`,
    /// `10.0.0.5:8080`); `defaults` stands for the package registries.
    pub egress_allow: Option<Vec<String>>,
    /// Who makes published ports answer on 127.0.0.1: `berth` (default:
    /// berth relays each connection) or `engine`.
    pub publish: Option<String>,
    /// Container jobs get a read-only root file system (a job may still ask
    /// for one when this is false; it cannot ask for a writable one when true).
    pub read_only: Option<bool>,
    /// Agents (MCP clients) may ask for a host job (`runner: "host"`) without
    /// host being the default (`runner = "host"` allows it too).
    pub allow_host: Option<bool>,
    /// Container jobs' engine access: `none` (default) or `scoped` (a
    /// socket of the job's own through which it starts its own children).
    pub engine: Option<String>,
    /// Most children a job with a scoped engine may have at once.
    pub max_children: Option<usize>,
    /// Agents may ask for a scoped engine (`engine: "scoped"`) without it
    /// being the default (`engine = "scoped"` allows it too).
    pub allow_engine: Option<bool>,
}

/// Where a setting came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Default,
    File(PathBuf),
    Env(String),
    Flag,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Env(v) => write!(f, "env {v}"),
            Source::Flag => f.write_str("flag"),
        }
    }
}

/// The effective configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub instance: String,
    /// Root of all state; the instance's state is in `state_dir/<instance>`.
    pub state_dir: PathBuf,
    pub workspace: PathBuf,
    pub max_jobs: usize,
    pub max_queued: usize,
    /// Seconds an attached MCP session may sit idle before it is closed (0 = never).
    pub mcp_idle_secs: f64,
    pub timeout_secs: f64,
    pub grace_secs: f64,
    pub ring_bytes: usize,
    pub image: String,
    /// The project image to build (`[image] dockerfile` in berth.toml);
    /// `None` when `image` is a name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_build: Option<crate::model::ProjectBuild>,
    pub pull: crate::model::PullPolicy,
    pub pull_timeout_secs: f64,
    pub runner: RunnerChoice,
    pub test_command: Option<String>,
    pub build_command: Option<String>,
    pub recovery: Recovery,
    /// Most output stored per job, in bytes (lines and raw log files together).
    pub max_output_bytes: u64,
    /// Finished runs kept in history (newest first).
    pub keep_runs: usize,
    /// Days a finished run is kept in history.
    pub keep_days: f64,
    /// Keep `env` values in the store (off: names kept, values `***`).
    pub store_env: bool,
    /// `auto` may fall back to the host when no engine answers.
    pub fallback: bool,
    /// Command filter and security log settings (`[safety]`).
    pub safety: SafetyConfig,
    /// `Some("UID:GID")` or `Some("root")` from config; `None` = the caller's uid:gid.
    pub user: Option<String>,
    /// `isolated` (a berth bridge per running job), `bridge` (the engine's
    /// default bridge) or `none`.
    pub network: Network,
    /// Limits for container jobs that ask for none (each field always set).
    pub limits: Limits,
    /// What container jobs may reach outside (`egress`).
    pub egress: Egress,
    /// The hosts the egress proxy allows, as written (`defaults` included).
    pub egress_allow: Vec<String>,
    /// Who publishes container jobs' ports (`publish`).
    pub publish: Publish,
    /// Every container job gets a read-only root file system.
    #[serde(default)]
    pub read_only: bool,
    /// Agents may ask for host jobs (see [`Layer::allow_host`]).
    #[serde(default)]
    pub allow_host: bool,
    /// Container jobs' engine access (`none` or `scoped`).
    #[serde(default)]
    pub engine: crate::model::EngineAccess,
    /// Most children a job with a scoped engine may have at once.
    #[serde(default = "default_max_children")]
    pub max_children: usize,
    /// Agents may ask for a scoped engine (see [`Layer::allow_engine`]).
    #[serde(default)]
    pub allow_engine: bool,
    /// Where each value came from, by field name.
    #[serde(skip)]
    pub sources: BTreeMap<&'static str, Source>,
    /// The project files the user trusts (`[trust]` of the user's config).
    #[serde(skip)]
    pub trusted: Trusted,
    /// What the project file set to loosen the sandbox without being
    /// trusted: those values were not applied (the user's are in their
    /// place), and starts are refused naming the first (`berth trust`).
    #[serde(skip)]
    pub untrusted: Vec<Loosening>,
    /// The project's `berth.toml` (or the caller's `BERTH_CONFIG`), if any.
    #[serde(skip)]
    pub project_file: Option<PathBuf>,
    /// Where the user's own config file is (whether or not it exists).
    #[serde(skip)]
    pub user_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        let mut c = Config {
            instance: DEFAULT_INSTANCE.into(),
            state_dir: default_state_dir(),
            workspace: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            max_jobs: DEFAULT_MAX_JOBS,
            max_queued: DEFAULT_MAX_QUEUED,
            mcp_idle_secs: DEFAULT_MCP_IDLE_SECS,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            grace_secs: DEFAULT_GRACE_SECS,
            ring_bytes: DEFAULT_RING_BYTES,
            image: DEFAULT_IMAGE.into(),
            image_build: None,
            pull: crate::model::PullPolicy::Missing,
            pull_timeout_secs: DEFAULT_PULL_TIMEOUT_SECS,
            runner: RunnerChoice::Auto,
            test_command: None,
            build_command: None,
            recovery: Recovery::Reap,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            keep_runs: DEFAULT_KEEP_RUNS,
            keep_days: DEFAULT_KEEP_DAYS,
            store_env: false,
            fallback: true,
            safety: SafetyConfig::default(),
            user: None,
            network: Network::Isolated,
            limits: default_limits(),
            egress: Egress::Proxy,
            egress_allow: vec![crate::net::allow::DEFAULTS.to_string()],
            publish: Publish::Berth,
            read_only: false,
            allow_host: false,
            engine: crate::model::EngineAccess::None,
            max_children: DEFAULT_MAX_CHILDREN,
            allow_engine: false,
            sources: BTreeMap::new(),
            trusted: Trusted::default(),
            untrusted: Vec::new(),
            project_file: None,
            user_file: None,
        };
        for k in FIELDS {
            c.sources.insert(k, Source::Default);
        }
        c
    }
}

const FIELDS: [&str; 34] = [
    "egress",
    "egress_allow",
    "publish",
    "engine",
    "max_children",
    "allow_engine",
    "read_only",
    "allow_host",
    "max_queued",
    "mcp_idle",
    "pull",
    "pull_timeout",
    "user",
    "network",
    "cpus",
    "memory",
    "pids",
    "store_env",
    "fallback",
    "recovery",
    "max_output",
    "keep_runs",
    "keep_days",
    "instance",
    "state_dir",
    "workspace",
    "max_jobs",
    "timeout",
    "grace",
    "ring_size",
    "image",
    "runner",
    "test_command",
    "build_command",
];

fn default_max_children() -> usize {
    DEFAULT_MAX_CHILDREN
}

/// 2 CPUs (or all of them on a smaller machine), 2 GiB, 512 processes.
fn default_limits() -> Limits {
    Limits {
        cpus: Some(DEFAULT_CPUS.min(host_cpus() as f64)),
        memory: Some(DEFAULT_MEMORY),
        pids: Some(DEFAULT_PIDS),
    }
}

/// The uid:gid of this process: whoever asked the manager for the job.
pub fn caller_user() -> String {
    format!("{}:{}", nix::unistd::getuid(), nix::unistd::getgid())
}

/// `root`, or numeric `UID:GID` (names would be looked up in the image,
/// which may not know them).
pub fn validate_user(user: String) -> Result<String> {
    let numeric = |s: &str| {
        !s.is_empty() && s.len() <= 10 && s.chars().all(|c| c.is_ascii_digit()) && s.parse::<u32>().is_ok()
    };
    let ok = user == "root"
        || user
            .split_once(':')
            .is_some_and(|(u, g)| numeric(u) && numeric(g));
    if ok {
        Ok(user)
    } else {
        Err(Error::InvalidValue {
            what: "user",
            input: user,
            message: "expected UID:GID (numbers, e.g. 1000:1000) or root".into(),
        })
    }
}

fn validate_network(network: String) -> Result<Network> {
    network.parse()
}

fn default_state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("berth");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => PathBuf::from(h).join(".local/state/berth"),
        None => std::env::temp_dir().join("berth-state"),
    }
}

impl Config {
    /// A config for tests and embedding: defaults, state under `state_dir`, no files read.
    pub fn isolated(state_dir: impl Into<PathBuf>, instance: &str) -> Self {
        Config {
            state_dir: state_dir.into(),
            instance: instance.into(),
            ..Config::default()
        }
    }

    pub fn with_max_jobs(mut self, n: usize) -> Self {
        self.max_jobs = n;
        self
    }
    pub fn with_grace_secs(mut self, s: f64) -> Self {
        self.grace_secs = s;
        self
    }
    pub fn with_ring_bytes(mut self, b: usize) -> Self {
        self.ring_bytes = b;
        self
    }
    pub fn with_max_output_bytes(mut self, b: u64) -> Self {
        self.max_output_bytes = b;
        self
    }
    pub fn with_workspace(mut self, p: impl Into<PathBuf>) -> Self {
        self.workspace = p.into();
        self
    }
    pub fn with_runner(mut self, r: RunnerChoice) -> Self {
        self.runner = r;
        self
    }

    /// The `uid:gid` (or `root`) container jobs run as: the `user` key when
    /// set, else the caller's own uid:gid. A root caller's jobs never run as
    /// root unless asked (`user = "root"` in the user's config or a trusted
    /// file): they run as the workspace's owner, whom its files are for, or
    /// as [`NOBODY`] when root owns the workspace too.
    pub fn container_user(&self) -> String {
        if let Some(u) = &self.user {
            return u.clone();
        }
        if !nix::unistd::getuid().is_root() {
            return caller_user();
        }
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(&self.workspace) {
            Ok(m) if m.uid() != 0 => format!("{}:{}", m.uid(), m.gid()),
            _ => format!("{NOBODY}:{NOBODY}"),
        }
    }

    /// This instance's state directory.
    pub fn instance_dir(&self) -> PathBuf {
        self.state_dir.join(&self.instance)
    }

    pub fn grace(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.grace_secs)
    }

    /// Load: defaults ← `berth.toml` (found from `start` upwards, or `$BERTH_CONFIG`)
    /// ← `BERTH_*` env ← `flags`.
    pub fn load(start: &Path, flags: Layer) -> Result<Self> {
        Self::load_with(start, flags, |name| std::env::var(name).ok())
    }

    /// [`Config::load`] with the `BERTH_*` variables read through `env`
    /// (a caller's variables, sent with its request, instead of this process's).
    ///
    /// Layers: defaults ← the user's own config (`~/.config/berth/config.toml`,
    /// always trusted) ← the project's `berth.toml` ← `BERTH_*` ← `flags`. A
    /// value of the project file that loosens the sandbox applies only when
    /// the user trusts the file (`berth trust`); otherwise the user's value
    /// stays and the key is listed in [`Config::untrusted`].
    pub fn load_with(start: &Path, flags: Layer, env: impl Fn(&str) -> Option<String>) -> Result<Self> {
        // Without a config file the caller's directory is the workspace.
        let mut config = Config {
            workspace: start.to_path_buf(),
            ..Default::default()
        };
        if let Some(path) = crate::trust::user_config_path(&env) {
            if let Some((layer, trusted)) = read_user_config(&path)? {
                config.apply(layer, |_| Source::File(path.clone()))?;
                config.trusted = trusted;
            }
            config.user_file = Some(path);
        }
        let baseline = config.clone();
        let file = match env("BERTH_CONFIG").filter(|v| !v.is_empty()) {
            Some(p) => Some(start.join(p)),
            None => find_config_file(start),
        };
        let mut project = None;
        if let Some(path) = file {
            let bytes = crate::trust::read_capped(&path)?;
            let mut layer: Layer = parse_toml(&path, &bytes)?;
            // A config file's directory is the default workspace root, and a
            // relative workspace in it is relative to it.
            if let Some(dir) = path.parent() {
                config.workspace = dir.to_path_buf();
                config.sources.insert("workspace", Source::File(path.clone()));
                layer.workspace = layer.workspace.map(|w| dir.join(w));
            }
            let safety = layer.safety.clone();
            config.apply(layer, |_| Source::File(path.clone()))?;
            project = Some((path, bytes, safety));
        }
        config.apply(env_layer(&env)?, |k| Source::Env(env_name(k)))?;
        config.apply(flags, |_| Source::Flag)?;
        if let Some((path, bytes, safety)) = project {
            loosen::settle(&mut config, &baseline, &path, &bytes, safety.as_ref());
            config.project_file = Some(path);
        }
        Ok(config)
    }

    fn apply(&mut self, l: Layer, source: impl Fn(&'static str) -> Source) -> Result<()> {
        macro_rules! set {
            ($field:ident, $key:literal, $conv:expr) => {
                if let Some(v) = l.$field {
                    self.$field = $conv(v)?;
                    self.sources.insert($key, source($key));
                }
            };
        }
        set!(instance, "instance", |v: String| validate_instance(v));
        set!(state_dir, "state_dir", Ok::<_, Error>);
        set!(workspace, "workspace", Ok::<_, Error>);
        set!(max_jobs, "max_jobs", |v: usize| if v == 0 {
            Err(Error::InvalidValue {
                what: "max_jobs",
                input: "0".into(),
                message: "must be at least 1".into(),
            })
        } else {
            Ok(v)
        });
        set!(max_queued, "max_queued", Ok::<_, Error>);
        if let Some(v) = l.mcp_idle {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::InvalidValue {
                    what: "mcp_idle",
                    input: v.to_string(),
                    message: "must be zero (never) or more seconds".into(),
                });
            }
            self.mcp_idle_secs = v;
            self.sources.insert("mcp_idle", source("mcp_idle"));
        }
        if let Some(v) = l.timeout {
            self.timeout_secs = positive("timeout", v)?;
            self.sources.insert("timeout", source("timeout"));
        }
        if let Some(v) = l.grace {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::InvalidValue {
                    what: "grace",
                    input: v.to_string(),
                    message: "must be zero or more seconds".into(),
                });
            }
            self.grace_secs = v;
            self.sources.insert("grace", source("grace"));
        }
        if let Some(v) = l.ring_size {
            self.ring_bytes = v.bytes()? as usize;
            self.sources.insert("ring_size", source("ring_size"));
        }
        if let Some(v) = l.image {
            let source = source("image");
            match v {
                crate::model::ImageValue::Name(name) => {
                    self.image = name;
                    self.image_build = None;
                }
                crate::model::ImageValue::Build(table) => {
                    // Only a file can hold a table; its paths are relative to it.
                    let file = match &source {
                        Source::File(p) => p.clone(),
                        _ => self.workspace.join(CONFIG_FILE),
                    };
                    self.image_build = Some(crate::model::ProjectBuild::from_table(table, &file));
                }
            }
            self.sources.insert("image", source);
        }
        set!(pull, "pull", Ok::<_, Error>);
        if let Some(v) = l.pull_timeout {
            self.pull_timeout_secs = positive("pull_timeout", v)?;
            self.sources.insert("pull_timeout", source("pull_timeout"));
        }
        set!(runner, "runner", Ok::<_, Error>);
        if let Some(v) = l.test_command {
            self.test_command = Some(v);
            self.sources.insert("test_command", source("test_command"));
        }
        set!(recovery, "recovery", Ok::<_, Error>);
        set!(store_env, "store_env", Ok::<_, Error>);
        set!(fallback, "fallback", Ok::<_, Error>);
        if let Some(v) = l.build_command {
            self.build_command = Some(v);
            self.sources.insert("build_command", source("build_command"));
        }
        if let Some(v) = l.max_output {
            let bytes = v.bytes()?;
            if bytes < MIN_MAX_OUTPUT_BYTES {
                return Err(Error::InvalidValue {
                    what: "max_output",
                    input: bytes.to_string(),
                    message: "must be at least 1m".into(),
                });
            }
            self.max_output_bytes = bytes;
            self.sources.insert("max_output", source("max_output"));
        }
        set!(keep_runs, "keep_runs", Ok::<_, Error>);
        if let Some(v) = l.keep_days {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::InvalidValue {
                    what: "keep_days",
                    input: v.to_string(),
                    message: "must be zero or more days".into(),
                });
            }
            self.keep_days = v;
            self.sources.insert("keep_days", source("keep_days"));
        }
        if let Some(v) = l.safety {
            self.safety.apply(v)?;
            self.sources.insert("safety", source("safety"));
        }
        if let Some(v) = l.user {
            self.user = Some(validate_user(v)?);
            self.sources.insert("user", source("user"));
        }
        set!(network, "network", validate_network);
        set!(egress, "egress", |v: String| v.parse::<Egress>());
        set!(egress_allow, "egress_allow", |v: Vec<String>| {
            crate::net::Allowlist::parse(&v).map(|_| v)
        });
        set!(publish, "publish", |v: String| v.parse::<Publish>());
        set!(read_only, "read_only", Ok::<_, Error>);
        set!(allow_host, "allow_host", Ok::<_, Error>);
        set!(engine, "engine", |v: String| v
            .parse::<crate::model::EngineAccess>());
        set!(max_children, "max_children", |v: usize| if v == 0 {
            Err(Error::InvalidValue {
                what: "max_children",
                input: "0".into(),
                message: "must be at least 1 (set engine = \"none\" for no children)".into(),
            })
        } else {
            Ok(v)
        });
        set!(allow_engine, "allow_engine", Ok::<_, Error>);
        let mut limits = self.limits.clone();
        let mut touched = Vec::new();
        if let Some(v) = l.cpus {
            limits.cpus = Some(v);
            touched.push("cpus");
        }
        if let Some(v) = l.memory {
            limits.memory = Some(v.bytes()?);
            touched.push("memory");
        }
        if let Some(v) = l.pids {
            limits.pids = Some(v);
            touched.push("pids");
        }
        limits.validate()?;
        self.limits = limits;
        for k in touched {
            self.sources.insert(k, source(k));
        }
        Ok(())
    }

    /// `key = value  (source)` lines for `berth config`.
    pub fn describe(&self) -> Vec<(String, String, String)> {
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "(detect)".into());
        let rows: Vec<(&'static str, String)> = vec![
            ("instance", self.instance.clone()),
            ("state_dir", self.state_dir.display().to_string()),
            ("workspace", self.workspace.display().to_string()),
            ("max_jobs", self.max_jobs.to_string()),
            ("max_queued", self.max_queued.to_string()),
            ("mcp_idle", format!("{}s", self.mcp_idle_secs)),
            ("timeout", format!("{}s", self.timeout_secs)),
            ("grace", format!("{}s", self.grace_secs)),
            ("ring_size", size_text(self.ring_bytes as u64)),
            (
                "image",
                match &self.image_build {
                    Some(b) => format!("(build {})", b.dockerfile.display()),
                    None => self.image.clone(),
                },
            ),
            ("pull", self.pull.as_str().into()),
            ("pull_timeout", format!("{}s", self.pull_timeout_secs)),
            ("runner", format!("{:?}", self.runner).to_lowercase()),
            ("test_command", opt(&self.test_command)),
            ("build_command", opt(&self.build_command)),
            ("recovery", self.recovery.as_str().into()),
            ("max_output", size_text(self.max_output_bytes)),
            ("keep_runs", self.keep_runs.to_string()),
            ("keep_days", self.keep_days.to_string()),
            (
                "user",
                match (&self.user, nix::unistd::getuid().is_root()) {
                    (Some(u), _) => u.clone(),
                    (None, false) => format!("{} (the caller)", caller_user()),
                    (None, true) => {
                        format!("{} (a root caller: the workspace's owner)", self.container_user())
                    }
                },
            ),
            ("network", self.network.to_string()),
            (
                "cpus",
                self.limits.cpus.map(|c| c.to_string()).unwrap_or_default(),
            ),
            ("memory", self.limits.memory.map(size_text).unwrap_or_default()),
            (
                "pids",
                self.limits.pids.map(|p| p.to_string()).unwrap_or_default(),
            ),
            ("store_env", self.store_env.to_string()),
            ("fallback", self.fallback.to_string()),
            ("egress", self.egress.to_string()),
            ("egress_allow", self.egress_allow.join(", ")),
            ("publish", self.publish.to_string()),
            ("read_only", self.read_only.to_string()),
            ("allow_host", self.allow_host.to_string()),
            ("engine", self.engine.to_string()),
            ("max_children", self.max_children.to_string()),
            ("allow_engine", self.allow_engine.to_string()),
            (
                "safety.default_blocklist",
                self.safety.default_blocklist.to_string(),
            ),
            (
                "safety.blocked",
                format!("{} extra pattern(s)", self.safety.blocked.len()),
            ),
            (
                "safety.security_log",
                self.safety.security_log.as_ref().map_or_else(
                    || self.instance_dir().join("security.log").display().to_string(),
                    |p| p.display().to_string(),
                ),
            ),
            ("safety.allow_env", self.safety.allow_env.join(", ")),
        ];
        rows.into_iter()
            .map(|(k, v)| {
                // The `[safety]` table is one source for all its keys.
                let key = if k.starts_with("safety.") { "safety" } else { k };
                let src = self.sources.get(key).cloned().unwrap_or(Source::Default);
                (k.to_string(), v, src.to_string())
            })
            .collect()
    }
}

fn positive(what: &'static str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(Error::InvalidValue {
            what,
            input: v.to_string(),
            message: "must be a positive number of seconds".into(),
        })
    }
}

/// Instance names become file names: keep them simple.
pub fn validate_instance(name: String) -> Result<String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !name.starts_with('.');
    if ok {
        Ok(name)
    } else {
        Err(Error::InvalidValue {
            what: "instance",
            input: name,
            message: "use letters, digits, `-`, `_` and `.` (up to 64)".into(),
        })
    }
}

fn env_name(key: &str) -> String {
    format!("BERTH_{}", key.to_ascii_uppercase())
}

fn env_layer(env: &impl Fn(&str) -> Option<String>) -> Result<Layer> {
    let get = |k: &str| env(&env_name(k)).filter(|v| !v.is_empty());
    let num = |k: &'static str| -> Result<Option<f64>> {
        get(k)
            .map(|v| {
                v.parse::<f64>().map_err(|_| Error::InvalidValue {
                    what: k,
                    input: v.clone(),
                    message: format!("{} must be a number", env_name(k)),
                })
            })
            .transpose()
    };
    let secs = |k: &'static str| -> Result<Option<f64>> {
        get(k)
            .map(|v| {
                crate::job::parse_secs(&v).map_err(|message| Error::InvalidValue {
                    what: k,
                    input: v.clone(),
                    message: format!("{}: {message}", env_name(k)),
                })
            })
            .transpose()
    };
    let flag = |k: &'static str| -> Result<Option<bool>> {
        get(k)
            .map(|v| match v.as_str() {
                "1" | "true" | "yes" => Ok(true),
                "0" | "false" | "no" => Ok(false),
                _ => Err(Error::InvalidValue {
                    what: k,
                    input: v.clone(),
                    message: format!("{} must be true or false", env_name(k)),
                }),
            })
            .transpose()
    };
    Ok(Layer {
        instance: get("instance"),
        state_dir: get("state_dir").map(PathBuf::from),
        workspace: get("workspace").map(PathBuf::from),
        max_jobs: num("max_jobs")?.map(|v| v as usize),
        max_queued: num("max_queued")?.map(|v| v as usize),
        mcp_idle: secs("mcp_idle")?,
        timeout: secs("timeout")?,
        grace: secs("grace")?,
        ring_size: get("ring_size").map(SizeValue::Text),
        image: get("image").map(crate::model::ImageValue::Name),
        pull: get("pull").map(|v| v.parse()).transpose()?,
        pull_timeout: secs("pull_timeout")?,
        runner: get("runner").map(|v| v.parse()).transpose()?,
        test_command: get("test_command"),
        build_command: get("build_command"),
        recovery: get("recovery").map(|v| v.parse()).transpose()?,
        max_output: get("max_output").map(SizeValue::Text),
        keep_runs: num("keep_runs")?.map(|v| v as usize),
        keep_days: num("keep_days")?,
        store_env: flag("store_env")?,
        fallback: flag("fallback")?,
        safety: None,
        user: get("user"),
        network: get("network"),
        cpus: num("cpus")?,
        memory: get("memory").map(SizeValue::Text),
        pids: num("pids")?.map(|v| v as i64),
        egress: get("egress"),
        // A comma-separated list: `BERTH_EGRESS_ALLOW=defaults,example.com`.
        egress_allow: get("egress_allow").map(|v| v.split(',').map(|e| e.trim().to_string()).collect()),
        publish: get("publish"),
        read_only: flag("read_only")?,
        allow_host: flag("allow_host")?,
        engine: get("engine"),
        max_children: num("max_children")?.map(|v| v as usize),
        allow_engine: flag("allow_engine")?,
    })
}

/// A size as a config file takes it back: `2g`, `512m`, `64k`, else bytes.
fn size_text(n: u64) -> String {
    for (shift, unit) in [(40, 't'), (30, 'g'), (20, 'm'), (10, 'k')] {
        if n != 0 && n.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// The user's own config: its settings and its `[trust]` table; `None` when
/// there is no such file.
fn read_user_config(path: &Path) -> Result<Option<(Layer, Trusted)>> {
    if !path.exists() {
        return Ok(None);
    }
    let bytes = crate::trust::read_capped(path)?;
    let mut table: toml::Table = parse_toml(path, &bytes)?;
    let trusted = Trusted::take_from(&mut table, path)?;
    let layer = Layer::deserialize(toml::Value::Table(table)).map_err(|e| Error::Config {
        path: path.to_path_buf(),
        message: quiet(e.message()),
    })?;
    Ok(Some((layer, trusted)))
}

/// Parse a config file's bytes. The error names the file and the place
/// (line, column) but never quotes the file: a caller may point
/// `BERTH_CONFIG` at a file it cannot read itself (`/etc/shadow`), and the
/// manager must not hand its first line back.
fn parse_toml<T: serde::de::DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T> {
    let fail = |message: String| Error::Config {
        path: path.to_path_buf(),
        message,
    };
    let text = std::str::from_utf8(bytes).map_err(|_| fail("not a UTF-8 text file".into()))?;
    toml::from_str(text).map_err(|e| {
        let place = e.span().map(|s| {
            let before = &text[..s.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {col}: ")
        });
        fail(format!("{}{}", place.unwrap_or_default(), quiet(e.message())))
    })
}

/// A parser's message with every quoted piece of the file dropped, except
/// names that look like config keys (`unknown field `max_jobz``).
fn quiet(message: &str) -> String {
    let first = message.lines().next().unwrap_or("").trim();
    let mut out = String::new();
    for (i, part) in first.split('`').enumerate() {
        let keyish = !part.is_empty()
            && part.len() <= 40
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c));
        if i % 2 == 0 {
            out.push_str(part);
        } else if keyish {
            out.push('`');
            out.push_str(part);
            out.push('`');
        } else {
            out.push_str("`…`");
        }
    }
    out.chars().take(300).collect()
}

pub(crate) fn find_config_file(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|d| d.join(CONFIG_FILE))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_flags_with_sources() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "max_jobs = 5\nring_size = \"1m\"\ngrace = 2\n",
        )
        .unwrap();
        let sub = dir.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        let c = Config::load(
            &sub,
            Layer {
                grace: Some(1.0),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.max_jobs, 5);
        assert_eq!(c.ring_bytes, 1 << 20);
        assert_eq!(c.grace_secs, 1.0);
        assert_eq!(c.workspace, dir.path());
        assert_eq!(c.sources["grace"], Source::Flag);
        assert!(matches!(c.sources["max_jobs"], Source::File(_)));
        assert_eq!(c.sources["image"], Source::Default);
    }

    #[test]
    fn container_user_defaults_to_the_caller_and_root_is_explicit() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let c = Config::default().with_workspace(dir.path());
        let owner = std::fs::metadata(dir.path()).unwrap();
        let me = match nix::unistd::getuid().is_root() {
            // A root caller's jobs run as the workspace's owner, or nobody.
            true if owner.uid() == 0 => format!("{NOBODY}:{NOBODY}"),
            true => format!("{}:{}", owner.uid(), owner.gid()),
            false => format!("{}:{}", nix::unistd::getuid(), nix::unistd::getgid()),
        };
        assert_eq!(c.container_user(), me);
        if nix::unistd::getuid().is_root() {
            std::os::unix::fs::chown(dir.path(), Some(4321), Some(4322)).unwrap();
            assert_eq!(c.container_user(), "4321:4322");
        }
        // root only when asked, by the user (a project file needs trust).
        let user = dir.path().join("user.toml");
        std::fs::write(&user, "user = \"root\"\n").unwrap();
        let env = |k: &str| (k == crate::trust::USER_CONFIG_ENV).then(|| user.display().to_string());
        let c = Config::load_with(dir.path(), Layer::default(), env).unwrap();
        assert_eq!(c.container_user(), "root");
        assert_eq!(validate_user("1234:1234".into()).unwrap(), "1234:1234");
        for bad in ["", "alice", "1234", "1:x", ":1", "99999999999:1", "-1:0"] {
            let err = validate_user(bad.into()).unwrap_err().to_string();
            assert!(err.contains("UID:GID"), "{bad}: {err}");
        }
    }

    #[test]
    fn limit_defaults_and_bounds() {
        let c = Config::default();
        let host = host_cpus() as f64;
        assert_eq!(c.limits.cpus, Some(DEFAULT_CPUS.min(host)));
        assert_eq!(c.limits.memory, Some(2 << 30));
        assert_eq!(c.limits.pids, Some(512));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(CONFIG_FILE);
        std::fs::write(
            &file,
            "cpus = 1\nmemory = \"64m\"\npids = 100\nnetwork = \"none\"\n",
        )
        .unwrap();
        let c = Config::load(dir.path(), Layer::default()).unwrap();
        assert_eq!(
            c.limits,
            Limits {
                cpus: Some(1.0),
                memory: Some(64 << 20),
                pids: Some(100)
            }
        );
        assert_eq!(c.network, Network::None);
        assert!(matches!(c.sources["pids"], Source::File(_)));
        let too_many = format!("cpus = {}\n", host + 1.0);
        for (text, what) in [
            ("pids = 0\n", "pids"),
            ("pids = -1\n", "pids"),
            ("pids = 40000\n", "pids"),
            ("cpus = 0\n", "cpus"),
            (too_many.as_str(), "cpus"),
            ("memory = \"1m\"\n", "memory"),
            ("network = \"host\"\n", "network"),
        ] {
            std::fs::write(&file, text).unwrap();
            let err = Config::load(dir.path(), Layer::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains(what) && !err.contains('\n'), "{text}: {err}");
        }
        // The same bounds hold for a job's own limits.
        let mut spec = crate::model::JobSpec::argv(["true"]);
        spec.limits.pids = Some(-1);
        assert!(
            spec.validate()
                .unwrap_err()
                .to_string()
                .contains("between 1 and 32768")
        );
        spec.limits.pids = Some(32768);
        spec.limits.memory = Some(6 << 20);
        spec.limits.cpus = Some(host);
        spec.validate().unwrap();
    }

    #[test]
    fn egress_and_publish_keys_from_file_and_env() {
        let c = Config::default();
        assert_eq!((c.egress, c.publish), (Egress::Proxy, Publish::Berth));
        assert_eq!(c.egress_allow, ["defaults"]);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(CONFIG_FILE);
        std::fs::write(
            &file,
            "egress = \"none\"\negress_allow = [\"defaults\", \"example.com\"]\npublish = \"engine\"\n",
        )
        .unwrap();
        let user = dir.path().join("user.toml");
        let user_env = |k: &str| (k == crate::trust::USER_CONFIG_ENV).then(|| user.display().to_string());
        // Untrusted: the narrowing key applies, the widening ones are reverted.
        let c = Config::load_with(dir.path(), Layer::default(), user_env).unwrap();
        assert_eq!((c.egress, c.publish), (Egress::None, Publish::Berth));
        assert_eq!(c.egress_allow, ["defaults"]);
        let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
        assert_eq!(keys, ["egress_allow", "publish"]);
        let bytes = std::fs::read(&file).unwrap();
        crate::trust::record(&user, &file, Some(&crate::trust::digest(&bytes))).unwrap();
        let c = Config::load_with(dir.path(), Layer::default(), user_env).unwrap();
        assert_eq!((c.egress, c.publish), (Egress::None, Publish::Engine));
        assert_eq!(c.egress_allow, ["defaults", "example.com"]);
        assert!(matches!(c.sources["egress_allow"], Source::File(_)));
        let env = |n: &str| match n {
            "BERTH_EGRESS" => Some("all".to_string()),
            "BERTH_EGRESS_ALLOW" => Some("pypi.org, *.corp.net".to_string()),
            _ => user_env(n),
        };
        let c = Config::load_with(dir.path(), Layer::default(), env).unwrap();
        assert_eq!(c.egress, Egress::All);
        assert_eq!(c.egress_allow, ["pypi.org", "*.corp.net"]);
        for (text, what) in [
            ("egress = \"some\"\n", "egress"),
            ("egress_allow = [\"a b\"]\n", "egress_allow"),
            ("publish = \"docker\"\n", "publish"),
        ] {
            std::fs::write(&file, text).unwrap();
            let err = Config::load(dir.path(), Layer::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains(what) && !err.contains('\n'), "{text}: {err}");
        }
    }

    /// `berth config` prints seconds as `60s`; a file and the environment
    /// take that form back (and plain numbers, as before).
    #[test]
    fn durations_are_read_as_printed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(CONFIG_FILE);
        std::fs::write(&file, "timeout = \"30s\"\ngrace = \"500ms\"\npull_timeout = 90\n").unwrap();
        let env = |n: &str| (n == "BERTH_MCP_IDLE").then(|| "2h".to_string());
        let c = Config::load_with(dir.path(), Layer::default(), env).unwrap();
        assert_eq!(
            (c.timeout_secs, c.grace_secs, c.pull_timeout_secs),
            (30.0, 0.5, 90.0)
        );
        assert_eq!(c.mcp_idle_secs, 7200.0);
        // Sizes print as a file takes them back.
        for (n, text) in [
            (2u64 << 30, "2g"),
            (3 << 29, "1536m"),
            (1000, "1000"),
            (64 << 10, "64k"),
        ] {
            assert_eq!(size_text(n), text);
            assert_eq!(parse_size(text).unwrap(), n);
        }
        std::fs::write(&file, "timeout = \"30 parsecs\"\n").unwrap();
        let err = Config::load_with(dir.path(), Layer::default(), |_| None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not a duration") && !err.contains("parsecs"),
            "{err}"
        );
        std::fs::remove_file(&file).unwrap();
        let env = |n: &str| (n == "BERTH_TIMEOUT").then(|| "soon".to_string());
        let err = Config::load_with(dir.path(), Layer::default(), env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("BERTH_TIMEOUT"), "{err}");
    }

    /// `berth config` shows the `[safety]` table, with where it came from.
    #[test]
    fn the_safety_table_is_described() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "[safety]\nblocked = [{ pattern = '^terraform', reason = 'no' }]\n",
        )
        .unwrap();
        let c = Config::load_with(dir.path(), Layer::default(), |_| None).unwrap();
        let rows = c.describe();
        let row = |k: &str| rows.iter().find(|(n, _, _)| n == k).cloned().unwrap();
        let (_, value, source) = row("safety.blocked");
        assert_eq!(value, "1 extra pattern(s)");
        assert!(source.ends_with(CONFIG_FILE), "{source}");
        assert_eq!(row("safety.default_blocklist").1, "true");
        assert!(row("safety.security_log").1.ends_with("security.log"));
    }

    #[test]
    fn bad_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), "max_jobz = 5\n").unwrap();
        let err = Config::load(dir.path(), Layer::default()).unwrap_err();
        assert!(err.to_string().contains("berth.toml"), "{err}");
        assert!(validate_instance("../x".into()).is_err());
    }
}
