//! The MCP server (`berth mcp`): MCP over stdio (rmcp) with the manager
//! in-process, also serving the instance socket so that `berth ps`, `berth
//! logs`, `berth bg` and `berth kill --as user` see and steer the agent's jobs.
//!
//! Theory of operation. [`run`] binds the instance socket
//! ([`crate::daemon::bind`]) and serves it in a task, then serves MCP on
//! stdin/stdout. The end of stdin, SIGINT, SIGTERM or `berth down` all end the
//! same way: the socket server's shutdown runs [`Manager::shutdown`] (every
//! job stopped, containers removed) and removes the socket, in-flight answers
//! get a moment to go out, and `run` returns (exit 0). stdin is read by the
//! line framing in `stdio.rs`, which answers lines that are not JSON with a
//! JSON-RPC parse error (-32700) and reports the end of input at once: rmcp
//! alone would first wait up to 5 s for in-flight calls, and a foreground run
//! in flight only ends once its job is stopped.
//!
//! Files: `server.rs` (rmcp handler: routing, errors as `isError`, backlog),
//! `core.rs` (start + answer, wait, kill), `project.rs` (test/build commands), `format.rs`
//! (answer text, output caps), `logs.rs` (paging), `backlog.rs` (unseen
//! events), `args.rs` + `tools.rs` (canonical tools), `compat_shell.rs` and
//! `compat_safe_shell.rs`, `compat_process.rs`, `compat_exec.rs` (seed-compatible sets); `stdio.rs`
//! (line framing, parse errors).
//!
//! Nothing but protocol may reach stdout: printing is denied below, and
//! tracing goes to stderr.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod backlog;
mod compat_exec;
mod compat_process;
mod compat_safe_shell;
mod compat_shell;
mod core;
mod format;
mod logs;
pub(crate) mod project;
mod server;
mod stdio;
mod tools;

use std::str::FromStr;
use std::time::Duration;

use rmcp::ServiceExt;
use tokio::sync::oneshot;

pub use server::BerthMcp;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::manager::Manager;

/// How long in-flight MCP answers get to go out after teardown.
const DRAIN_ANSWERS: Duration = Duration::from_millis(1500);

/// Which tools `berth mcp` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSet {
    /// run, status, list, logs, wait, wait_for_port, kill, resume, background, events, run_test, run_build.
    #[default]
    Canonical,
    /// Every tool of every set.
    All,
    /// `safe_shell` (a binary + args, blocking / keep-alive / background).
    SafeShell,
    /// `shell_run`, `shell_summary`, `shell_log`, `shell_kill`, `shell_resume`.
    Shell,
    /// `run_background`, `stop_process`, `list_processes`, `read_process_output`,
    /// `wait_for_service`, `wait_for_port`, `run_test`, `run_build`.
    Process,
    /// One action-style `shell` tool: spawn, poll, log, kill.
    Exec,
}

const CANONICAL: &[&str] = &[
    "run",
    "status",
    "list",
    "logs",
    "wait",
    "wait_for_port",
    "kill",
    "resume",
    "background",
    "events",
    "run_test",
    "run_build",
];
const SAFE_SHELL: &[&str] = &["safe_shell"];
const SHELL: &[&str] = &[
    "shell_run",
    "shell_summary",
    "shell_log",
    "shell_kill",
    "shell_resume",
];
const PROCESS: &[&str] = &[
    "run_background",
    "stop_process",
    "list_processes",
    "read_process_output",
    "wait_for_service",
    "wait_for_port",
    "run_test",
    "run_build",
];
const EXEC: &[&str] = &["shell"];

impl ToolSet {
    /// The names accepted by `--tools`.
    pub const NAMES: &'static [&'static str] =
        &["canonical", "all", "safe_shell", "shell", "process", "exec"];

    /// The tools of this set.
    pub fn tool_names(self) -> Vec<&'static str> {
        match self {
            ToolSet::Canonical => CANONICAL.to_vec(),
            ToolSet::SafeShell => SAFE_SHELL.to_vec(),
            ToolSet::Shell => SHELL.to_vec(),
            ToolSet::Process => PROCESS.to_vec(),
            ToolSet::Exec => EXEC.to_vec(),
            // Shared names (wait_for_port, run_test, run_build) are one tool.
            ToolSet::All => [CANONICAL, SAFE_SHELL, SHELL, PROCESS, EXEC].concat(),
        }
    }
}

impl FromStr for ToolSet {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "canonical" => Ok(ToolSet::Canonical),
            "all" => Ok(ToolSet::All),
            "safe_shell" => Ok(ToolSet::SafeShell),
            "shell" => Ok(ToolSet::Shell),
            "process" => Ok(ToolSet::Process),
            "exec" => Ok(ToolSet::Exec),
            _ => Err(Error::InvalidValue {
                what: "tool set",
                input: s.into(),
                message: format!("expected one of: {}", Self::NAMES.join(", ")),
            }),
        }
    }
}

/// Serve MCP on stdio with an in-process manager that also serves the
/// instance socket, until stdin ends, a signal arrives or `berth down` asks.
pub async fn run(config: Config, tools: ToolSet) -> Result<()> {
    let manager = Manager::new(config.clone())?;
    let bound = crate::daemon::bind(&manager)?;
    // Cleans up if this process dies without tearing down (SIGKILL).
    crate::watchdog::spawn(&config)?;
    manager.adopt_orphans().await?;
    tracing::info!(socket = %bound.socket().display(), pid = std::process::id(), ?tools, "berth mcp serving");
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let mut daemon = tokio::spawn(bound.serve(async {
        let _ = stop_rx.await;
    }));

    let stdio::Framed {
        to_rmcp,
        from_rmcp,
        mut eof,
    } = stdio::spawn(tokio::io::stdin(), tokio::io::stdout(), stdio::MAX_LINE);
    let server = BerthMcp::new(manager.clone(), tools);
    let (ct_tx, ct_rx) = oneshot::channel();
    let mut mcp = tokio::spawn(async move {
        match server.serve((to_rmcp, from_rmcp)).await {
            Ok(running) => {
                let _ = ct_tx.send(running.cancellation_token());
                let _ = running.waiting().await;
            }
            Err(e) => tracing::info!(error = %e, "MCP session ended before it began"),
        }
    });

    let (mut daemon_done, mut mcp_done) = (false, false);
    tokio::select! {
        _ = eof.wait_for(|e| *e) => tracing::info!("stdin closed"),
        _ = &mut mcp => {
            mcp_done = true;
            tracing::info!("MCP session ended");
        }
        _ = crate::daemon::signals() => tracing::info!("signal received"),
        r = &mut daemon => {
            daemon_done = true;
            tracing::info!(result = ?r, "shutdown requested over the socket");
        }
    }
    // Teardown: every job stopped and the socket removed (bounded by the grace).
    let _ = stop_tx.send(());
    if !daemon_done {
        match (&mut daemon).await {
            Ok(Err(e)) => tracing::warn!(error = %e, "socket server ended with an error"),
            Err(e) => tracing::warn!(error = %e, "socket server task failed"),
            Ok(Ok(())) => {}
        }
    }
    // Answers of calls that were waiting on jobs go out, then MCP stops.
    let mut ct_rx = ct_rx;
    if let Ok(ct) = ct_rx.try_recv() {
        ct.cancel();
    }
    if !mcp_done && tokio::time::timeout(DRAIN_ANSWERS, &mut mcp).await.is_err() {
        mcp.abort();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_sets_parse_and_name_their_tools() {
        for name in ToolSet::NAMES {
            assert!(name.parse::<ToolSet>().is_ok(), "{name}");
        }
        let err = "bogus".parse::<ToolSet>().unwrap_err().to_string();
        assert!(err.contains("safe_shell") && err.contains("exec"), "{err}");
        let all = ToolSet::All.tool_names();
        assert!(all.contains(&"safe_shell") && all.contains(&"shell_log") && all.contains(&"run"));
    }
}
