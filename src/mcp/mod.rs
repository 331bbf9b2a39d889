//! The MCP server (`berth mcp`): MCP over stdio (rmcp), served by the
//! manager of the instance, so that every agent, the CLI and the TUI share one
//! cap, one event log and one job list.
//!
//! Theory of operation. `berth mcp` ([`crate::daemon::run_mcp`]) first asks
//! the instance socket: when a manager answers (a `berth up` daemon, or
//! another `berth mcp` hosting the instance), `attach.rs` opens an MCP
//! session on it (`POST /v1/mcp`, upgraded) and only pipes stdio to it.
//! Otherwise that process hosts the instance (`daemon/mcp_host.rs`): it
//! binds the socket ([`crate::daemon::bind`]), serves it in a
//! task (so `berth ps`, `berth logs`, `berth bg`, `berth kill --as user` and
//! further `berth mcp` sessions reach the same manager), and serves its own
//! session on stdin/stdout.
//!
//! Ownership. Every session (`session.rs`) has an owner id, and every job it
//! starts carries it (`spec.owner = mcp:<id>`) with the client's cwd
//! (`spec.caller_cwd`). When a session's input ends (stdin EOF; for an
//! attached client also SIGINT/SIGTERM, which drop its connection), its
//! queued and running jobs are stopped (`ended_by: system`, reason `session
//! ended`); other sessions' and the CLI's jobs keep running. The hosting
//! `berth mcp` whose own stdin ends stops its own jobs at once and keeps
//! serving while sessions are attached; once none is left (or on SIGINT,
//! SIGTERM, `berth down`), it tears down as a daemon does: every job stopped
//! (reason `shutdown`), sessions closed, socket removed, and `run` returns
//! (exit 0). Each session's input is read by the line framing in `stdio.rs`,
//! which answers lines that are not JSON with a JSON-RPC parse error (-32700)
//! and reports the end of input at once: rmcp alone would first wait up to
//! 5 s for in-flight calls, and a foreground run in flight only ends once its
//! job is stopped.
//!
//! Files: `server.rs` (rmcp handler: routing, errors as `isError`, backlog),
//! `core.rs` (start, wait, kill), `answer.rs` (how a started job is
//! answered: finished, promoted, background) with `waited.rs` (a wait in
//! words), `project.rs` (test/build commands), `format.rs` (answer text,
//! output caps; `dialect.rs` the tools its hints name), `logs.rs` (paging),
//! `backlog.rs` (unseen events), `spec.rs`
//! (the job settings every set shares, parsed once), `args.rs` + `tools.rs`
//! (canonical tools), `compat_shell.rs` and `compat_safe_shell.rs`,
//! `compat_process.rs`, `compat_exec.rs` (seed-compatible sets; `snippets.rs`
//! sends the exec set's output snippets once); `stdio.rs` (line framing,
//! parse errors), `session.rs` (owners, serving one session), `attach.rs`
//! (the client of a serving manager).
//!
//! Nothing but protocol may reach stdout: printing is denied below, and
//! tracing goes to stderr.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod answer;
mod apart;
mod args;
mod attach;
mod backlog;
mod compat_exec;
mod compat_process;
mod compat_safe_shell;
mod compat_shell;
mod copy;
mod core;
mod dialect;
mod format;
mod layers;
mod logs;
pub(crate) mod project;
mod server;
mod service;
pub mod session;
mod snippets;
mod spec;
mod stdio;
mod tools;
mod waited;

use std::str::FromStr;

pub use attach::run as attach;
pub use service::BerthMcp;

use crate::error::{Error, Result};

/// Which tools `berth mcp` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSet {
    /// run, status, list, logs, wait, wait_for_port, kill, resume, background, events, run_test, run_build, copy_out.
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
    "copy_out",
    "diff",
    "apply",
];
const SAFE_SHELL: &[&str] = &["safe_shell", "diff", "apply"];
const SHELL: &[&str] = &[
    "shell_run",
    "shell_summary",
    "shell_log",
    "shell_kill",
    "shell_resume",
    "diff",
    "apply",
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
    "diff",
    "apply",
];
const EXEC: &[&str] = &["shell", "diff", "apply"];

impl ToolSet {
    /// The names accepted by `--tools`.
    pub const NAMES: &'static [&'static str] =
        &["canonical", "all", "safe_shell", "shell", "process", "exec"];

    /// The set's name, as `--tools` takes it.
    pub fn name(self) -> &'static str {
        match self {
            ToolSet::Canonical => "canonical",
            ToolSet::All => "all",
            ToolSet::SafeShell => "safe_shell",
            ToolSet::Shell => "shell",
            ToolSet::Process => "process",
            ToolSet::Exec => "exec",
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_sets_parse_and_name_their_tools() {
        for name in ToolSet::NAMES {
            assert_eq!(name.parse::<ToolSet>().unwrap().name(), *name);
        }
        let err = "bogus".parse::<ToolSet>().unwrap_err().to_string();
        assert!(err.contains("safe_shell") && err.contains("exec"), "{err}");
        let all = ToolSet::All.tool_names();
        assert!(all.contains(&"safe_shell") && all.contains(&"shell_log") && all.contains(&"run"));
    }
}
