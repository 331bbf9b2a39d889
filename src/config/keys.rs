//! Every configuration key, once: one row per key (see `table.rs` for what
//! a row generates). The topic files hold what the rows call: `instance.rs`
//! (where the manager lives and how many jobs it runs), `jobs.rs` (time
//! budgets and output), `history.rs` (what is kept), `container.rs` (the
//! container's image, limits, user and reach), `project.rs` (the project's
//! file, commands and image recipe) and `safety.rs` (`[safety]`).
//!
//! The rows stay in one table, in `berth config`'s order, rather than one
//! table per topic file: that order is the command's output (and the order
//! of serde's list of keys when one is unknown), and the topics interleave
//! in it. A new key is one row here; the compiler refuses a row without a
//! default-bearing field or `via`, an `env` reader or a `berth config` line.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::container::{self, default_limits};
use super::instance::{self, Recovery, default_state_dir, validate_instance};
use super::jobs::{self, SizeValue, size_text};
use super::safety::{SafetyConfig, SafetyLayer};
use super::table::{at_least_one, config_keys, keep, some};
use super::{DEFAULT_IMAGE, DEFAULT_INSTANCE, Source, project};
use crate::error::Result;
use crate::model::{
    Egress, EngineAccess, ImageValue, Isolation, Limits, Network, Publish, PullPolicy, RunnerChoice,
    WriteMode,
};
use crate::trust::{Loosening, Trusted};

config_keys! {
keys {
    /// The manager instance: one daemon, one store, one cap on jobs per name.
    instance: String,
        field instance: String = DEFAULT_INSTANCE.into(),
        env text, set |_, v| validate_instance(v),
        line |c| c.instance.clone();
    /// Root of berth's state: each instance's store, logs and layers in `state_dir/<instance>`.
    state_dir: PathBuf,
        field /// Root of all state; the instance's state is in `state_dir/<instance>`.
        state_dir: PathBuf = default_state_dir(),
        env path, set keep,
        line |c| c.state_dir.display().to_string();
    /// Where jobs run by default; a relative one in a file is relative to the file.
    workspace: PathBuf,
        field workspace: PathBuf = std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        env path, set keep,
        line |c| c.workspace.display().to_string();
    /// Most jobs running in the background at once.
    max_jobs: usize,
        field max_jobs: usize = super::DEFAULT_MAX_JOBS,
        env count, set at_least_one,
        line |c| c.max_jobs.to_string();
    /// Most starts waiting in the queue for a slot (`--queue`).
    max_queued: usize,
        field max_queued: usize = super::DEFAULT_MAX_QUEUED,
        env count, set keep,
        line |c| c.max_queued.to_string();
    /// Started containers the daemon keeps ready per job shape (image,
    /// limits, network, workspace) for the next job of that shape to take:
    /// 0 (default) keeps none; at most 8.
    warm_pool: usize,
        field #[serde(default)] warm_pool: usize = 0,
        env count, set jobs::warm_pool,
        line |c| c.warm_pool.to_string();
    /// Seconds a ready container waits for a job before it is removed.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    warm_idle: f64,
        field #[serde(default = "crate::config::jobs::default_warm_idle")]
        warm_idle_secs: f64 = super::jobs::DEFAULT_WARM_IDLE_SECS,
        env secs, set jobs::positive,
        line |c| format!("{}s", c.warm_idle_secs);
    /// Seconds a daemon `berth run` started on demand waits with no job and
    /// no MCP session before it exits.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    daemon_idle: f64,
        field daemon_idle_secs: f64 = super::DEFAULT_DAEMON_IDLE_SECS,
        env secs, set jobs::positive,
        line |c| format!("{}s", c.daemon_idle_secs);
    /// Seconds an attached MCP session may sit idle (nothing sent, no job running); 0 = never.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    mcp_idle: f64,
        field mcp_idle_secs: f64 = super::DEFAULT_MCP_IDLE_SECS,
        env secs, set instance::idle_secs,
        line |c| format!("{}s", c.mcp_idle_secs);
    /// Foreground budget in seconds.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    timeout: f64,
        field timeout_secs: f64 = super::DEFAULT_TIMEOUT_SECS,
        env secs, set jobs::positive,
        line |c| format!("{}s", c.timeout_secs);
    /// Grace between SIGTERM and SIGKILL, in seconds.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    grace: f64,
        field grace_secs: f64 = super::DEFAULT_GRACE_SECS,
        env secs, set jobs::grace_secs,
        line |c| format!("{}s", c.grace_secs);
    /// Output kept in memory per job for `logs` and `wait` (`1m`).
    ring_size: SizeValue,
        field ring_bytes: usize = crate::output::DEFAULT_RING_BYTES,
        env size, set |_, v| v.bytes().map(|b| b as usize),
        line |c| size_text(c.ring_bytes as u64);
    /// `image = "name:tag"`, or `[image] dockerfile = …` (+ `context`, `args`).
    image: ImageValue,
        field image: String = DEFAULT_IMAGE.into(),
        env image, via project::apply_image,
        line project::describe_image;
    /// When a job's image is pulled: `missing` (default), `always`, `never`.
    pull: PullPolicy,
        field pull: PullPolicy = PullPolicy::Missing,
        env parsed, set keep,
        line |c| c.pull.as_str().into();
    /// Longest one image pull may take, in seconds.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    pull_timeout: f64,
        field pull_timeout_secs: f64 = super::DEFAULT_PULL_TIMEOUT_SECS,
        env secs, set jobs::positive,
        line |c| format!("{}s", c.pull_timeout_secs);
    /// Seconds a running container job waits for an engine that stopped
    /// answering before it is recorded lost.
    #[serde(default, deserialize_with = "crate::job::secs_value")]
    engine_patience: f64,
        field engine_patience_secs: f64 = super::DEFAULT_ENGINE_PATIENCE_SECS,
        env secs, set jobs::positive,
        line |c| format!("{}s", c.engine_patience_secs);
    /// Where jobs run: `auto`, `docker`, `host` or `swarm`.
    runner: RunnerChoice,
        field runner: RunnerChoice = RunnerChoice::Auto,
        env parsed, set keep,
        line |c| format!("{:?}", c.runner).to_lowercase();
    /// `berth test`'s command (unset: detected from the project).
    test_command: String,
        field test_command: Option<String> = None,
        env text, set some,
        line |c| project::or_detect(&c.test_command);
    /// `berth build`'s command (unset: detected from the project).
    build_command: String,
        field build_command: Option<String> = None,
        env text, set some,
        line |c| project::or_detect(&c.build_command);
    /// What a restarted manager does with jobs a dead one left: `reap` or `adopt`.
    recovery: Recovery,
        field recovery: Recovery = Recovery::Reap,
        env parsed, set keep,
        line |c| c.recovery.as_str().into();
    /// Most output stored per job (`256m`); the oldest lines beyond it are dropped.
    max_output: SizeValue,
        field /// Most output stored per job, in bytes (lines and raw log files together).
        max_output_bytes: u64 = super::DEFAULT_MAX_OUTPUT_BYTES,
        env size, set jobs::max_output,
        line |c| size_text(c.max_output_bytes);
    /// Finished runs kept in history (newest first).
    keep_runs: usize,
        field keep_runs: usize = super::DEFAULT_KEEP_RUNS,
        env count, set keep,
        line |c| c.keep_runs.to_string();
    /// Days a finished run is kept in history.
    keep_days: f64,
        field keep_days: f64 = super::DEFAULT_KEEP_DAYS,
        env number, set super::history::days,
        line |c| c.keep_days.to_string();
    /// Container jobs run as `UID:GID`, or `root`; unset = the caller's own uid:gid.
    user: String,
        field user: Option<String> = None,
        env text, set |_, v| container::validate_user(v).map(Some),
        line |c| container::describe_user(&c.user, &c.workspace);
    /// Container jobs' network: `isolated` (default: a berth bridge per
    /// running job, no traffic between jobs), `project`, `bridge` (the
    /// engine's default bridge, jobs reach each other) or `none`.
    network: String,
        field network: Network = Network::Isolated,
        env text, set |_, v| v.parse(),
        line |c| c.network.to_string();
    /// Default CPU limit of container jobs (cores).
    cpus: f64,
        env number, via |c, v, _| {
            c.limits.cpus = Some(v);
            Ok(())
        },
        line |c| c.limits.cpus.map(|v| v.to_string()).unwrap_or_default();
    /// Default memory limit of container jobs (`2g`, `512m`, bytes).
    memory: SizeValue,
        env size, via |c, v: SizeValue, _| {
            c.limits.memory = Some(v.bytes()?);
            Ok(())
        },
        line |c| c.limits.memory.map(size_text).unwrap_or_default();
    /// Default process limit of container jobs.
    pids: i64,
        env integer, via |c, v, _| {
            c.limits.pids = Some(v);
            Ok(())
        },
        line |c| c.limits.pids.map(|v| v.to_string()).unwrap_or_default();
    /// Store jobs' `env` values (default: names kept, values `***`).
    store_env: bool,
        field store_env: bool = false,
        env flag, set keep,
        line |c| c.store_env.to_string();
    /// With `runner = auto` and no engine answering: run on the host (true,
    /// said loudly; the default for the user, not for agents) or refuse
    /// (false). See `Config::fallback_allowed`.
    fallback: bool,
        field fallback: bool = true,
        env flag, set keep,
        line |c| c.fallback.to_string();
    /// What container jobs may reach outside: `none`, `proxy` (default:
    /// berth's HTTP(S) proxy, to the hosts of `egress_allow` only) or `all`.
    egress: String,
        field egress: Egress = Egress::Proxy,
        env text, set |_, v| v.parse(),
        line |c| c.egress.to_string();
    /// Hosts reachable through the egress proxy (`pypi.org`, `*.corp.net`,
    /// `10.0.0.5:8080`); `defaults` stands for the package registries.
    egress_allow: Vec<String>,
        field egress_allow: Vec<String> = vec![crate::net::allow::DEFAULTS.to_string()],
        env list, set |_, v| crate::net::Allowlist::parse(&v).map(|_| v),
        line |c| c.egress_allow.join(", ");
    /// What stands between a container job and the host's kernel:
    /// `container` (the engine's default runtime) or `gvisor` (gVisor's
    /// kernel, through the engine runtime named by `gvisor_runtime`).
    isolation: String,
        field isolation: Isolation = Isolation::Container,
        env text, set |_, v| v.parse(),
        line |c| c.isolation.to_string();
    /// The isolation of MCP sessions' jobs when stronger than `isolation`
    /// (e.g. `gvisor` for agents, `container` for your own runs).
    agent_isolation: String,
        field agent_isolation: Isolation = Isolation::Container,
        env text, set |_, v| v.parse(),
        line |c| c.agent_isolation.to_string();
    /// The engine runtime that gives `isolation = "gvisor"` (its name in
    /// the engine's `daemon.json` `runtimes`).
    gvisor_runtime: String,
        field gvisor_runtime: String = "runsc".into(),
        env text, set |_, v| crate::config::container::runtime_name(v),
        line |c| c.gvisor_runtime.clone();
    /// Project image builds may `ADD` a URL, which the engine fetches from
    /// its own host, past the egress policy (your own config only: a
    /// project file's value is never applied).
    build_add_urls: bool,
        field #[serde(default)] build_add_urls: bool = false,
        env flag, set keep,
        line |c| c.build_add_urls.to_string();
    /// Read project files (`berth.toml`, the devcontainer file, a project
    /// Dockerfile) through a symlink (your own config only: a job could
    /// point one at another project's trusted file).
    project_symlinks: bool,
        field #[serde(default)] project_symlinks: bool = false,
        env flag, set keep,
        line |c| c.project_symlinks.to_string();
    /// Agents (MCP sessions) may act on every job and read every project's
    /// (your own config only); by default a session acts on the jobs it
    /// started and reads its own project's.
    agent_all_jobs: bool,
        field #[serde(default)] agent_all_jobs: bool = false,
        env flag, set keep,
        line |c| c.agent_all_jobs.to_string();
    /// Who makes published ports answer on 127.0.0.1: `berth` (default:
    /// berth relays each connection) or `engine`.
    publish: String,
        field publish: Publish = Publish::Berth,
        env text, set |_, v| v.parse(),
        line |c| c.publish.to_string();
    /// Container jobs get a read-only root file system (a job may still ask
    /// for one when this is false; it cannot ask for a writable one when true).
    read_only: bool,
        field #[serde(default)] read_only: bool = false,
        env flag, set keep,
        line |c| c.read_only.to_string();
    /// How CLI jobs write their workspace: `direct` (default: the checkout),
    /// `layer` (a layer of the job's own, applied with `berth apply`) or `read-only`.
    write: String,
        field write: WriteMode = super::DEFAULT_WRITE,
        env text, set |_, v| v.parse(),
        line |c| c.write.to_string();
    /// How agents' (MCP sessions') jobs write their workspace: `layer`
    /// (default: one layer per session), `direct` or `read-only`.
    agent_write: String,
        field agent_write: WriteMode = super::DEFAULT_AGENT_WRITE,
        env text, set |_, v| v.parse(),
        line |c| c.agent_write.to_string();
    /// Days an idle layer is kept (its files), then pruned.
    layer_days: f64,
        field layer_days: f64 = super::DEFAULT_LAYER_DAYS,
        env number, set super::history::days,
        line |c| c.layer_days.to_string();
    /// Most bytes one layer may hold (`10g`); a job writing more is stopped.
    layer_size: SizeValue,
        field layer_bytes: u64 = super::DEFAULT_LAYER_BYTES,
        env size, set |_, v| v.bytes(),
        line |c| size_text(c.layer_bytes);
    /// Most checkout files an agent's `apply` may delete or truncate (the
    /// user's `berth apply` has no such bound).
    apply_max_deletes: usize,
        field apply_max_deletes: usize = super::DEFAULT_APPLY_MAX_DELETES,
        env count, set keep,
        line |c| c.apply_max_deletes.to_string();
    /// Paths an agent's `apply` never touches, beside `berth.toml`,
    /// `.devcontainer*`, `.berth/` and `.git/` (`.gitignore`-style: `*.pem`,
    /// `secrets/`; default `.env`, where secrets usually live).
    apply_protect: Vec<String>,
        field apply_protect: Vec<String> = vec![".env".into()],
        env list, set keep,
        line |c| c.apply_protect.join(", ");
    /// Agents (MCP clients) may ask for a host job (`runner: "host"`) without
    /// host being the default (`runner = "host"` allows it too).
    allow_host: bool,
        field #[serde(default)] allow_host: bool = false,
        env flag, set keep,
        line |c| c.allow_host.to_string();
    /// Container jobs' engine access: `none` (default) or `scoped` (a
    /// socket of the job's own through which it starts its own children).
    engine: String,
        field #[serde(default)] engine: EngineAccess = EngineAccess::None,
        env text, set |_, v| v.parse(),
        line |c| c.engine.to_string();
    /// Most children a job with a scoped engine may have at once.
    max_children: usize,
        field #[serde(default = "crate::config::container::default_max_children")]
        max_children: usize = super::DEFAULT_MAX_CHILDREN,
        env count, set container::max_children,
        line |c| c.max_children.to_string();
    /// Agents may ask for a scoped engine (`engine: "scoped"`) without it
    /// being the default (`engine = "scoped"` allows it too).
    allow_engine: bool,
        field #[serde(default)] allow_engine: bool = false,
        env flag, set keep,
        line |c| c.allow_engine.to_string();
    /// The `[safety]` table: blocked patterns, the default blocklist, the security log.
    safety: SafetyLayer,
        field safety: SafetyConfig = SafetyConfig::default(),
        env none, via |c, v, _| c.safety.apply(v),
        rows super::safety::describe;
}
more {
    /// The project image to build (`[image] dockerfile` in berth.toml);
    /// `None` when `image` is a name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    image_build: Option<crate::model::ProjectBuild> = None,
    /// A trusted devcontainer.json's `postCreateCommand`: set by the
    /// manager for the project's jobs, never read from a config file.
    #[serde(skip)]
    post_create: Option<crate::model::PostCreate> = None,
    /// Limits for container jobs that ask for none (each field always set;
    /// the `cpus`, `memory` and `pids` keys).
    limits: Limits = default_limits(),
    /// Where each value came from, by key.
    #[serde(skip)]
    sources: BTreeMap<&'static str, Source> = BTreeMap::new(),
    /// The project files the user trusts (`[trust]` of the user's config).
    #[serde(skip)]
    trusted: Trusted = Trusted::default(),
    /// What the project file set to loosen the sandbox without being
    /// trusted: those values were not applied (the user's are in their
    /// place), and starts are refused naming the first (`berth trust`).
    #[serde(skip)]
    untrusted: Vec<Loosening> = Vec::new(),
    /// Why the project file was not used (malformed, a symlink): jobs are
    /// refused with this line; `ps`, `logs`, `down` and the rest work on.
    #[serde(skip)]
    project_refusal: Option<String> = None,
    /// The project's `berth.toml` (or the caller's `BERTH_CONFIG`), if any.
    #[serde(skip)]
    project_file: Option<PathBuf> = None,
    /// Where the user's own config file is (whether or not it exists).
    #[serde(skip)]
    user_file: Option<PathBuf> = None,
}
}

impl Config {
    /// Checks across keys, after a whole layer is merged: the container
    /// limits are valid together (a memory limit too small for the pids…).
    fn after_layer(&mut self) -> Result<()> {
        self.limits.validate()
    }
}
