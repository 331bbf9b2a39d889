//! `berth images build [sandbox|dev|all|project]`, `berth images pull IMAGE`
//! (progress as `progress.rs` shows it), and the
//! `berth test` / `berth build` verbs: the project's detected or configured
//! command run like `berth run --shell` (in the project's image).

use clap::{Args, Parser, Subcommand};

use super::Global;
use super::progress::{Printer, build_fn, pull_fn};
use super::run_args::RunArgs;
use crate::mcp::project::{ProjectTask, append_args, project_command};

#[derive(Debug, Subcommand)]
pub enum ImagesAction {
    /// Build berth's local images from the recipes built into berth:
    /// `sandbox` (default, busybox), `dev` (the Debian toolchain image), `all`;
    /// or `project`: this project's image from its Dockerfile (berth.toml
    /// `[image] dockerfile`, or devcontainer.json `build.dockerfile`).
    Build {
        /// Which image: sandbox (default), dev, all or project.
        #[arg(value_parser = ["sandbox", "dev", "all", "project"])]
        target: Option<String>,
    },
    /// Pull an image from its registry, showing progress.
    Pull {
        /// The image, e.g. python:3.12 or registry.example.com/team/app:1.
        image: String,
    },
}

/// `berth test` / `berth build`.
#[derive(Debug, Args)]
pub struct ProjectArgs {
    /// Start in the background through the daemon and return the id.
    #[arg(short = 'd', long)]
    pub detach: bool,
    /// Engine access: none or scoped (the suite's testcontainers start
    /// containers of the job's own through it).
    #[arg(long, value_name = "ACCESS", value_parser = ["none", "scoped"])]
    pub engine: Option<String>,
    /// Foreground budget in seconds (as `berth run --timeout`).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Image to run in (default: the project's).
    #[arg(long)]
    pub image: Option<String>,
    /// Print JSON (as `berth run --json`) instead of the output.
    #[arg(long)]
    pub json: bool,
    /// Extra arguments appended to the command (after `--`; a misspelled
    /// flag before it is an error).
    #[arg(trailing_var_arg = true)]
    pub args: Vec<String>,
}

pub async fn images(global: &Global, action: ImagesAction) -> anyhow::Result<i32> {
    match action {
        ImagesAction::Build { target } if target.as_deref() == Some("project") => build_project(global).await,
        ImagesAction::Build { target } => build(global, target.as_deref().unwrap_or("sandbox")),
        ImagesAction::Pull { image } => pull(global, &image).await,
    }
}

/// Run berth's own `images/build.sh` from the recipes compiled into this
/// binary (`recipes.rs`): never a workspace's copy, which the agent writes.
/// The daemon image packs this very binary.
fn build(_global: &Global, target: &str) -> anyhow::Result<i32> {
    let recipes = super::recipes::Recipes::write()
        .map_err(|e| anyhow::anyhow!("could not write berth's image recipes to a private directory: {e}"))?;
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(recipes.script()).arg(target);
    if let Ok(exe) = std::env::current_exe() {
        cmd.env("BERTH_BINARY", exe);
    }
    let status = cmd.status()?;
    Ok(status.code().unwrap_or(1))
}

/// Build (or find already built) the project image from its Dockerfile.
async fn build_project(global: &Global) -> anyhow::Result<i32> {
    let config = global.config()?;
    let engine = crate::runner::docker::Engine::new(&config);
    // What the build's egress proxy denies goes to the security log, as a job's does.
    let safety = crate::safety::Safety::from_config(&config)?;
    let cwd = config.workspace.clone();
    let on_denial: crate::net::DenialFn = std::sync::Arc::new(move |d: crate::net::Denial| {
        let target = format!("{}:{}", d.host, d.port);
        let command = "berth images build project";
        safety.log_egress("build", command, &cwd, &d.request(), &target, &d.reason);
        let request = crate::inert::visible(&d.request()).into_owned();
        eprintln!("berth: the build's egress proxy denied {request}: {}", d.reason);
    });
    match engine
        .build_project(&config, build_fn(Printer::new()), on_denial)
        .await?
    {
        Some(image) => {
            let how = match image.build_ms {
                Some(ms) => format!("built in {:.1}s", ms as f64 / 1000.0),
                None => "already built for this context; reused".into(),
            };
            eprintln!("berth: project image {} {how} ({})", image.name, image.why);
            Ok(0)
        }
        None => {
            eprintln!(
                "berth: this project names no Dockerfile: add `[image] dockerfile = \"Dockerfile\"` to berth.toml (or build.dockerfile to .devcontainer/devcontainer.json)"
            );
            Ok(2)
        }
    }
}

async fn pull(global: &Global, image: &str) -> anyhow::Result<i32> {
    let config = global.config()?;
    let engine = crate::runner::docker::Engine::new(&config);
    let ms = engine.pull(image, pull_fn(Printer::new())).await?;
    eprintln!("berth: pulled {image} in {:.1}s", ms as f64 / 1000.0);
    Ok(0)
}

/// `berth test` / `berth build`: the project's command as `berth run --shell`.
pub async fn project(global: &Global, task: ProjectTask, a: ProjectArgs) -> anyhow::Result<i32> {
    let config = global.config()?;
    let cmd = append_args(&project_command(&config, task)?, &a.args);
    let label = match task {
        ProjectTask::Test => "test",
        ProjectTask::Build => "build",
    };
    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        run: RunArgs,
    }
    let mut argv = vec!["berth", "--shell", "--label", label];
    if a.detach {
        argv.push("-d");
    }
    if let Some(engine) = &a.engine {
        argv.extend(["--engine", engine.as_str()]);
    }
    let timeout = a.timeout.map(|t| t.to_string());
    if let Some(t) = &timeout {
        argv.extend(["--timeout", t.as_str()]);
    }
    if let Some(image) = &a.image {
        argv.extend(["--image", image.as_str()]);
    }
    if a.json {
        argv.push("--json");
    }
    argv.extend(["--", cmd.as_str()]);
    let run = Wrap::try_parse_from(argv)?.run;
    super::run::run(global, run).await
}
