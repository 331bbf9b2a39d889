//! `berth mcp` when no manager serves the instance: this process hosts it,
//! like a daemon (socket, watchdog, adopted orphans), and serves its own MCP
//! session on stdin/stdout beside the sessions attached over the socket.
//! When a manager already serves the instance, the session attaches to it
//! instead (`mcp/attach.rs`). See `mcp/mod.rs` for sessions and ownership.

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::manager::Manager;
use crate::mcp::{self, ToolSet, session::Session};

/// `berth mcp`: serve MCP on stdio. When a manager already serves the
/// instance (a `berth up` daemon, or another `berth mcp`), open a session on
/// it; otherwise host the instance in-process, like a daemon, until stdin
/// ends and no attached session is left, a signal arrives or `berth down` asks.
pub async fn run_mcp(config: Config, tools: ToolSet) -> Result<()> {
    let me = Session::of_this_process(&config);
    if crate::api::client::Client::connect(&config).await.is_ok() {
        return mcp::attach(&config, tools, &me).await;
    }
    let manager = Manager::open(config.clone()).await?;
    manager.keep_warm();
    let bound = match super::bind(&manager) {
        Ok(b) => b,
        // A manager started between our check and our bind: use it.
        Err(Error::DaemonRunning { .. }) => {
            drop(manager);
            return mcp::attach(&config, tools, &me).await;
        }
        Err(e) => return Err(e),
    };
    // Cleans up if this process dies without tearing down (SIGKILL).
    crate::watchdog::spawn(&config)?;
    manager.adopt_orphans().await?;
    tracing::info!(socket = %bound.socket().display(), pid = std::process::id(), ?tools, "berth mcp serving");
    let sessions = bound.sessions();
    // The root of the host's tokens: stdin's end, a signal, or
    // `POST /v1/shutdown` (which cancels it from inside) ends everything.
    let stop = CancellationToken::new();
    let mut daemon = tokio::spawn(bound.serve(stop.clone()));
    let mut own = tokio::spawn(mcp::session::serve(
        manager.clone(),
        tools,
        me,
        tokio::io::stdin(),
        tokio::io::stdout(),
        sessions.closing(),
        // Its own stdin: the session lasts as long as its client.
        None,
    ));

    let (mut daemon_done, mut own_done) = (false, false);
    tokio::select! {
        _ = &mut own => {
            // stdin ended and this session's jobs are stopped; sessions
            // attached to this host keep it up until they end.
            own_done = true;
            if sessions.attached() > 0 {
                tracing::info!(attached = sessions.attached(), "stdin closed; serving the attached sessions until they end");
                tokio::select! {
                    _ = sessions.none_attached() => tracing::info!("the last attached session ended"),
                    _ = crate::teardown::signals() => tracing::info!("signal received"),
                    r = &mut daemon => {
                        daemon_done = true;
                        tracing::info!(result = ?r, "shutdown requested over the socket");
                    }
                }
            } else {
                tracing::info!("stdin closed");
            }
        }
        _ = crate::teardown::signals() => tracing::info!("signal received"),
        r = &mut daemon => {
            daemon_done = true;
            tracing::info!(result = ?r, "shutdown requested over the socket");
        }
    }
    // Teardown: every job stopped, sessions closed, the socket removed.
    stop.cancel();
    if !daemon_done {
        match (&mut daemon).await {
            Ok(Err(e)) => tracing::warn!(error = %e, "socket server ended with an error"),
            Err(e) => tracing::warn!(error = %e, "socket server task failed"),
            Ok(Ok(())) => {}
        }
    }
    // Our own session saw the teardown and lets its last answers out.
    if !own_done
        && tokio::time::timeout(mcp::session::DRAIN_ANSWERS * 2, &mut own)
            .await
            .is_err()
    {
        own.abort();
    }
    Ok(())
}
