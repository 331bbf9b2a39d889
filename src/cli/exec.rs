//! `berth exec JOB -- CMD [ARGS…]`: run a command inside a running container
//! job, like `docker exec`, through the instance's daemon (which runs the
//! job: `POST /v1/jobs/{id}/exec`). Its stdout and stderr come out as the
//! command wrote them and its exit code is this command's (124 when
//! `--timeout` killed it). It is no job of its own: `berth ps` does not
//! list it. Without a daemon no job of the instance can be running in a
//! container this process could reach, so the store says what became of
//! the job instead.

use std::io::Write;

use clap::Args;

use super::Global;
use crate::api::client::Client;
use crate::api::frames::{EXEC_END, STDERR, STDOUT};
use crate::api::socket_path;
use crate::error::Error;
use crate::manager::{ExecEnd, ExecRequest};
use crate::model::JobId;

/// Exit code of an exec killed by `--timeout` (as `timeout(1)`).
const TIMED_OUT_EXIT: i32 = 124;

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Job id (`job-3` or `3`) of a running container job.
    #[arg(add = super::complete::job_ids())]
    pub id: String,
    /// Kill the command (and what it started) after this many seconds.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// The command and its arguments, after `--` (run directly, no shell).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub argv: Vec<String>,
}

pub async fn exec(global: &Global, a: ExecArgs) -> anyhow::Result<i32> {
    let config = global.config()?;
    let id = JobId::from(a.id.as_str());
    let req = ExecRequest {
        argv: a.argv,
        timeout: a.timeout,
    };
    let client = match Client::connect(&config).await {
        Ok(c) => c,
        Err(_) => return Err(without_daemon(&config, &id).into()),
    };
    let mut frames = client.exec(&id, &req).await?;
    let end = loop {
        match frames.next().await {
            Some((STDOUT, bytes)) => {
                let mut out = std::io::stdout().lock();
                if out.write_all(&bytes).and_then(|_| out.flush()).is_err() {
                    // Dropping the stream kills the command: nobody reads it.
                    return Err(super::out::StdoutClosed.into());
                }
            }
            Some((STDERR, bytes)) => {
                let _ = std::io::stderr().lock().write_all(&bytes);
            }
            Some((EXEC_END, json)) => break serde_json::from_slice::<ExecEnd>(&json)?,
            // A kind from a newer manager.
            Some(_) => {}
            None => anyhow::bail!("the manager ended the exec's stream early; is it shutting down?"),
        }
    };
    if let Some(note) = &end.note {
        eprintln!("berth: exec in {id}: {}", crate::inert::visible(note));
    }
    if end.timed_out {
        eprintln!(
            "berth: exec in {id} was killed after {} s (--timeout)",
            req.timeout.unwrap_or_default()
        );
        return Ok(TIMED_OUT_EXIT);
    }
    Ok(end.exit_code.unwrap_or(1))
}

/// The error for `id` when no daemon answers: what the store knows of it.
fn without_daemon(config: &crate::config::Config, id: &JobId) -> Error {
    let no_daemon = Error::NoDaemon {
        instance: config.instance.clone(),
        socket: socket_path(config),
    };
    let db = config.instance_dir().join("berth.db");
    let Ok(store) = crate::store::Store::open_read_only(&db) else {
        return no_daemon;
    };
    match crate::store::find_run(&store, id) {
        Ok(None) => Error::UnknownJob(id.to_string()),
        Ok(Some(run)) if run.info.status.is_terminal() => Error::NotRunning {
            job: run.info.id.clone(),
            message: format!(
                "has ended ({}) and its container is gone: exec needs a running job (`berth resume {}` runs its command again)",
                run.info.status.name(),
                run.info.id
            ),
        },
        _ => no_daemon,
    }
}
