//! Admission: what a start asks, completed and checked once, before a slot
//! is taken. The faces (CLI, HTTP API, MCP) pass what their caller said;
//! this is the one place that
//! - resolves the caller's project (`project.rs`),
//! - fills what the spec leaves unset from that project ([`fill_defaults`]:
//!   the runner and the foreground budget, written into the spec so the
//!   record shows what applies; the TUI's ETA reads the budget there),
//! - validates the completed spec (`JobSpec::validate`, once),
//! - resolves the working directory (once, to the real path the job runs in),
//! - runs the command filter and workspace guard, and resolves the runner.
//!
//! The image and the container limits also come from the job's project but
//! are applied at launch, where they depend on the runner and the engine:
//! `Engine::prepare` (called by the manager's `launch`) chooses the image
//! (`images::choose_image`: the spec's, else the project's, else berth/dev
//! when built, else the sandbox) and records it as `info.image`; a container
//! job that asks for no limits gets the project's `limits` (`create.rs`), and
//! the record's `limits` says what was enforced. Neither is copied into the
//! spec: a host job must not claim limits it cannot enforce, and a spec that
//! names no image keeps following its project's on resume.

use std::path::PathBuf;
use std::sync::Arc;

use super::Inner;
use super::project::Project;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::model::{EngineAccess, Isolation, JobSpec, RunnerChoice, RunnerKind};
use crate::runner;
use crate::watch::Watchers;

/// What a foreground job whose spec names no `timeout` gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DefaultBudget {
    /// The project's `timeout` (60 s unless its berth.toml or `BERTH_TIMEOUT`
    /// says otherwise): a manager that can promote (the daemon, `berth mcp`,
    /// library use) moves the job to the background when it runs out.
    #[default]
    Project,
    /// No budget: the caller waits for the end. `berth run --no-daemon`
    /// without `--timeout`: its manager dies with it, so there is no
    /// background to promote to, and a budget would kill the job.
    Unlimited,
}

/// A start that passed admission: the completed spec and what it runs under.
pub(super) struct Admitted {
    pub spec: JobSpec,
    pub project: Arc<Project>,
    pub kind: RunnerKind,
    /// Set when `auto` fell back to the host.
    pub runner_note: Option<String>,
    /// The directory the job runs in (the one the guard checked).
    pub cwd: PathBuf,
    pub watchers: Watchers,
    /// How it writes its workspace, and why (`layers.rs`).
    pub writes: crate::model::Writes,
}

/// Complete and check `spec` for a start on behalf of `client`.
pub(super) async fn admit(
    inner: &Arc<Inner>,
    mut spec: JobSpec,
    client: &str,
    budget: DefaultBudget,
) -> Result<Admitted> {
    // The caller's project: its workspace, rules, runner, budget, image and limits.
    let project = inner.projects.resolve(&spec)?;
    refuse_untrusted(inner, &project, &spec, client)?;
    spec.caller_env.clear();
    refuse_agent_loosening(&project, &spec, client)?;
    let engine_asked = spec.engine.is_some();
    fill_defaults(&mut spec, &project.config, budget);
    spec.validate()?;
    // A job may ask for less egress than its project allows, never more.
    if let Some(asked) = spec.egress
        && asked > project.config.egress
    {
        return Err(Error::InvalidSpec(format!(
            "egress `{asked}` is looser than this project's `{}`: a job may only tighten it (set egress in berth.toml to loosen)",
            project.config.egress
        )));
    }
    let watchers = Inner::watchers_for(&spec)?;
    let workspace = &project.config.workspace;
    let (real, cwd) = working_dir(&mut spec, &project)?;
    // Before any runner sees the command: the filter (off the async workers,
    // with a deadline) and the workspace guard.
    project.safety.check_bounded(&spec, &real, client).await?;
    let (kind, runner_note) = resolve_runner(
        inner,
        spec.runner,
        project.config.fallback_allowed(client == "mcp"),
    )
    .await?;
    // A trusted devcontainer.json's variables and ports, for container jobs.
    if kind == RunnerKind::Docker
        && let Some(dev) = &project.dev
    {
        let network = spec.network.unwrap_or(project.config.network);
        dev.apply_to(&mut spec, network);
    }
    let writes = super::layers::decide(&mut spec, &project.config, client, &inner.owner)?;
    // A container job must not reach the user's own config (the trust
    // table): from there it could loosen every later job.
    if kind == RunnerKind::Docker
        && let Some(file) = &project.config.user_file
        && let Some(dir) = file.parent()
        && crate::trust::contains(workspace, dir)
    {
        return Err(Error::InvalidSpec(format!(
            "the workspace `{}` contains your berth config ({}), which a job could rewrite to loosen its own sandbox; use a project directory as the workspace (run berth there, or set `workspace`)",
            workspace.display(),
            file.display()
        )));
    }
    if kind == RunnerKind::Swarm {
        swarm_fits(&spec)?;
    }
    if spec.engine == Some(EngineAccess::Scoped) {
        check_engine(&mut spec, kind, engine_asked, &project.config)?;
    }
    isolation(&mut spec, kind, &project.config, client == "mcp")?;
    // Extra mounts: container jobs only, each inside the workspace (the
    // record keeps the resolved path; the create checks it again).
    if kind == RunnerKind::Host && !spec.mounts.is_empty() {
        return Err(crate::job::host_mounts());
    }
    for m in &mut spec.mounts {
        m.resolve_in(workspace)?;
        pin(m, workspace)?;
    }
    // A host job's environment must not change what runs (LD_PRELOAD, PATH …).
    if kind == RunnerKind::Host {
        project.safety.check_env(&spec, &real, client)?;
    }
    Ok(Admitted {
        spec,
        project,
        kind,
        runner_note,
        cwd,
        watchers,
        writes,
    })
}

/// The refusal of a start whose project file cannot be used as it is (a
/// refusal of the project, loosenings the user has not trusted, or a file
/// a job wrote), recorded in the security log.
fn refuse_untrusted(inner: &Arc<Inner>, project: &Project, spec: &JobSpec, client: &str) -> Result<()> {
    if let Some(why) = &project.config.project_refusal {
        return Err(Error::ProjectFile { why: why.clone() });
    }
    // A project file that loosens the sandbox without the user's trust: its
    // values were not applied, and nothing starts until the user decides.
    if let Some(l) = project.config.untrusted.first() {
        let refusal = l.refusal();
        let source = format!("config:{}", l.key);
        return Err(recorded(
            project,
            "untrusted_config",
            refusal,
            source,
            spec,
            client,
        ));
    }
    if let Err(refusal) = super::planted::check(inner, &project.config) {
        let source = "config:written-by-a-job".into();
        return Err(recorded(project, "planted_config", refusal, source, spec, client));
    }
    Ok(())
}

/// An agent's own words cannot loosen either: a host job, a swarm job or
/// a scoped engine through MCP only where the user's config (or a trusted
/// file) allows it. The refusal is recorded in the security log.
fn refuse_agent_loosening(project: &Project, spec: &JobSpec, client: &str) -> Result<()> {
    if client != "mcp" {
        return Ok(());
    }
    let c = &project.config;
    // (asked and not allowed, key, value, the switch that allows it, its env).
    let rules = [
        // A host job only where it says `runner = "host"` or `allow_host = true`.
        (
            spec.runner == RunnerChoice::Host && !(c.runner == RunnerChoice::Host || c.allow_host),
            "runner",
            "\"host\"",
            "allow_host = true",
            "BERTH_ALLOW_HOST=1",
        ),
        // A swarm job (the workspace copied to other machines, a way out
        // with ports) only where the user's config says `runner = "swarm"`.
        (
            spec.runner == RunnerChoice::Swarm && c.runner != RunnerChoice::Swarm,
            "runner",
            "\"swarm\"",
            "runner = \"swarm\"",
            "BERTH_RUNNER=swarm",
        ),
        // A scoped engine only where it says `engine = "scoped"` or `allow_engine = true`.
        (
            spec.engine == Some(EngineAccess::Scoped)
                && !(c.engine == EngineAccess::Scoped || c.allow_engine),
            "engine",
            "\"scoped\"",
            "allow_engine = true",
            "BERTH_ALLOW_ENGINE=1",
        ),
    ];
    match rules.into_iter().find(|rule| rule.0) {
        Some((_, key, value, switch, env)) => {
            let refusal = Error::AgentLoosening {
                key,
                value: value.into(),
                switch,
                env,
            };
            let source = format!("mcp:{key}");
            Err(recorded(
                project,
                "untrusted_config",
                refusal,
                source,
                spec,
                client,
            ))
        }
        None => Ok(()),
    }
}

/// `refusal`, written to the project's security log as `kind` (from
/// `source`), at the caller's directory (or the workspace).
fn recorded(
    project: &Project,
    kind: &'static str,
    refusal: Error,
    source: String,
    spec: &JobSpec,
    client: &str,
) -> Error {
    let at = project.caller_dir.as_ref().unwrap_or(&project.config.workspace);
    project
        .safety
        .record(kind, refusal.to_string(), source, spec, at, client);
    refusal
}

/// The directory the job runs in: the real path the guard checks, and the
/// one it is entered by (`spec.cwd` set to the real path when it names one).
fn working_dir(spec: &mut JobSpec, project: &Project) -> Result<(PathBuf, PathBuf)> {
    let workspace = &project.config.workspace;
    // A job that names no directory runs where its caller is, when that is
    // inside the project (as a shell would); else at the workspace root.
    if spec.cwd.is_none() {
        spec.cwd = project.caller_dir.clone().filter(|c| c.starts_with(workspace));
    }
    let asked = runner::resolve_cwd(workspace, spec.cwd.as_ref());
    if !asked.is_dir() {
        return Err(Error::BadCwd { path: asked });
    }
    // Resolved once, here: the guard checks this real path and the job runs
    // in it, so a symlink swapped after the check (the job may wait in the
    // queue) cannot move the job out of the workspace.
    let real = std::fs::canonicalize(&asked).map_err(|_| Error::BadCwd { path: asked.clone() })?;
    // A job without a directory runs at the workspace root as the project
    // names it (the runners mount and enter it by that name).
    let cwd = match spec.cwd {
        Some(_) => {
            spec.cwd = Some(real.clone());
            real.clone()
        }
        None => workspace.clone(),
    };
    Ok((real, cwd))
}

/// Fill what `spec` leaves to its project (`config`): the runner (`auto`
/// means "the project's runner", which may itself be `auto`) and, for a
/// foreground job, the budget as `budget` says. What the caller said stays.
pub(super) fn fill_defaults(spec: &mut JobSpec, config: &Config, budget: DefaultBudget) {
    if spec.runner == RunnerChoice::Auto {
        spec.runner = config.runner;
    }
    if spec.engine.is_none() && config.engine == EngineAccess::Scoped {
        spec.engine = Some(EngineAccess::Scoped);
    }
    if !spec.background && spec.timeout.is_none() {
        spec.timeout = match budget {
            DefaultBudget::Project => Some(config.timeout_secs),
            DefaultBudget::Unlimited => None,
        };
    }
}

/// A scoped engine is for container jobs on a network of their own: a host
/// job asked for one is refused (one that got it from its project goes
/// without: a host job can reach whatever its user can), and so is a job on
/// a shared network or none (its children could not be reached, or would
/// be reached by others).
fn check_engine(spec: &mut JobSpec, kind: RunnerKind, asked: bool, config: &Config) -> Result<()> {
    if kind == RunnerKind::Host {
        if asked {
            return Err(Error::InvalidSpec(
                "a scoped engine (--engine scoped) is for container jobs, and this job runs on the host; use --runner docker".into(),
            ));
        }
        spec.engine = None;
        return Ok(());
    }
    let network = spec.network.unwrap_or(config.network);
    if network != crate::model::Network::Isolated {
        return Err(Error::InvalidSpec(format!(
            "a scoped engine needs the job's own network (network isolated), not {network}: its children are reached through it"
        )));
    }
    Ok(())
}

/// What a swarm job cannot have: each is a file or socket of this machine,
/// which a task on another node does not see.
fn swarm_fits(spec: &JobSpec) -> Result<()> {
    let refuse = |what: &str| {
        Err(Error::InvalidSpec(format!(
            "{what} is not offered on a swarm (the task runs on another machine); use --runner docker for this job"
        )))
    };
    match () {
        _ if !spec.mounts.is_empty() => refuse("an extra mount (-v)"),
        _ if spec.engine == Some(EngineAccess::Scoped) => refuse("a scoped engine (--engine scoped)"),
        _ if spec.input.is_some() => refuse("input on stdin"),
        _ => Ok(()),
    }
}

/// What `auto` falls back to when no engine answers.
pub const FALLBACK_NOTE: &str = "no container engine answered: runner auto fell back to the host, where the job runs without a sandbox (set fallback = false to refuse instead)";

/// Resolve the runner. `auto` with no engine runs on the host only when
/// `fallback` allows, and then with a note (shown on the card, in answers
/// and as an event); with `fallback = false` it is the engine error.
async fn resolve_runner(
    inner: &Arc<Inner>,
    choice: RunnerChoice,
    fallback: bool,
) -> Result<(RunnerKind, Option<String>)> {
    if choice != RunnerChoice::Auto {
        return Ok((inner.engine.resolve(choice).await?, None));
    }
    if !fallback {
        return Ok((inner.engine.resolve(RunnerChoice::Docker).await?, None));
    }
    let kind = inner.engine.resolve(choice).await?;
    let note = (kind == RunnerKind::Host).then(|| FALLBACK_NOTE.to_string());
    Ok((kind, note))
}

/// The job's kernel boundary: the project's `isolation` (for an agent's
/// session, `agent_isolation` when stronger), or a stronger one the job
/// asks for; a weaker one is refused, as is gVisor where it cannot hold
/// (a host job; a scoped engine, whose children would run under runc).
fn isolation(spec: &mut JobSpec, kind: RunnerKind, config: &Config, agent: bool) -> Result<()> {
    let floor = match agent {
        true => config.isolation.max(config.agent_isolation),
        false => config.isolation,
    };
    if let Some(asked) = spec.isolation
        && asked < floor
    {
        return Err(Error::InvalidSpec(format!(
            "isolation `{asked}` is weaker than this project's `{floor}`: a job may only strengthen it (set isolation in your own config to weaken)"
        )));
    }
    let resolved = spec.isolation.unwrap_or(floor);
    if resolved == Isolation::Gvisor {
        if kind == RunnerKind::Swarm {
            return Err(Error::InvalidSpec(
                "isolation \"gvisor\" is not offered on a swarm (its tasks run under each node's default runtime); use --runner docker for this job".into(),
            ));
        }
        if kind == RunnerKind::Host {
            return Err(Error::InvalidSpec(
                "isolation \"gvisor\" needs a container job; run it with --runner docker (or set isolation = \"container\" in your own config for host jobs)".into(),
            ));
        }
        if spec.engine == Some(EngineAccess::Scoped) {
            return Err(Error::InvalidSpec(
                "a scoped engine cannot serve a job under gVisor: runsc mounts no host Unix socket (the engine's) unless registered with --host-uds=open, and its children would run under runc; drop --engine scoped or use isolation = \"container\"".into(),
            ));
        }
    }
    spec.isolation = (kind == RunnerKind::Docker).then_some(resolved);
    Ok(())
}

/// Pin a resolved `-v` source: what the launch mounts must be this very
/// directory (`runner/docker/launch/pins.rs`); a swap for another one, or
/// a symlink, between now and then is refused.
fn pin(m: &mut crate::model::MountSpec, workspace: &std::path::Path) -> Result<()> {
    let shown = format!("{}:{}", m.source.display(), m.target);
    let bad = |message: String| Error::InvalidValue {
        what: "mount",
        input: shown.chars().take(200).collect(),
        message,
    };
    let root = std::fs::canonicalize(workspace)
        .map_err(|e| Error::io("resolve the workspace root", workspace, e))?;
    let inner = m.source.strip_prefix(&root).unwrap_or(std::path::Path::new(""));
    let dir = crate::images::beneath::Dir::open_root(&root)
        .and_then(|r| r.dir(inner))
        .map_err(|e| {
            bad(match e.raw_os_error() {
                Some(e) if e == nix::errno::Errno::ENOTDIR as i32 => format!(
                    "`{}` is a file; mount the directory that holds it (only directories can be pinned against a swap)",
                    m.source.display()
                ),
                _ => format!("`{}` could not be opened: {e}", m.source.display()),
            })
        })?;
    let ident = dir.ident();
    m.pinned = Some((ident.dev, ident.ino));
    Ok(())
}
