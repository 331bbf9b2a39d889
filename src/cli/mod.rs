//! The `berth` command line: argument definitions (clap) and dispatch. Each
//! verb lives in its own file; this one turns global flags into a [`Config`],
//! sets up tracing on stderr, and maps errors to one line and an exit code.

mod complete;
mod copy;
mod daemon;
mod doctor;
mod env_file;
mod exec;
mod foreground;
mod images;
mod jobs;
mod layers;
mod lists;
mod logs;
mod man;
mod offline;
pub(crate) mod out;
mod outcome;
mod progress;
mod recipes;
mod run;
mod run_args;
mod settings;
mod via_daemon;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, Layer};
use crate::error::Error;
use crate::mcp::project::ProjectTask;
use images::ImagesAction;
use out::{StdoutClosed, out};

/// berth: run dev servers, databases, watchers and long test runs in
/// sandboxed background jobs you can wait on, read and stop.
#[derive(Debug, Parser)]
#[command(name = "berth", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every verb understands.
#[derive(Debug, Args, Clone, Default)]
pub struct Global {
    /// Manager instance name (env BERTH_INSTANCE).
    #[arg(long, global = true)]
    pub instance: Option<String>,
    /// Root of berth's state (env BERTH_STATE_DIR).
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Workspace root: jobs run here by default (env BERTH_WORKSPACE).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// (internal) Log to this file, size-capped and rotated (`berth up` and the watchdog).
    #[arg(long, global = true, hide = true, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command: streams its output and exits with its exit code.
    Run(Box<run::RunArgs>),
    /// Run the manager in the foreground, serving the instance socket.
    Daemon {
        /// After a crash: `reap` (default) kills what is left; `adopt` lets the next manager take over.
        #[arg(long)]
        recovery: Option<String>,
        /// Exit after SECS with no job and no MCP session (a daemon `berth run` starts on demand).
        #[arg(long, value_name = "SECS")]
        idle_exit: Option<f64>,
    },
    /// Start the daemon in the background; returns once it answers.
    Up,
    /// Stop the daemon: every job is stopped, then it exits.
    Down,
    /// List jobs (running by default).
    Ps(lists::PsArgs),
    /// Show a job's card.
    Status(jobs::IdArgs),
    /// Read a job's output by tail or by seq; --follow to stream.
    Logs(logs::LogsArgs),
    /// Copy files out of a running container job: `berth cp job-3:report.xml .`
    Cp(copy::CpArgs),
    /// Run a command inside a running container job: `berth exec job-3 -- ls -la`
    Exec(exec::ExecArgs),
    /// List layers: what jobs in `layer` mode wrote instead of the checkout.
    Layers(layers::LayersArgs),
    /// Show a layer's changes (a layer's name or a job's id): --stat (default) or --patch.
    Diff(layers::DiffArgs),
    /// Bring a layer's changes to the checkout (all, or the paths named); conflicts are skipped and named.
    Apply(layers::ApplyArgs),
    /// Throw a layer's changes away.
    Discard(layers::DiscardArgs),
    /// Wait until a job is ready (port, log line, HTTP); with no condition, until it ends (exits with its code).
    Wait(jobs::WaitArgs),
    /// Stop a job (TERM, grace, KILL).
    Kill(jobs::KillArgs),
    /// Run a finished job's command again as a new background job.
    Resume(jobs::IdArgs),
    /// Move a foreground job to background now.
    Bg(jobs::IdArgs),
    /// Print events (starts, readiness, watch hits, promotions, ends).
    Events(lists::EventsArgs),
    /// Forget finished runs: by the history policy (keep_runs, keep_days), all, or by age.
    Prune(jobs::PruneArgs),
    /// Serve MCP on stdio for an agent: a session on the manager serving the instance, or host it (manager + socket) when none does.
    Mcp {
        /// Tool set: canonical (default), all, or a seed-compatible set:
        /// safe_shell, shell, process, exec.
        #[arg(long, default_value = "canonical", value_parser = ["canonical", "all", "safe_shell", "shell", "process", "exec"])]
        tools: String,
    },
    /// The live panel of a running manager's jobs (keys: ←/→ tabs, ↑/↓, Enter, k, d, l (layer diff), r, Ctrl+R, q).
    Tui,
    /// Run the project's tests (detected or `test_command`) in its image; -d for background.
    Test(images::ProjectArgs),
    /// Build the project (detected or `build_command`) in its image; -d for background.
    Build(images::ProjectArgs),
    /// Build berth's local images (no registry needed), or pull one.
    Images {
        #[command(subcommand)]
        action: ImagesAction,
    },
    /// Print a shell completion script (verbs, flags and job ids): `berth completions bash > /etc/bash_completion.d/berth`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Check the instance's state (daemon, store, logs) and repair what is damaged.
    Doctor(doctor::DoctorArgs),
    /// Print the effective configuration and where each value came from.
    Config {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Print the manual's reference of every key (Markdown: default,
        /// variable, whether a project file loosens it) instead.
        #[arg(long, hide = true, conflicts_with = "json")]
        reference: bool,
    },
    /// Write man pages into DIR: berth.1 and one per verb (berth-run.1 …);
    /// e.g. `berth man ~/.local/share/man/man1`.
    Man {
        /// The directory to write the pages into (made when missing).
        dir: PathBuf,
    },
    /// Let this project's berth.toml (and devcontainer.json) loosen the
    /// sandbox: records their content's hash in your own config; any change
    /// to a file needs `berth trust` again.
    Trust(settings::TrustArgs),
}

impl Command {
    /// True for verbs that run a manager (or serve, or build) in this
    /// process, which want worker threads. `berth run` without a daemon runs
    /// its job in-process too, but learns that only once the create request
    /// found no daemon; it then works on either runtime.
    fn runs_a_manager(&self) -> bool {
        match self {
            Command::Run(args) => args.no_daemon,
            Command::Daemon { .. }
            | Command::Mcp { .. }
            | Command::Tui
            | Command::Test(_)
            | Command::Build(_)
            | Command::Images { .. }
            | Command::Up => true,
            _ => false,
        }
    }
}

impl Global {
    fn layer(&self) -> Layer {
        Layer {
            instance: self.instance.clone(),
            state_dir: self.state_dir.clone(),
            workspace: self.workspace.clone(),
            ..Default::default()
        }
    }

    pub fn config(&self) -> Result<Config, Error> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Config::load(&cwd, self.layer())
    }
}

/// Entry point used by `main.rs`.
pub fn main() -> ExitCode {
    // The host-job shim starts for every host job, the watchdog for every
    // manager: no clap, no runtime of the CLI's.
    crate::embed::helpers();
    // A shell asking for completions on TAB (`COMPLETE=bash berth -- …`).
    complete::answer_if_asked();
    let cli = Cli::parse();
    crate::logfile::init_tracing(cli.global.log_file.as_deref());
    // A verb that only talks to a running manager needs no worker threads
    // (starting and joining them is a visible part of a ~5 ms `berth run -d`);
    // those that run a manager, serve, or build get the multi-threaded runtime.
    let mut builder = match cli.command.runs_a_manager() {
        true => tokio::runtime::Builder::new_multi_thread(),
        false => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("berth: could not start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(dispatch(cli));
    // Do not wait for stray blocking tasks (e.g. a stdin reader) at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    ExitCode::from(code.clamp(0, 255) as u8)
}

async fn dispatch(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Run(args) => run::run(&cli.global, *args).await,
        Command::Config { reference: true, .. } => config_reference(),
        Command::Config { json, .. } => settings::show_config(&cli.global, json).await,
        Command::Man { dir } => man::write_pages(&dir),
        Command::Trust(a) => settings::trust(&cli.global, a),
        Command::Completions { shell } => completions(shell),
        Command::Daemon { recovery, idle_exit } => {
            daemon::daemon(&cli.global, recovery.as_deref(), idle_exit).await
        }
        Command::Mcp { tools } => mcp(&cli.global, &tools).await,
        Command::Tui => tui(&cli.global).await,
        Command::Images { action } => images::images(&cli.global, action).await,
        Command::Test(a) => images::project(&cli.global, ProjectTask::Test, a).await,
        Command::Build(a) => images::project(&cli.global, ProjectTask::Build, a).await,
        Command::Up => daemon::up(&cli.global).await,
        Command::Down => daemon::down(&cli.global).await,
        Command::Ps(a) => lists::ps(&cli.global, a).await,
        Command::Status(a) => jobs::status(&cli.global, a).await,
        Command::Logs(a) => logs::logs(&cli.global, a).await,
        Command::Cp(a) => copy::cp(&cli.global, a).await,
        Command::Exec(a) => exec::exec(&cli.global, a).await,
        Command::Layers(a) => layers::list(&cli.global, a).await,
        Command::Diff(a) => layers::diff(&cli.global, a).await,
        Command::Apply(a) => layers::apply(&cli.global, a).await,
        Command::Discard(a) => layers::discard(&cli.global, a).await,
        Command::Wait(a) => jobs::wait(&cli.global, a).await,
        Command::Kill(a) => jobs::kill(&cli.global, a).await,
        Command::Resume(a) => jobs::resume(&cli.global, a).await,
        Command::Bg(a) => jobs::background(&cli.global, a).await,
        Command::Events(a) => lists::events(&cli.global, a).await,
        Command::Prune(a) => jobs::prune(&cli.global, a).await,
        Command::Doctor(a) => doctor::doctor(&cli.global, a).await,
    };
    match result {
        Ok(code) => code,
        Err(e) => report(&e),
    }
}

/// One line on stderr, and the exit code for the error.
pub fn report(e: &anyhow::Error) -> i32 {
    if e.downcast_ref::<StdoutClosed>().is_some() {
        return out::CLOSED_STDOUT_EXIT;
    }
    // A message may quote a job's words (its command, a kill reason).
    eprintln!("berth: {}", crate::inert::visible_lines(&format!("{e:#}")));
    match e.downcast_ref::<Error>() {
        Some(err) => err.exit_code(),
        None => 1,
    }
}

fn completions(shell: clap_complete::Shell) -> anyhow::Result<i32> {
    out!("{}", complete::registration(shell)?);
    Ok(0)
}

/// `berth config --reference`: the manual's page of keys, as committed
/// (`docs/src/reference/config.md`).
fn config_reference() -> anyhow::Result<i32> {
    out!("{}", crate::config::reference_markdown());
    Ok(0)
}

async fn mcp(global: &Global, tools: &str) -> anyhow::Result<i32> {
    let tools: crate::mcp::ToolSet = tools.parse()?;
    crate::daemon::run_mcp(global.config()?, tools).await?;
    Ok(0)
}

async fn tui(global: &Global) -> anyhow::Result<i32> {
    crate::tui::run(global.config()?).await?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every flag and positional of every verb says what it is for in `--help`.
    #[test]
    fn every_argument_has_help_text() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.is_hide_set() {
                    continue;
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "berth", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    /// The bash script registers berth as its own completer (job ids come
    /// from berth at each TAB, see `complete.rs`).
    #[test]
    fn completions_register_berth_for_bash() {
        let script = super::complete::registration(clap_complete::Shell::Bash).unwrap();
        assert!(
            script.contains("complete -o nospace -o bashdefault -o nosort -F _clap_complete_berth berth"),
            "not a bash registration: {script}"
        );
        assert!(script.contains("COMPLETE=\"bash\""), "{script}");
    }
}
