//! `berth run`: build a [`JobSpec`] from flags and run it in the foreground,
//! through the instance's daemon when one serves it (`via_daemon.rs`), else in
//! this process.
//!
//! Without a daemon there is no background to promote to, so this runs its
//! own in-process manager, driven by the same foreground driver as a daemon
//! run (`foreground.rs`): output is streamed live, `--timeout` kills the job
//! (exit 124, partial output kept), `--keep-alive` runs, feeds the input,
//! waits, kills and exits 0, and Ctrl+C (or SIGTERM, SIGHUP) stops the job
//! (exit 130).

use super::Global;
use super::foreground::Backend;
pub use super::run_args::RunArgs;
use crate::api::client::{Client, FrameReader};
use crate::config::Config;
use crate::error::Error;
use crate::manager::{DefaultBudget, Manager};
use crate::model::{JobSpec, OnTimeout};

pub async fn run(global: &Global, args: RunArgs) -> anyhow::Result<i32> {
    let config = global.config()?;
    let spec = args.spec(&config)?;
    if !args.no_daemon {
        return through_daemon(&config, &args, spec).await;
    }
    // One manager per instance: an in-process one takes the instance's
    // claim like a daemon, so two never share the store (their event seqs
    // would collide) or each have a cap of their own.
    let _claim = match crate::claim::Claim::take(&config) {
        Ok(claim) => claim,
        Err(Error::DaemonRunning { pid, .. }) => {
            // A daemon serves the instance: the run goes through it.
            eprintln!(
                "berth: a daemon serves instance `{}` (pid {pid}): this run goes through it (one cap, one record); --no-daemon runs in-process only when none does",
                config.instance
            );
            let client = Client::new(&config);
            if let Some(code) = super::via_daemon::run(&client, &args, spec.clone()).await? {
                return Ok(code);
            }
            // Still the daemon, not another in-process run: say the same.
            anyhow::bail!(
                "the daemon of instance `{}` (pid {pid}) does not answer on {} (starting or stopping?): try again in a moment, or stop it with `berth down`",
                config.instance,
                client.socket().display()
            );
        }
        Err(e) => return Err(e.into()),
    };
    in_process(config, &args, spec).await
}

/// The run through the instance's daemon, started on demand when none
/// answers the first request.
async fn through_daemon(config: &Config, args: &RunArgs, spec: JobSpec) -> anyhow::Result<i32> {
    // No health check first: the create request itself tells whether a
    // daemon answers (one round trip fewer on every run).
    let client = Client::new(config);
    if let Some(code) = super::via_daemon::run(&client, args, spec.clone()).await? {
        return Ok(code);
    }
    // None serves the instance: start one (parallel runs share it, one
    // cap and one store), bad input first named as such.
    spec.validate()?;
    super::daemon::on_demand(config).await?;
    match super::via_daemon::run(&client, args, spec).await? {
        Some(code) => Ok(code),
        None => Err(Error::NoDaemon {
            instance: config.instance.clone(),
            socket: client.socket().to_path_buf(),
        }
        .into()),
    }
}

/// The run in this process, under the instance's claim (held by the
/// caller): a manager of its own, driven like a daemon run.
async fn in_process(config: Config, args: &RunArgs, mut spec: JobSpec) -> anyhow::Result<i32> {
    // No manager to promote to: a budget that runs out kills, and there is
    // none unless `--timeout` gives one.
    spec.background = false;
    spec.on_timeout = OnTimeout::Kill;
    let manager = Manager::open(config).await?;
    let pulls = (!args.json).then(|| super::progress::follow_local(&manager));
    // Before the start: a ^C, SIGTERM or SIGHUP from here on stops the job.
    let interrupted = crate::teardown::signals();
    tokio::pin!(interrupted);
    let handle = manager.start_with(spec, "cli", DefaultBudget::Unlimited).await;
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
    let info = handle.info()?;
    // The frames a daemon would send, made here: one driver for both.
    let frames = FrameReader::local(crate::daemon::stream_job(
        manager.clone(),
        handle.id.clone(),
        None,
    ));
    // SIGTERM (a CI step's timeout) and SIGHUP (a closed terminal) too:
    // this process is the job's manager, and must not die leaving it.
    let driven =
        super::foreground::drive(Backend::InProcess(&manager), frames, &info, args, interrupted).await;
    // Every line and the final record reach the store before this process exits.
    manager.shutdown().await;
    driven
}
