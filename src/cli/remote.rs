//! `berth run` through a running daemon. `-d` starts a background job and
//! returns at once (after its ready conditions, if any); without `-d` the
//! output streams live until the job ends or its foreground budget runs out,
//! at which point it is promoted to background (never killed) and the card
//! says why.

use std::io::IsTerminal;
use std::time::Duration;

use super::out::{StdoutClosed, out, outln};
use super::run::{RunArgs, exit_code};
use crate::api::WaitRequest;
use crate::api::client::Client;
use crate::card;
use crate::config::Config;
use crate::manager::{Foreground, KillRequest};
use crate::model::{EndedBy, JobInfo, JobSpec, OnTimeout, StopCause};
use crate::output::{Line, Stream};
use crate::ready::WaitOutcome;

fn color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Exit code of a foreground `berth run` whose job was moved to the background
/// and is still running (EX_TEMPFAIL: "not done yet, look again later"). Never 0,
/// so a CI step cannot mistake a job that is still running for a success.
pub const STILL_RUNNING_EXIT: i32 = 75;

/// Create the job through the daemon. `None` when no daemon answered the
/// create request (nothing was started; the caller may run it itself).
pub async fn run(
    client: &Client,
    args: &RunArgs,
    mut spec: JobSpec,
    config: &Config,
) -> anyhow::Result<Option<i32>> {
    if args.detach {
        spec.background = true;
        return detached(client, args, spec).await;
    }
    spec.background = false;
    spec.timeout = Some(args.timeout.unwrap_or(config.timeout_secs));
    spec.on_timeout = match args.on_timeout.as_deref() {
        Some("kill") => OnTimeout::Kill,
        _ => OnTimeout::Background,
    };
    let Some(view) = create(client, &mut spec, !args.json).await? else {
        return Ok(None);
    };
    super::run::warn_fallback(&view.info);
    let id = view.info.id.clone();
    let mut sse = client
        .follow(&format!("/v1/jobs/{id}/logs/follow?since=1&batch=true"))
        .await?;
    // The printer tells us when stdout is closed (`berth run -- yes | head -1`):
    // like a shell pipeline, the job is then stopped rather than left running.
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    let printer = tokio::spawn(async move {
        while let Some((event, data)) = sse.next().await {
            if event == "end" {
                break;
            }
            if let Ok(lines) = serde_json::from_str::<Vec<Line>>(&data)
                && print_lines(&lines).is_err()
            {
                let _ = closed_tx.send(());
                return;
            }
        }
    });
    let stop = |cause: StopCause| KillRequest {
        ended_by: Some(EndedBy::User),
        reason: Some(cause.to_string()),
        ..Default::default()
    };
    let outcome = tokio::select! {
        out = client.foreground(&id) => out?,
        _ = tokio::signal::ctrl_c() => {
            client.kill(&id, &stop(StopCause::Interrupted)).await?;
            client.foreground(&id).await?
        }
        Ok(()) = closed_rx => {
            client.kill(&id, &stop(StopCause::StdoutClosed)).await?;
            client.foreground(&id).await?;
            return Err(StdoutClosed.into());
        }
    };
    match outcome {
        Foreground::Finished { info } => {
            // Let the follower print the last lines (it stops at the end event).
            let _ = tokio::time::timeout(Duration::from_secs(5), printer).await;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&info)?);
            } else if let Some(line) = super::run::oom_line(&info) {
                eprintln!("{line}");
            }
            Ok(Some(exit_code(&info)))
        }
        Foreground::Promoted { info } => {
            printer.abort();
            let snippet = client.info(&id).await.map(|v| v.snippet).unwrap_or_default();
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                print_card(&info, &snippet)?;
            }
            eprintln!(
                "berth: {id} {}; it keeps running in the background (exit {STILL_RUNNING_EXIT}). \
                 Wait for it with `berth wait {id}`, follow it with `berth logs {id} --follow`, \
                 stop it with `berth kill {id}`; `--on-timeout kill` kills at the budget instead.",
                info.promotion_reason
                    .clone()
                    .unwrap_or_else(|| "moved to background".into()),
            );
            Ok(Some(STILL_RUNNING_EXIT))
        }
    }
}

/// Print a batch of lines in order: runs of one stream are written as one
/// chunk (a write per batch, not per line). Errors when stdout is closed.
pub(super) fn print_lines(lines: &[Line]) -> Result<(), StdoutClosed> {
    use std::io::Write;
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut i = 0;
    while i < lines.len() {
        let stream = lines[i].stream;
        buf.clear();
        while i < lines.len() && lines[i].stream == stream {
            buf.extend_from_slice(lines[i].text.as_bytes());
            buf.push(b'\n');
            i += 1;
        }
        match stream {
            Stream::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(&buf)
                    .and_then(|_| out.flush())
                    .map_err(|_| StdoutClosed)?;
            }
            Stream::Stderr => {
                let _ = std::io::stderr().lock().write_all(&buf);
            }
        }
    }
    Ok(())
}

fn print_card(info: &JobInfo, snippet: &str) -> Result<(), StdoutClosed> {
    out!("{}", card::render(info, snippet, color()));
    Ok(())
}

/// `POST /v1/jobs`; `None` when no daemon answers on the socket. With
/// `progress`, the pull or build the request waits for is shown on stderr.
async fn create(
    client: &Client,
    spec: &mut JobSpec,
    progress: bool,
) -> anyhow::Result<Option<crate::api::JobView>> {
    if !progress {
        return answer(client.create(spec).await);
    }
    let token = super::progress::token();
    spec.client_ref = Some(token.clone());
    let printer = super::progress::Printer::new();
    let follower = super::progress::follow_remote(client.clone(), token, printer.clone());
    let created = client.create(spec).await;
    let image = created.as_ref().ok().and_then(|v| v.info.image.as_ref());
    super::progress::stop_remote(follower, &printer, image).await;
    answer(created)
}

fn answer(created: crate::error::Result<crate::api::JobView>) -> anyhow::Result<Option<crate::api::JobView>> {
    match created {
        Ok(view) => Ok(Some(view)),
        Err(crate::Error::NoDaemon { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

async fn detached(client: &Client, args: &RunArgs, mut spec: JobSpec) -> anyhow::Result<Option<i32>> {
    let ready = spec.ready.clone();
    let Some(view) = create(client, &mut spec, !args.json && !args.quiet).await? else {
        return Ok(None);
    };
    super::run::warn_fallback(&view.info);
    let id = view.info.id.clone();
    let mut waited = None;
    if !ready.is_empty() {
        let req = WaitRequest {
            conditions: ready,
            timeout: Some(args.timeout.unwrap_or(60.0)),
        };
        waited = Some(client.wait(&id, &req).await?);
    }
    // The create answer is the record; only a wait makes it worth asking again
    // (ports and snippet may have moved on), and `-q` shows neither.
    let view = if waited.is_some() && !args.quiet {
        client.info(&id).await?
    } else {
        view
    };
    if args.json {
        let v = serde_json::json!({"job": view, "ready": waited});
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else if args.quiet {
        outln!("{id}");
    } else {
        outln!("{id}");
        for m in &view.info.ports {
            let note = m.note.as_ref().map(|n| format!(" ({n})")).unwrap_or_default();
            outln!("  port {}/{} → {}{note}", m.port, m.proto, m.url());
        }
        print_card(&view.info, &view.snippet)?;
    }
    Ok(Some(match waited {
        None | Some(WaitOutcome::Ready { .. }) => 0,
        Some(other) => {
            eprintln!(
                "berth: {id} did not become ready: {}",
                serde_json::to_string(&other)?
            );
            1
        }
    }))
}
