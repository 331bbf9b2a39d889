//! `berth run`: build a [`JobSpec`] from flags and run it in the foreground.
//!
//! Without a daemon there is no background to promote to, so this runs its
//! own in-process manager: output is streamed live, `--timeout` kills the
//! process group (exit 124, partial output kept), `--keep-alive` runs, feeds
//! the input, waits, kills and exits 0, and Ctrl+C stops the job (exit 130).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use serde_json::json;

use super::Global;
use super::out::{StdoutClosed, outln};
use crate::api::client::Client;
use crate::card::cap_head_tail;
use crate::config::Config;
use crate::error::Error;
use crate::job::parse_size;
use crate::manager::{KillRequest, Manager};
use crate::model::{EndedBy, JobInfo, JobSpec, JobStatus, Limits, OnTimeout, PortSpec, StopCause};
use crate::output::{JobOutput, LogQuery, Stream};
use crate::ready::ReadyCondition;

/// Output kept in `--json` answers, per stream.
pub const JSON_OUTPUT_CAP: usize = 16 * 1024;

#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Start in the background through the daemon and return at once.
    #[arg(short = 'd', long)]
    pub detach: bool,
    /// When the background cap is reached, wait in line instead of failing.
    #[arg(long)]
    pub queue: bool,
    /// Run in this process even when a daemon is running.
    #[arg(long)]
    pub no_daemon: bool,
    /// Foreground budget in seconds; without a daemon the job is killed when it runs out (exit 124).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Run, feed the input, wait SECS, then stop it and exit 0 (for programs that never exit).
    #[arg(long, value_name = "SECS")]
    pub keep_alive: Option<f64>,
    /// Text for stdin (stdin is closed after it).
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
    /// auto, docker or host.
    #[arg(long)]
    pub runner: Option<String>,
    /// Docker image (default: the project's image, else berth/dev when
    /// built, else berth/sandbox:latest).
    #[arg(long)]
    pub image: Option<String>,
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
    /// Environment variable KEY=VALUE (repeatable).
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
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
    /// The command and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

impl RunArgs {
    /// The spec these flags describe (nothing is started).
    pub fn spec(&self, config: &Config) -> Result<JobSpec, Error> {
        let mut spec = if self.shell {
            JobSpec::shell(self.command.join(" "))
        } else {
            JobSpec::argv(self.command.clone())
        };
        spec.runner = match &self.runner {
            Some(r) => r.parse()?,
            None => config.runner,
        };
        spec.image = self.image.clone();
        spec.pull = self.pull.as_deref().map(str::parse).transpose()?;
        spec.timeout = self.timeout;
        spec.keep_alive = self.keep_alive;
        spec.input = match (&self.input, &self.input_file) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(f)) => {
                Some(std::fs::read_to_string(f).map_err(|e| Error::io("read input file", f, e))?)
            }
            _ => None,
        };
        spec.ports = self
            .ports
            .iter()
            .map(|p| p.parse::<PortSpec>())
            .collect::<Result<_, _>>()?;
        spec.watch = self.watch.clone();
        spec.limits = Limits {
            cpus: self.cpus,
            memory: self.memory.as_deref().map(parse_size).transpose()?,
            pids: self.pids,
        };
        let mut env = BTreeMap::new();
        for kv in &self.env {
            let (k, v) = kv.split_once('=').ok_or_else(|| Error::InvalidValue {
                what: "env",
                input: kv.clone(),
                message: "expected KEY=VALUE".into(),
            })?;
            env.insert(k.to_string(), v.to_string());
        }
        spec.env = env;
        spec.cwd = self.cwd.clone();
        caller_context(&mut spec, config);
        // `--runner auto` is the caller's word over its own BERTH_RUNNER.
        if let Some(r) = &self.runner {
            spec.caller_env.insert("BERTH_RUNNER".into(), r.clone());
        }
        spec.label = self.label.clone();
        spec.queue = self.queue;
        if let Some(p) = self.ready_port {
            spec.ready.push(ReadyCondition::port(p));
        }
        if let Some(re) = &self.ready_log {
            spec.ready.push(ReadyCondition::log(re.clone()));
        }
        if let Some(path) = &self.ready_http {
            spec.ready.push(ReadyCondition::http(path.clone()));
        }
        spec.validate()?;
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

pub async fn run(global: &Global, args: RunArgs) -> anyhow::Result<i32> {
    let config = global.config()?;
    let mut spec = args.spec(&config)?;
    if !args.no_daemon {
        // No health check first: the create request itself tells whether a
        // daemon answers (one round trip fewer on every run).
        let client = Client::new(&config);
        match super::remote::run(&client, &args, spec.clone(), &config).await? {
            Some(code) => return Ok(code),
            None if args.detach => {
                return Err(Error::NoDaemon {
                    instance: config.instance.clone(),
                    socket: client.socket().to_path_buf(),
                }
                .into());
            }
            None => {}
        }
    }
    // No manager to promote to: a budget that runs out kills.
    spec.background = false;
    spec.on_timeout = OnTimeout::Kill;
    let manager = Manager::new(config)?;
    let pulls = (!args.json).then(|| super::progress::follow_local(&manager));
    let handle = manager.start_from(spec, "cli").await;
    if let Some((task, printer)) = pulls {
        if handle.is_ok() {
            // It ends at the job's `started` event, after the last progress line.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), task).await;
        } else {
            task.abort();
            let _ = task.await;
        }
        // A failed pull or build leaves its line open: the error goes below it.
        printer.close();
    }
    let handle = handle?;
    warn_fallback(&handle.info()?);
    let output = manager.output(&handle.id)?;
    // The follower ends early when stdout is closed (`berth run -- yes | head -1`);
    // like a shell pipeline, the job is then stopped instead of running on unseen.
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    let follower = (!args.json).then(|| {
        let output = output.clone();
        tokio::spawn(async move {
            if follow(output).await.is_err() {
                let _ = closed_tx.send(());
            }
        })
    });
    let stop = |cause: StopCause| KillRequest {
        ended_by: Some(EndedBy::User),
        reason: Some(cause.to_string()),
        ..Default::default()
    };
    let info = tokio::select! {
        info = handle.wait_end() => info?,
        _ = tokio::signal::ctrl_c() => {
            manager.kill(&handle.id, stop(StopCause::Interrupted)).await?;
            handle.wait_end().await?
        }
        Ok(()) = closed_rx => {
            manager.kill(&handle.id, stop(StopCause::StdoutClosed)).await?;
            handle.wait_end().await?;
            manager.shutdown().await;
            return Err(StdoutClosed.into());
        }
    };
    if let Some(f) = follower {
        let _ = f.await;
    }
    // Every line and the final record reach the store before this process exits.
    manager.shutdown().await;
    let code = exit_code(&info);
    if args.json {
        print_json(&info, &output, code)?;
    } else if let JobStatus::TimedOut = info.status {
        eprintln!(
            "berth: {} timed out after {}s; its process group was killed (exit 124)",
            info.id,
            info.spec.timeout.unwrap_or_default()
        );
    } else if let JobStatus::StartFailed { error } = &info.status {
        eprintln!("berth: {} failed to start: {error}", info.id);
    } else if let Some(line) = oom_line(&info) {
        eprintln!("{line}");
    }
    Ok(code)
}

/// One line for a job the kernel killed at its memory limit: which limit,
/// and how to raise it.
pub(super) fn oom_line(info: &JobInfo) -> Option<String> {
    match &info.status {
        JobStatus::Killed {
            reason: StopCause::Oom,
            ..
        } => {
            let limit = info
                .limits
                .memory
                .map(|m| format!(" ({} MiB)", m >> 20))
                .unwrap_or_default();
            Some(format!(
                "berth: {} hit its memory limit{limit} and was killed (exit 137); raise it with --memory 4g, or memory = \"4g\" in berth.toml",
                info.id
            ))
        }
        _ => None,
    }
}

/// Say on stderr that `auto` ran the job on the host because no engine answered.
pub(super) fn warn_fallback(info: &JobInfo) {
    if let Some(note) = &info.runner_note {
        eprintln!("berth: warning: {}: {note}", info.id);
    }
    if let Some(note) = &info.project_note {
        eprintln!("berth: note: {}: {note}", info.id);
    }
}

/// The CLI's exit code for a finished job.
pub(super) fn exit_code(info: &JobInfo) -> i32 {
    match &info.status {
        JobStatus::Killed {
            reason: StopCause::KeepAliveExpired { .. },
            ..
        } => 0,
        JobStatus::Killed {
            reason: StopCause::Interrupted,
            ..
        } => 130,
        s => s.exit_code().unwrap_or(1),
    }
}

/// Print lines to stdout/stderr as they arrive, until all output is in or
/// stdout is closed.
async fn follow(output: Arc<JobOutput>) -> Result<(), StdoutClosed> {
    let mut rx = output.subscribe();
    let mut since = 1;
    loop {
        let progress = *rx.borrow_and_update();
        let Ok((pieces, next)) = output.read_chunks(since, 10_000, 256 * 1024) else {
            return Ok(());
        };
        {
            // A run of one stream is one write: lines are copied into a
            // buffer, not written one by one.
            let mut text = Vec::with_capacity(64 * 1024);
            for (i, (chunk, range)) in pieces.iter().enumerate() {
                for l in range.clone() {
                    text.extend_from_slice(chunk.text(l).as_bytes());
                    text.push(b'\n');
                }
                if pieces.get(i + 1).is_some_and(|(c, _)| c.stream == chunk.stream) {
                    continue;
                }
                match chunk.stream {
                    Stream::Stdout => {
                        let mut out = std::io::stdout().lock();
                        out.write_all(&text)
                            .and_then(|_| out.flush())
                            .map_err(|_| StdoutClosed)?;
                    }
                    // Keep the two streams in seq order on a shared terminal.
                    Stream::Stderr => {
                        let _ = std::io::stderr().lock().write_all(&text);
                    }
                }
                text.clear();
            }
        }
        since = next;
        if !pieces.is_empty() {
            continue;
        }
        if progress.closed && since > progress.last_seq {
            return Ok(());
        }
        if rx.changed().await.is_err() {
            return Ok(());
        }
    }
}

fn collect(output: &JobOutput, stream: Stream) -> String {
    let page = output.read(&LogQuery {
        since: Some(1),
        stream: Some(stream),
        ..Default::default()
    });
    match page {
        Ok(p) => p
            .lines
            .iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("(output unreadable: {e})"),
    }
}

fn print_json(info: &JobInfo, output: &JobOutput, code: i32) -> anyhow::Result<()> {
    let (stdout, cut_out) = cap_head_tail(&collect(output, Stream::Stdout), JSON_OUTPUT_CAP);
    let (stderr, cut_err) = cap_head_tail(&collect(output, Stream::Stderr), JSON_OUTPUT_CAP);
    // As the safety seed's ExecResult: a timed-out run has no exit code of
    // its own (`exit_code: null`, `timed_out: true`); berth itself exits 124.
    let timed_out = matches!(info.status, JobStatus::TimedOut);
    let v = json!({
        "job_id": info.id,
        "status": info.status.name(),
        "exit_code": (!timed_out).then_some(code),
        "timed_out": timed_out,
        "ended_by": info.ended_by,
        "reason": info.reason,
        "stdout": stdout,
        "stderr": stderr,
        "truncated": cut_out + cut_err > 0,
        "truncated_bytes": cut_out + cut_err,
        "log_files": info.logs,
        "runner": info.runner,
        "runner_note": info.runner_note,
    });
    outln!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}
