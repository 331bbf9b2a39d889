//! `berth run` through a running daemon. `-d` starts a background job and
//! returns at once (after its ready conditions, if any); without `-d` the
//! output streams live until the job ends or its foreground budget runs out,
//! at which point it is promoted to background (never killed) and the card
//! says why.

use std::io::IsTerminal;
use std::time::Duration;

use super::run::{RunArgs, exit_code};
use crate::api::WaitRequest;
use crate::api::client::Client;
use crate::card;
use crate::config::Config;
use crate::job::{EndedBy, JobSpec, OnTimeout};
use crate::manager::{Foreground, KillRequest};
use crate::output::{Line, Stream};
use crate::ready::WaitOutcome;

fn color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

pub async fn run(client: &Client, args: &RunArgs, mut spec: JobSpec, config: &Config) -> anyhow::Result<i32> {
    if args.detach {
        spec.background = true;
        return detached(client, args, spec).await;
    }
    spec.background = false;
    spec.timeout = Some(args.timeout.unwrap_or(config.timeout_secs));
    spec.on_timeout = OnTimeout::Background;
    let view = client.create(&spec).await?;
    super::run::warn_fallback(&view.info);
    let id = view.info.id.clone();
    let mut sse = client
        .follow(&format!("/v1/jobs/{id}/logs/follow?since=1"))
        .await?;
    let printer = tokio::spawn(async move {
        while let Some((event, data)) = sse.next().await {
            if event == "end" {
                break;
            }
            if let Ok(l) = serde_json::from_str::<Line>(&data) {
                match l.stream {
                    Stream::Stdout => println!("{}", l.text),
                    Stream::Stderr => eprintln!("{}", l.text),
                }
            }
        }
    });
    let outcome = tokio::select! {
        out = client.foreground(&id) => out?,
        _ = tokio::signal::ctrl_c() => {
            let req = KillRequest {
                ended_by: Some(EndedBy::User),
                reason: Some("interrupted (Ctrl+C)".into()),
                ..Default::default()
            };
            client.kill(&id, &req).await?;
            client.foreground(&id).await?
        }
    };
    match outcome {
        Foreground::Finished { info } => {
            // Let the follower print the last lines (it stops at the end event).
            let _ = tokio::time::timeout(Duration::from_secs(5), printer).await;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            }
            Ok(exit_code(&info))
        }
        Foreground::Promoted { info } => {
            printer.abort();
            let snippet = client.info(&id).await.map(|v| v.snippet).unwrap_or_default();
            if args.json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                eprintln!(
                    "berth: {} {}; it keeps running. Follow it with `berth logs {} --follow`, stop it with `berth kill {}`.",
                    info.id,
                    info.promotion_reason
                        .clone()
                        .unwrap_or_else(|| "moved to background".into()),
                    info.id,
                    info.id
                );
                print!("{}", card::render(&info, &snippet, color()));
            }
            Ok(0)
        }
    }
}

async fn detached(client: &Client, args: &RunArgs, spec: JobSpec) -> anyhow::Result<i32> {
    let ready = spec.ready.clone();
    let view = client.create(&spec).await?;
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
    let view = client.info(&id).await?;
    if args.json {
        let v = serde_json::json!({"job": view, "ready": waited});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("{id}");
        for m in &view.info.ports {
            let note = m.note.as_ref().map(|n| format!(" ({n})")).unwrap_or_default();
            println!("  port {}/{} → {}{note}", m.port, m.proto, m.url());
        }
        print!("{}", card::render(&view.info, &view.snippet, color()));
    }
    Ok(match waited {
        None | Some(WaitOutcome::Ready { .. }) => 0,
        Some(other) => {
            eprintln!(
                "berth: {id} did not become ready: {}",
                serde_json::to_string(&other)?
            );
            1
        }
    })
}
