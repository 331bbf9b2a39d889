//! CLI verbs that talk to a running manager: `status`, `wait`, `kill`,
//! `resume`, `bg`, `prune` (`ps` and `events` are `lists.rs`, `logs` is
//! `logs.rs`). Each
//! is a thin client of the socket API; `--json` prints the API's answer as
//! is, otherwise cards, with job text shown inert (`crate::inert`).

use std::io::IsTerminal;

use clap::Args;

use super::Global;
use super::out::{out, outln};
use crate::api::client::Client;
use crate::api::{WaitRequest, socket_path};
use crate::card;
use crate::error::Error;
use crate::manager::KillRequest;
use crate::model::{EndedBy, JobId};
use crate::ready::WaitOutcome;

pub async fn client(global: &Global) -> Result<Client, Error> {
    let config = global.config()?;
    match Client::connect(&config).await {
        Ok(c) => Ok(c),
        Err(e @ Error::SocketDenied { .. }) => Err(e),
        Err(_) => Err(Error::NoDaemon {
            instance: config.instance.clone(),
            socket: socket_path(&config),
        }),
    }
}

/// Colour for cards: stdout is a terminal and `NO_COLOR` is unset.
pub(super) fn color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

pub(super) fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

#[derive(Debug, Args)]
pub struct IdArgs {
    /// Job id (`job-3` or `3`).
    #[arg(add = super::complete::job_ids())]
    pub id: String,
    /// Print JSON (the API's answer) instead of text.
    #[arg(long)]
    pub json: bool,
}

pub async fn status(global: &Global, a: IdArgs) -> anyhow::Result<i32> {
    let v = client(global)
        .await?
        .info_with_usage(&JobId::from(a.id.as_str()))
        .await?;
    if a.json {
        print_json(&v)?;
    } else {
        out!("{}", card::render(&v.info, &v.snippet, color()));
    }
    Ok(0)
}

/// `berth wait ID` with no condition and no `--timeout`: as long as the
/// job runs (the API takes seconds below 1e9; this is ~3 years).
const UNTIL_END_SECS: f64 = 1e8;

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// Job id (`job-3` or `3`).
    #[arg(add = super::complete::job_ids())]
    pub id: String,
    /// The job's port accepts connections (at the server itself).
    #[arg(long)]
    pub port: Option<u16>,
    /// An output line matches REGEX.
    #[arg(long, value_name = "REGEX")]
    pub log: Option<String>,
    /// GET PATH through the mapped port answers 2xx/3xx (or --status).
    #[arg(long, value_name = "PATH")]
    pub http: Option<String>,
    /// Expected HTTP status for --http.
    #[arg(long)]
    pub status: Option<u16>,
    /// Seconds to wait (default 60 with a condition; with none, until the
    /// job ends).
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Print JSON (the API's answer) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// With a condition: exit 0 when ready; 1 when the job ended first or the
/// timeout passed. With none (as `docker wait`, `pueue wait`): wait for the
/// end and exit with the job's code (1 when it has none: killed, lost).
pub async fn wait(global: &Global, a: WaitArgs) -> anyhow::Result<i32> {
    let conditions = crate::model::ReadyAsk {
        port: a.port,
        log: a.log,
        http: a.http,
        status: a.status,
    }
    .conditions();
    let until_end = conditions.is_empty();
    let timeout = match a.timeout {
        Some(t) => t,
        None if until_end => UNTIL_END_SECS,
        None => crate::config::DEFAULT_WAIT_SECS,
    };
    let c = client(global).await?;
    let req = WaitRequest {
        conditions,
        timeout: Some(timeout),
    };
    let out = c.wait(&JobId::from(a.id.as_str()), &req).await?;
    if a.json {
        print_json(&out)?;
    }
    let code = match &out {
        WaitOutcome::Ready {
            elapsed_ms,
            url,
            matched_line,
            ..
        } => {
            if !a.json {
                let what = url.clone().or(matched_line.clone()).unwrap_or_default();
                outln!("ready after {elapsed_ms} ms {}", crate::inert::visible(&what));
            }
            0
        }
        WaitOutcome::Exited {
            status,
            exit_code,
            reason,
            ..
        } => {
            let words = super::outcome::ended_words(status, *exit_code, reason.as_deref());
            if until_end {
                if !a.json {
                    let line = format!("{} ended: {words}", a.id);
                    outln!("{}", crate::inert::visible(&line));
                }
                exit_code.unwrap_or(1)
            } else {
                if !a.json {
                    let line = format!("berth: {} ended before it was ready: {words}", a.id);
                    eprintln!("{}", crate::inert::visible(&line));
                }
                1
            }
        }
        WaitOutcome::TimedOut { elapsed_ms, pending } => {
            if !a.json {
                let what = if until_end { "still running" } else { "not ready" };
                eprintln!(
                    "berth: {} {what} after {elapsed_ms} ms; still waiting for: {} (the job runs on)",
                    a.id,
                    pending.join(", ")
                );
            }
            1
        }
    };
    Ok(code)
}

#[derive(Debug, Args)]
pub struct KillArgs {
    /// Job id (`job-3` or `3`).
    #[arg(add = super::complete::job_ids())]
    pub id: String,
    /// Who is stopping it: agent or user (default: user when typed at a
    /// terminal, agent otherwise).
    #[arg(long = "as", value_name = "WHO")]
    pub ended_by: Option<String>,
    /// First signal number (default 15, TERM).
    #[arg(long)]
    pub signal: Option<i32>,
    /// Seconds between the signal and SIGKILL.
    #[arg(long)]
    pub grace: Option<f64>,
    /// Why it was stopped (shown in the card and the `ended` event).
    #[arg(long)]
    pub reason: Option<String>,
    /// Print JSON (the API's answer) instead of text.
    #[arg(long)]
    pub json: bool,
}

pub async fn kill(global: &Global, a: KillArgs) -> anyhow::Result<i32> {
    let mut ended_by: Option<EndedBy> = a.ended_by.as_deref().map(str::parse).transpose()?;
    // A person at a terminal typed it; agents and scripts run berth without
    // one (they say `--as user` when a user asked them to stop the job).
    if ended_by.is_none() && std::io::stdin().is_terminal() {
        ended_by = Some(EndedBy::User);
    }
    let req = KillRequest {
        ended_by,
        reason: a.reason,
        signal: a.signal,
        grace: a.grace,
        ..Default::default()
    };
    let out = client(global)
        .await?
        .kill(&JobId::from(a.id.as_str()), &req)
        .await?;
    if a.json {
        print_json(&out)?;
    } else {
        let by = out
            .ended_by
            .map(|b| format!(", ended_by {b}"))
            .unwrap_or_default();
        outln!("{}: {} ({}{by})", out.job, out.result, out.status.name());
    }
    Ok(0)
}

pub async fn resume(global: &Global, a: IdArgs) -> anyhow::Result<i32> {
    let v = client(global).await?.resume(&JobId::from(a.id.as_str())).await?;
    if a.json {
        print_json(&v)?;
    } else {
        outln!("{} resumed as {}", a.id, v.info.id);
        out!("{}", card::render(&v.info, &v.snippet, color()));
    }
    Ok(0)
}

pub async fn background(global: &Global, a: IdArgs) -> anyhow::Result<i32> {
    let info = client(global)
        .await?
        .background(&JobId::from(a.id.as_str()), EndedBy::User)
        .await?;
    if a.json {
        print_json(&info)?;
    } else {
        outln!("{}: moved to background by user", info.id);
    }
    Ok(0)
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Every finished run (running and queued jobs are never pruned).
    #[arg(long, conflicts_with = "older_than")]
    pub all: bool,
    /// Finished runs that ended longer ago than this: `90s`, `30m`, `12h`, `7d`.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub older_than: Option<f64>,
    /// Print JSON (the API's answer) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `90s`, `30m`, `12h`, `7d`, or plain seconds → seconds.
fn parse_age(s: &str) -> Result<f64, String> {
    crate::job::parse_secs(s)
}

pub async fn prune(global: &Global, a: PruneArgs) -> anyhow::Result<i32> {
    let req = crate::manager::PruneRequest {
        all: a.all,
        older_than_secs: a.older_than,
    };
    let out = client(global).await?.prune(&req).await?;
    if a.json {
        print_json(&out)?;
    } else {
        outln!("pruned {} finished run(s); {} kept", out.pruned.len(), out.kept);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::parse_age;

    #[test]
    fn ages_parse_with_units_and_bad_ones_say_why() {
        assert_eq!(parse_age("90"), Ok(90.0));
        assert_eq!(parse_age("30m"), Ok(1800.0));
        assert_eq!(parse_age("7d"), Ok(604_800.0));
        assert!(parse_age("7w").unwrap_err().contains("unknown unit"));
        assert!(parse_age("-1h").unwrap_err().contains("not a duration"));
        assert!(parse_age("").is_err());
    }
}
