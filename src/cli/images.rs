//! `berth images build [sandbox|dev|all]`, `berth images pull IMAGE` (one
//! updating progress line on a terminal, plain lines otherwise), and the
//! `berth test` / `berth build` verbs: the project's detected or configured
//! command run like `berth run --shell` (in the project's image).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};

use super::Global;
use super::run::RunArgs;
use crate::images::PullProgress;
use crate::mcp::project::{ProjectTask, append_args, project_command};

#[derive(Debug, Subcommand)]
pub enum ImagesAction {
    /// Build berth's local images from images/ (runs images/build.sh):
    /// `sandbox` (default, busybox), `dev` (the Debian toolchain image), `all`.
    Build {
        /// Which image: sandbox (default), dev or all.
        #[arg(value_parser = ["sandbox", "dev", "all"])]
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
    /// Extra arguments appended to the command (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

pub async fn images(global: &Global, action: ImagesAction) -> anyhow::Result<i32> {
    match action {
        ImagesAction::Build { target } => build(global, target.as_deref().unwrap_or("sandbox")),
        ImagesAction::Pull { image } => pull(global, &image).await,
    }
}

/// Find `images/build.sh` (the workspace, else the source tree berth was
/// built from) and run it.
fn build(global: &Global, target: &str) -> anyhow::Result<i32> {
    let config = global.config()?;
    let candidates = [
        config.workspace.join("images/build.sh"),
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("images/build.sh"),
    ];
    let Some(script) = candidates.iter().find(|p| p.is_file()) else {
        anyhow::bail!(
            "images/build.sh not found (looked in {} and {}); run this from a berth checkout",
            candidates[0].display(),
            candidates[1].display()
        );
    };
    let status = std::process::Command::new("bash")
        .arg(script)
        .arg(target)
        .status()?;
    Ok(status.code().unwrap_or(1))
}

async fn pull(global: &Global, image: &str) -> anyhow::Result<i32> {
    let config = global.config()?;
    let engine = crate::runner::docker::Engine::new(&config);
    let show = progress_printer();
    let ms = engine.pull(image, show).await?;
    eprintln!("berth: pulled {image} in {:.1}s", ms as f64 / 1000.0);
    Ok(0)
}

/// Pull progress on stderr: one line rewritten in place on a terminal,
/// else a plain line at most every 2 s (and the last one).
pub fn progress_printer() -> crate::runner::docker::ProgressFn {
    let tty = std::io::stderr().is_terminal();
    let last: Mutex<Option<Instant>> = Mutex::new(None);
    Arc::new(move |p: PullProgress| {
        let done = p.done;
        let mut e = std::io::stderr().lock();
        if tty {
            let _ = write!(e, "\r\x1b[2K{}", p.line());
            if done {
                let _ = writeln!(e);
            }
            return;
        }
        let mut last = last.lock().unwrap();
        if done || last.is_none_or(|t| t.elapsed() >= Duration::from_secs(2)) {
            *last = Some(Instant::now());
            let _ = writeln!(e, "{}", p.line());
        }
    })
}

/// Show the pulls of an in-process manager's starting job on stderr (the
/// only job it has); the task ends once the job started or ended.
pub fn follow_pulls(manager: &crate::Manager) -> tokio::task::JoinHandle<()> {
    let mut events = manager.events_log().subscribe();
    let show = progress_printer();
    tokio::spawn(async move {
        while let Ok(e) = events.recv().await {
            match e.kind {
                crate::EventKind::Pulling(p) => show(p),
                crate::EventKind::Started { .. } | crate::EventKind::Ended { .. } => break,
                _ => {}
            }
        }
    })
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
    argv.extend(["--", cmd.as_str()]);
    let run = Wrap::try_parse_from(argv)?.run;
    super::run::run(global, run).await
}
