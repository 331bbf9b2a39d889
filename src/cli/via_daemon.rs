//! The CLI's path through the daemon: `berth run` as requests to the
//! instance's running daemon (not a remote engine; those are
//! `runner/docker/remote.rs`). `-d` starts a background job and returns at
//! once (after its ready conditions, if any); without `-d` one request
//! creates the job and streams it, driven by the one foreground driver
//! (`foreground.rs`) until the job ends or its budget runs out, at which
//! point it is promoted to background (never killed) and the card says why.

use super::foreground::{self, Backend};
use super::out::{StdoutClosed, out, outln};
use super::outcome::warn_fallback;
use super::run_args::RunArgs;
use crate::api::JobView;
use crate::api::client::Client;
use crate::api::frames as wire;
use crate::card;
use crate::config::DEFAULT_WAIT_SECS;
use crate::manager::KillRequest;
use crate::model::{EndedBy, JobId, JobInfo, JobSpec, OnTimeout};
use crate::ready::WaitOutcome;

/// Create the job through the daemon. `None` when no daemon answered the
/// create request (nothing was started; the caller may run it itself).
pub async fn run(client: &Client, args: &RunArgs, mut spec: JobSpec) -> anyhow::Result<Option<i32>> {
    if args.detach {
        spec.background = true;
        return detached(client, args, spec).await;
    }
    spec.background = false;
    // No `--timeout`: the manager gives the job its project's budget.
    spec.on_timeout = match args.on_timeout.as_deref() {
        Some("kill") => OnTimeout::Kill,
        _ => OnTimeout::Background,
    };
    // One request creates the job and streams it: its record, its output as
    // raw bytes, then how it ended (or that it moved to the background).
    // The manager answers once the job exists (its image pulled or built):
    // meanwhile that progress is shown.
    let progress = Progress::start(client, &mut spec, !args.json);
    let started = async {
        let mut frames = client.run(&spec).await?;
        let job = frames.next().await;
        Ok::<_, crate::Error>((frames, job))
    }
    .await;
    let (frames, job) = match started {
        Ok(f) => f,
        Err(crate::Error::NoDaemon { .. }) => {
            progress.stop(None).await;
            return Ok(None);
        }
        Err(e) => {
            progress.stop(None).await;
            return Err(e.into());
        }
    };
    let view: JobView = match job {
        Some((wire::JOB, json)) => serde_json::from_slice(&json)?,
        _ => {
            progress.stop(None).await;
            anyhow::bail!("the manager ended the run's stream before naming the job; is it shutting down?")
        }
    };
    progress.stop(view.info.image.as_ref()).await;
    // Ctrl+C stops the job; a SIGTERM or SIGHUP ends only this client (the
    // job goes on in the daemon under its budget).
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let interrupted = async move {
        interrupt.recv().await;
    };
    let code = foreground::drive(Backend::Daemon(client), frames, &view.info, args, interrupted).await?;
    Ok(Some(code))
}

fn print_card(info: &JobInfo, snippet: &str) -> Result<(), StdoutClosed> {
    out!("{}", card::render(info, snippet, super::jobs::color()));
    Ok(())
}

/// `POST /v1/jobs`; `None` when no daemon answers on the socket. With
/// `progress`, the pull or build the request waits for is shown on stderr.
async fn create(
    client: &Client,
    spec: &mut JobSpec,
    progress: bool,
) -> anyhow::Result<Option<crate::api::JobView>> {
    let progress = Progress::start(client, spec, progress);
    let created = client.create(spec).await;
    progress
        .stop(created.as_ref().ok().and_then(|v| v.info.image.as_ref()))
        .await;
    answer(created)
}

/// The pull/build progress of a job being created, shown while the request
/// that creates it is under way (found in the daemon's events by a token
/// the spec carries).
struct Progress(
    Option<(
        tokio::task::JoinHandle<()>,
        std::sync::Arc<super::progress::Printer>,
    )>,
);

impl Progress {
    fn start(client: &Client, spec: &mut JobSpec, show: bool) -> Self {
        // A host job has no image to pull or build: no progress to follow,
        // and no second connection to open beside the run's own request.
        if !show || spec.runner == crate::model::RunnerChoice::Host {
            return Progress(None);
        }
        let token = super::progress::token();
        spec.client_ref = Some(token.clone());
        let printer = super::progress::Printer::new();
        let follower = super::progress::follow_remote(client.clone(), token, printer.clone());
        Progress(Some((follower, printer)))
    }

    async fn stop(self, image: Option<&crate::model::ImageChoice>) {
        if let Some((follower, printer)) = self.0 {
            super::progress::stop_remote(follower, &printer, image).await;
        }
    }
}

fn answer(created: crate::error::Result<crate::api::JobView>) -> anyhow::Result<Option<crate::api::JobView>> {
    match created {
        Ok(view) => Ok(Some(view)),
        Err(crate::Error::NoDaemon { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

async fn detached(client: &Client, args: &RunArgs, mut spec: JobSpec) -> anyhow::Result<Option<i32>> {
    // One request either way: with ready conditions the manager answers once
    // they are met (or the wait gave up), with the job as it is then.
    let (view, waited) = if spec.ready.is_empty() {
        let Some(view) = create(client, &mut spec, !args.json && !args.quiet).await? else {
            return Ok(None);
        };
        (view, None)
    } else {
        let progress = Progress::start(client, &mut spec, !args.json && !args.quiet);
        let created = client
            .create_ready(
                &spec,
                args.ready_timeout.or(args.timeout).unwrap_or(DEFAULT_WAIT_SECS),
            )
            .await;
        progress
            .stop(created.as_ref().ok().and_then(|c| c.job.info.image.as_ref()))
            .await;
        match created {
            Ok(c) => (c.job, Some(c.ready)),
            Err(crate::Error::NoDaemon { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    };
    warn_fallback(&view.info);
    let id = view.info.id.clone();
    let unready = waited
        .as_ref()
        .is_some_and(|w| !matches!(w, WaitOutcome::Ready { .. }));
    if args.json {
        let v = serde_json::json!({"job": view, "ready": waited});
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else if args.quiet || unready {
        // Not ready: the id, then one line on stderr below (what was
        // awaited, the last output, whether it runs on), not the card.
        outln!("{id}");
    } else {
        outln!("{id}");
        for m in &view.info.ports {
            let note = m.note.as_ref().map(|n| format!(" ({n})")).unwrap_or_default();
            if m.host_port == 0 {
                // Never `http://127.0.0.1:0`: nothing was published.
                outln!(
                    "  port {}/{}: not published (the job is not running)",
                    m.port,
                    m.proto
                );
            } else {
                outln!("  port {}/{} → {}{note}", m.port, m.proto, m.url());
            }
        }
        print_card(&view.info, &view.snippet)?;
    }
    let Some(outcome) = waited.filter(|w| !matches!(w, WaitOutcome::Ready { .. })) else {
        return Ok(Some(0));
    };
    let running = matches!(outcome, WaitOutcome::TimedOut { .. });
    let stopped = running && args.ready_kill && {
        let req = KillRequest {
            ended_by: Some(EndedBy::User),
            reason: Some("not ready in time (--ready-kill)".into()),
            ..Default::default()
        };
        client.kill(&id, &req).await.is_ok()
    };
    if !args.json {
        let line = not_ready(&id, &outcome, &view.snippet, stopped);
        eprintln!("berth: {}", crate::inert::visible(&line));
    }
    Ok(Some(1))
}

/// One line for a `-d` start whose ready conditions did not hold: what was
/// awaited, the last output line, and whether the job still runs.
fn not_ready(id: &JobId, outcome: &WaitOutcome, snippet: &str, stopped: bool) -> String {
    let last = snippet
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!("; last output: {}", l.trim()))
        .unwrap_or_else(|| "; no output yet".into());
    match outcome {
        WaitOutcome::Exited {
            status,
            exit_code,
            reason,
            ..
        } => {
            let words = super::outcome::ended_words(status, *exit_code, reason.as_deref());
            format!("{id} ended before it was ready: {words}{last}")
        }
        WaitOutcome::TimedOut { elapsed_ms, pending } => {
            let then = if stopped {
                "it was stopped (--ready-kill)".to_string()
            } else {
                format!("it is still running (`berth kill {id}` stops it)")
            };
            format!(
                "{id} not ready after {:.1} s; still waiting for: {}{last}; {then}",
                *elapsed_ms as f64 / 1000.0,
                pending.join(", ")
            )
        }
        WaitOutcome::Ready { .. } => format!("{id} is ready"),
    }
}
