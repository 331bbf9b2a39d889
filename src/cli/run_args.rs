//! The flags of `berth run` (and of `berth test`/`build`, which run a
//! project command the same way) and the [`JobSpec`] they make: what every
//! face can ask goes through the core's one [`RunRequest`], then what only
//! a terminal has is added (env and input files, `-e KEY` from this shell,
//! volumes from here, the caller's context: directory, `BERTH_*` variables,
//! which the manager resolves the project from).

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;

use crate::config::Config;
use crate::error::Error;
use crate::model::{JobSpec, ReadyAsk, RunRequest};

#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Start in the background through the daemon and return at once.
    #[arg(short = 'd', long)]
    pub detach: bool,
    /// With -d: when the cap of running jobs is reached, wait in line
    /// instead of failing (a foreground run waits anyway: see --no-queue).
    #[arg(long)]
    pub queue: bool,
    /// A foreground run at the cap fails at once, naming the running jobs,
    /// instead of waiting in line for a slot.
    #[arg(long, conflicts_with = "queue")]
    pub no_queue: bool,
    /// Run the job in this process (its manager ends with it) instead of
    /// through the instance's daemon, which `berth run` otherwise starts on
    /// demand; when a daemon already serves the instance, the run goes
    /// through it all the same (one cap, one store).
    #[arg(long)]
    pub no_daemon: bool,
    /// Foreground budget in seconds; without a daemon the job is killed when it runs out (exit 124).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Run, feed the input, wait SECS, then stop it and exit 0 (for programs that never exit).
    #[arg(long, value_name = "SECS")]
    pub keep_alive: Option<f64>,
    /// Text for stdin (closed after it, or with --keep-alive when that ends).
    #[arg(long, conflicts_with = "input_file")]
    pub input: Option<String>,
    /// File whose contents go to stdin.
    #[arg(long, value_name = "FILE")]
    pub input_file: Option<PathBuf>,
    /// Run the command words as one `sh -c` command line.
    #[arg(long)]
    pub shell: bool,
    /// Publish a port: `3000`, `3000/tcp`, `8080:3000`.
    #[arg(short = 'p', long = "port", value_name = "PORT")]
    pub ports: Vec<String>,
    /// Regex on output; each matching line is a watch_hit event.
    #[arg(long, value_name = "REGEX")]
    pub watch: Vec<String>,
    /// Print one JSON object at the end instead of streaming.
    #[arg(long)]
    pub json: bool,
    /// With -d: print only the job id.
    #[arg(short = 'q', long, requires = "detach")]
    pub quiet: bool,
    /// When the foreground budget runs out through a daemon: `background` (default: the job keeps
    /// running and berth exits 75) or `kill` (the process group is killed, exit 124).
    #[arg(long, env = "BERTH_ON_TIMEOUT", value_name = "WHAT", value_parser = ["background", "kill"])]
    pub on_timeout: Option<String>,
    /// auto, docker, host or swarm (a one-replica service on the swarm whose manager DOCKER_HOST names).
    #[arg(long)]
    pub runner: Option<String>,
    /// Docker image (default: the project's image, else berth/dev when
    /// built, else berth/sandbox:latest).
    #[arg(long)]
    pub image: Option<String>,
    /// The job's network (containers): isolated (a berth bridge of its own,
    /// the default), bridge (the engine's default bridge, shared with other
    /// containers), none, or project (the project's container jobs share one
    /// network namespace: they reach each other on localhost and by label).
    #[arg(long, value_name = "NET")]
    pub network: Option<String>,
    /// What the job may reach outside (containers): none, or proxy (only
    /// the hosts of egress_allow); no looser than the project's egress.
    #[arg(long, value_name = "WHAT")]
    pub egress: Option<String>,
    /// What stands between the job and the host's kernel (containers):
    /// container (the engine's default runtime) or gvisor (gVisor's kernel,
    /// `runsc`); no weaker than the project's isolation.
    #[arg(long, value_name = "KIND", value_parser = ["container", "gvisor"])]
    pub isolation: Option<String>,
    /// How the job writes its workspace: direct (the checkout itself, the
    /// CLI's default), layer (a layer of its own: `berth diff` shows it,
    /// `berth apply` brings it to the checkout) or read-only.
    #[arg(long, value_name = "MODE", value_parser = ["layer", "direct", "read-only"])]
    pub write: Option<String>,
    /// Write layer NAME (made when new, or a job's id to join its layer);
    /// implies --write layer.
    #[arg(long, value_name = "NAME")]
    pub layer: Option<String>,
    /// Engine access (containers): none (default) or scoped (an engine
    /// socket of the job's own, through which its tests start containers
    /// of its own, and nothing else).
    #[arg(long, value_name = "ACCESS", value_parser = ["none", "scoped"])]
    pub engine: Option<String>,
    /// When to pull the image: missing (default), always or never.
    #[arg(long, value_name = "WHEN", value_parser = ["missing", "always", "never"])]
    pub pull: Option<String>,
    /// CPU limit in cores, e.g. 0.5.
    #[arg(long)]
    pub cpus: Option<f64>,
    /// Memory limit, e.g. 256m.
    #[arg(long)]
    pub memory: Option<String>,
    /// Process count limit.
    #[arg(long)]
    pub pids: Option<i64>,
    /// Environment variable KEY=VALUE, or KEY to pass this shell's value
    /// (which keeps a secret out of `ps`, where every local user sees
    /// berth's own arguments) (repeatable).
    #[arg(short = 'e', long = "env", value_name = "KEY[=VALUE]")]
    pub env: Vec<String>,
    /// Read variables from FILE as `docker run --env-file` does: KEY=VALUE
    /// lines (values literal), KEY alone from this shell, `#` comments;
    /// `-e` wins over the file (repeatable).
    #[arg(long = "env-file", value_name = "FILE")]
    pub env_file: Vec<PathBuf>,
    /// Container jobs: bind-mount HOST (a path inside the workspace; a
    /// relative one is from here) at CONTAINER, read-only with `:ro`
    /// (repeatable, at most 16).
    #[arg(short = 'v', long = "volume", value_name = "HOST:CONTAINER[:ro]")]
    pub volume: Vec<String>,
    /// Working directory (relative to the workspace root).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Friendly label for cards.
    #[arg(long)]
    pub label: Option<String>,
    /// Readiness: the job's port accepts connections.
    #[arg(long, value_name = "PORT")]
    pub ready_port: Option<u16>,
    /// Readiness: an output line matches REGEX.
    #[arg(long, value_name = "REGEX")]
    pub ready_log: Option<String>,
    /// Readiness: GET PATH answers 2xx/3xx.
    #[arg(long, value_name = "PATH")]
    pub ready_http: Option<String>,
    /// Seconds `-d` waits for the ready conditions (default: --timeout, else 60).
    #[arg(long, value_name = "SECS")]
    pub ready_timeout: Option<f64>,
    /// Stop the job when it is not ready in time (by default it runs on).
    #[arg(long)]
    pub ready_kill: bool,
    /// The command and its arguments: it starts at the first word that is
    /// not a flag, or after `--` (so a misspelled flag is an error, not a
    /// command to run, as with `docker run`).
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<String>,
}

impl RunArgs {
    /// The spec these flags describe (nothing is started): only what the
    /// caller said; the manager fills the rest from the caller's project.
    pub fn spec(&self, config: &Config) -> Result<JobSpec, Error> {
        let mut spec = if self.shell {
            JobSpec::shell(self.command.join(" "))
        } else {
            JobSpec::argv(self.command.clone())
        };
        // What every face can ask, parsed as MCP's tools have theirs.
        RunRequest {
            runner: self.runner.clone(),
            image: self.image.clone(),
            pull: self.pull.clone(),
            network: self.network.clone(),
            egress: self.egress.clone(),
            isolation: self.isolation.clone(),
            write: match (&self.write, &self.layer) {
                (None, Some(_)) => Some("layer".into()),
                (w, _) => w.clone(),
            },
            layer: self.layer.clone(),
            engine: self.engine.clone(),
            ports: self.ports.clone(),
            cwd: self.cwd.clone(),
            cpus: self.cpus,
            memory: self.memory.clone(),
            pids: self.pids,
            read_only: None,
            timeout: self.timeout,
            keep_alive: self.keep_alive,
            input: self.input.clone(),
            env: BTreeMap::new(),
            watch: self.watch.clone(),
            label: self.label.clone(),
            // A foreground run waits for its turn (parallel CI steps share
            // the cap); a background start says at once that it cannot.
            queue: self.queue || (!self.detach && !self.no_queue),
            ready: ReadyAsk {
                port: self.ready_port,
                log: self.ready_log.clone(),
                http: self.ready_http.clone(),
                status: None,
            },
        }
        .apply(&mut spec)?;
        // What only a terminal has: files to read, this shell's variables,
        // paths from where berth runs, and who is asking.
        if let Some(f) = &self.input_file {
            spec.input = Some(std::fs::read_to_string(f).map_err(|e| Error::io("read input file", f, e))?);
        }
        let mut env = BTreeMap::new();
        for f in &self.env_file {
            env.extend(super::env_file::read(f)?);
        }
        for kv in &self.env {
            let (k, v) = match kv.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                // `-e KEY`: the value from this environment, as docker does.
                None => {
                    let v = std::env::var(kv).map_err(|_| Error::InvalidValue {
                        what: "env",
                        input: kv.clone(),
                        message: "expected KEY=VALUE, or KEY set in this environment".into(),
                    })?;
                    (kv.clone(), v)
                }
            };
            env.insert(k, v);
        }
        spec.env = env;
        for v in &self.volume {
            let mut m: crate::model::MountSpec = v.parse()?;
            // As the caller means it: from where berth runs.
            m.source = absolute(&m.source);
            spec.mounts.push(m);
        }
        caller_context(&mut spec, config);
        // `--runner auto` is the caller's word over its own BERTH_RUNNER.
        if let Some(r) = &self.runner {
            spec.caller_env.insert("BERTH_RUNNER".into(), r.clone());
        }
        // Validated by the manager that starts it (with its defaults filled).
        Ok(spec)
    }
}

/// Who is asking, from where: the manager (often a daemon started elsewhere)
/// runs the job under this directory's project, as `--no-daemon` would.
pub fn caller_context(spec: &mut JobSpec, config: &Config) {
    spec.caller_cwd = std::env::current_dir().ok();
    spec.caller_env = crate::manager::project::caller_env();
    if config.sources.get("workspace") == Some(&crate::config::Source::Flag) {
        spec.caller_env.insert(
            "BERTH_WORKSPACE".into(),
            absolute(&config.workspace).display().to_string(),
        );
    }
}

fn absolute(p: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
